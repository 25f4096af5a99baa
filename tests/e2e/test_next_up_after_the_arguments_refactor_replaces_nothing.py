"""The components' own arguments (issue #33 item 2): the next `pulumi up` replaces and deletes nothing.

The refactor that gave every component its own arguments (``<Name>Args``, mapped from the stack
config by ``components/platform_args.py``) must leave an existing user's stack alone: same URNs
(or aliases), so the engine keeps every resource. Proved with the real engine on the tests' onprem
stack: `pulumi up` with the program as it was before the refactor (:data:`BEFORE_ARGS`, unpacked
from git history), then `pulumi preview` of this checkout's program on that same state and config.

What the preview may do, and nothing more (the oracle: each program run offline under the SDK's
mocks with the same config, in its own tree, :func:`planned_inputs`):

- no replace, no delete, no create-replacement (only ``same``, ``update``, ``create``, ``read``),
  and every resource of the old program's state counted as unchanged, updated or read;
- ``update`` only where the two programs' inputs differ: changes other issues made on purpose
  since that commit (an alert, a chart value), each listed in the run's output with its diff;
- ``create`` only of resources (type and name) the old program did not have, added since;
- ``read`` only of what every run reads (the last run's outputs, the Prometheus CRD checks).

A renamed child without an alias fails it (tried: the team member ClusterRole's logical name
changed, the preview's ``delete`` of the old one named in the failure).

The Azure part cannot run here; tests/test_urns.py compares its URNs and aliases under mocks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.loader import gpuaas_section, parse_config
from components.model.config import StackConfig
from components.plan.diff import extract
from e2e.engine import Operators, PulumiError, Stack, repo_stack_config, with_mirror
from e2e.fleet import Fleet
from e2e.plan_apply import install_prerequisites
from tests.conftest import offline_run, stack_path
from tests.e2e.conftest import _say, need_upstream
from tests.e2e.fleet_nodes import fleet_nodes

ROOT = Path(__file__).resolve().parents[2]

#: The last commit before the refactor began: "URNs are a contract: record every resource's ...,
#: snapshot taken on the code before the components take their own arguments (issue #33 item 2)",
#: the parent of the first ``<Name>Args`` commit (2e50547, ``NetworkOperatorArgs``). Its program
#: takes the tests' onprem stack file of today as it is.
BEFORE_ARGS = "1cc0c2cce653b2edb6d024b8428d5afcb7ca9b6a"

BASE = repo_stack_config("onprem", stack_path("onprem"))["config"]
CFG: StackConfig = parse_config(gpuaas_section(BASE))

#: The steps a preview may propose here; anything else (replace, create-replacement,
#: delete-replaced, delete, discard, import) would move a user's resource.
ALLOWED_OPS = {"same", "update", "create", "read"}

#: The engine's default provider for the StackReference: in the state, not in a preview's count.
DEFAULT_PROVIDER = "urn:pulumi:onprem::gpuaas::pulumi:providers:pulumi::default"

#: Read on every run, by either program: the MIG guard's StackReference to the stack's last
#: outputs and the observability component's look at the Prometheus stack's CRDs.
INHERENT_READS = {
    "gpuaas-last-run",
    "gpuaas-observability-needs-servicemonitors-crd",
    "gpuaas-observability-needs-prometheusrules-crd",
}

#: Run in a program's own tree (its ``components``, its ``__main__.py``), under the SDK's mocks:
#: every resource's type, name and inputs (as JSON text).
RECORD_INPUTS = """
import json, sys
from components.plan.offline import run_program
run = run_program("onprem", config=json.loads(open(sys.argv[1]).read()))
out = [[r.type, r.name, json.dumps(r.inputs, sort_keys=True, default=repr)] for r in run.records]
open(sys.argv[2], "w").write(json.dumps(out))
"""


#: A resource as both the engine and the mocks name it: (type, name). The mocks' URNs name only the
#: immediate parent's type, the engine's the whole chain, so URNs are not compared across them.
Key = tuple[str, str]


def key(urn: str) -> Key:
    return urn.split("::")[2].rsplit("$", 1)[-1], urn.rsplit("::", 1)[1]


def old_program(into: Path) -> Path:
    """The tree at :data:`BEFORE_ARGS` (4 MB), unpacked into ``into``: its program reads files beside
    ``components/`` too (the verification's benchmark script in ``workloads/``)."""
    git = shutil.which("git")
    if git is None:
        pytest.fail("git is not on PATH: this test unpacks the program of an earlier commit with `git archive`")
    found = subprocess.run([git, "-C", str(ROOT), "cat-file", "-e", f"{BEFORE_ARGS}^{{commit}}"], check=False)
    if found.returncode != 0:
        pytest.fail(
            f"commit {BEFORE_ARGS} (the program before issue #33's refactor) is not in {ROOT}'s history: "
            "this test needs a clone with history (actions/checkout with fetch-depth: 0, or `git fetch --unshallow`)"
        )
    archive = subprocess.run(
        [git, "-C", str(ROOT), "archive", "--format=tar", BEFORE_ARGS],
        capture_output=True,
        check=True,
    )
    extract(archive.stdout, into)
    return into


def planned_inputs(program: Path, config: dict[str, Any], workdir: Path) -> dict[Key, str]:
    """(type, name) -> inputs (JSON text) of ``program``'s run under mocks with ``config``, in a process of its own."""
    cfg_file, out_file = workdir / f"{program.name}-config.json", workdir / f"{program.name}-inputs.json"
    cfg_file.write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    run = subprocess.run(
        [sys.executable, "-c", RECORD_INPUTS, str(cfg_file), str(out_file)],
        cwd=program,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, f"{program}: the offline run failed:\n{run.stderr[-4000:]}"
    records = json.loads(out_file.read_text())
    found = {(typ, name): inputs for typ, name, inputs in records}
    assert len(found) == len(records), f"{program}: two resources of one type and name"
    return found


@dataclasses.dataclass
class Moved:
    preview: dict[str, Any]
    state_urns: set[str]
    old: dict[Key, str]
    new: dict[Key, str]

    def ops(self) -> dict[str, set[str]]:
        """op -> URNs of the preview's steps (``same`` ones are left out of ``--json`` but the root's)."""
        out: dict[str, set[str]] = {}
        for s in self.preview.get("steps", []):
            out.setdefault(s["op"], set()).add(s["urn"])
        return out

    def changed(self) -> set[Key]:
        """The resources both programs have whose inputs differ."""
        return {k for k, inputs in self.new.items() if k in self.old and self.old[k] != inputs}


@pytest.fixture(scope="module")
def moved(pytestconfig: pytest.Config) -> Iterator[Moved]:
    """`pulumi up` with the program before the refactor, then a preview of this checkout's."""
    need_upstream()
    tmp = Path(tempfile.mkdtemp(prefix="gpuaas-before-args-"))
    old = old_program(tmp / "before-args")
    # The pin is what it says: the components took the whole stack config then, their own arguments now.
    assert "NetworkOperatorArgs" not in (old / "components/operators/network_operator.py").read_text()
    assert "NetworkOperatorArgs" in (ROOT / "components/operators/network_operator.py").read_text()
    fleet = Fleet.start([spec.manifest() for spec in fleet_nodes(CFG)])
    try:
        install_prerequisites(fleet.kube, offline_run("onprem"))
        ctx = BASE["gpuaas:platform"]["kubeconfigContext"]
        kubeconfig = fleet.cp.write_kubeconfig(fleet.cp.workdir / "engine.kubeconfig", context=ctx)
        stack = Stack(kubeconfig, workdir=tmp / "engine", program=old)
        stack.init(BASE)
        with Operators(fleet.kube, CFG):
            try:
                up = stack.up()
            except PulumiError as e:
                raise AssertionError(
                    f"the program of {BEFORE_ARGS[:7]} could not `pulumi up` the tests' onprem stack: a key added to "
                    "tests/stacks/onprem.yaml since that commit, or a chart version its pins name that the chart "
                    f"mirror no longer holds, would do that (the error is below)\n{e}"
                ) from e
            state_urns = {r["urn"] for r in stack.resources()}
            stack.use_program(ROOT)
            res = stack.pulumi("preview", "--json")
        preview = json.loads(res.out[res.out.index("{") :])
        if os.environ.get("GPUAAS_E2E_KEEP"):
            (tmp / "preview.json").write_text(json.dumps(preview, indent=1))
        _say(
            pytestconfig,
            f"e2e: before-args: up of onprem with {BEFORE_ARGS[:7]}'s program in {up.seconds:.1f} s "
            f"({len(state_urns)} resources), preview with this checkout's in {res.seconds:.1f} s",
        )
        config = with_mirror(BASE, stack.charts)
        yield Moved(preview, state_urns, planned_inputs(old, config, tmp), planned_inputs(ROOT, config, tmp))
    finally:
        fleet.stop()
        if not os.environ.get("GPUAAS_E2E_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)


def test_the_preview_replaces_and_deletes_nothing(moved: Moved) -> None:
    ops = moved.ops()
    assert set(ops) <= ALLOWED_OPS, {op: sorted(ops[op]) for op in set(ops) - ALLOWED_OPS}
    assert {key(u)[1] for u in ops.get("read", set())} == INHERENT_READS
    # The preview covers the whole stack: every resource the old program's `up` left in the state
    # (its default provider aside, which the engine does not count) is unchanged, updated or read.
    summary = moved.preview["changeSummary"]
    kept = sum(summary.get(op, 0) for op in ("same", "update", "read"))
    assert kept == len({u for u in moved.state_urns if not u.startswith(DEFAULT_PROVIDER)}), summary


def test_only_what_other_changes_changed_is_updated_or_created(moved: Moved, pytestconfig: pytest.Config) -> None:
    ops = moved.ops()
    updated = {key(u) for u in ops.get("update", set())}
    created = {key(u) for u in ops.get("create", set())}
    # An update only where the two programs' inputs differ: the refactor itself changes no input.
    assert updated <= moved.changed(), sorted(updated - moved.changed())
    # A create only of what the old program did not have.
    assert created <= set(moved.new) - set(moved.old), sorted(created & set(moved.old))
    for s in moved.preview["steps"]:
        if s["op"] in ("update", "create"):
            _say(pytestconfig, f"e2e: before-args: {s['op']} {key(s['urn'])[1]} ({fields(s)})")


def fields(step: dict[str, Any]) -> str:
    """What an update changes, in short: its diff's paths, the first three of them."""
    paths = sorted(step.get("detailedDiff") or {})
    if not paths:
        return "new" if step["op"] == "create" else ", ".join(step.get("diffReasons") or [])
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
