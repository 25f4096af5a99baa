# gpuaas — two commands on a fresh clone: `make plan` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STACK  ?= onprem

.PHONY: plan plans test lint typecheck unit bench clean

# The virtualenv (Pulumi.yaml names it too) is rebuilt whenever a requirements file changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

## plan: offline plan of STACK (default onprem) into plan/STACK — no cloud, cluster or credentials.
plan: $(VENV)/.installed
	$(BIN)/python -m components.plan $(STACK)

## plans: offline plans of every checked-in stack.
plans: $(VENV)/.installed
	for s in onprem aks; do $(BIN)/python -m components.plan $$s --quiet || exit 1; done

## test: lint, strict type check and the whole test suite (what CI runs).
test: lint typecheck unit

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check components tests

typecheck: $(VENV)/.installed
	$(BIN)/mypy --strict components

unit: $(VENV)/.installed
	$(BIN)/python -m pytest -q

## bench: the scale benchmark of the offline plan (not part of `make test`).
bench: $(VENV)/.installed
	$(BIN)/python benchmarks/plan_scale.py

clean:
	rm -rf plan bench-out .pytest_cache .mypy_cache .ruff_cache
