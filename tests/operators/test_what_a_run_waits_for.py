"""What a `pulumi up` waits for on the operators' policies (docs/notes/what-a-run-waits-for.md).

Every ``pulumi.com/waitFor`` of every plan is evaluated, as pulumi-kubernetes evaluates it, against
the status the Network Operator writes in each situation — written here from network-operator
v26.4.1's source (../shared/upstream/src/network-operator-v26.4.1), not from ``components/``:

- ``pkg/state/state_ofed.go`` (``GetManifestObjects``, ~598): no node labelled
  ``feature.node.kubernetes.io/pci-15b3.present=true`` → no objects → ``SyncStateNotReady`` (~415);
- ``pkg/state/state_skel.go`` ``isDaemonSetReady`` (~494): a DaemonSet is ready only when
  ``DesiredNumberScheduled != 0`` and every scheduled pod is available and updated — an empty pool
  (0 desired) or one NotReady node (a pod unavailable) is not ready;
- ``pkg/state/manager.go`` ``SyncState`` (~90): one state not ready, the policy ``notReady``;
- ``controllers/nicclusterpolicy_controller.go`` ``Reconcile``: the status is written after every
  state's objects are applied (``updateCrStatus`` after ``SyncState``), and not before the first
  reconcile.

The evaluator follows pulumi-kubernetes ``provider/pkg/jsonpath/jsonpath.go`` (``Parse``:
``jsonpath=`` prefix, ``{path}`` with an optional ``=value``; ``Matches``: without a value the path
must select something, with one the selected value's text must equal it); it knows dotted paths
only and fails naming any other expression, so a new kind of wait cannot pass unread.
"""

from __future__ import annotations

import re
from typing import Any, Final

import pytest

from components.plan.offline import ROOT, Run, run_program, stack_config
from components.plan.writer import manifest
from tests.conftest import offline_run

WAIT_FOR: Final = "pulumi.com/waitFor"
_DOTTED: Final = re.compile(r"^jsonpath=\{((?:\.[A-Za-z0-9_-]+)+)\}(?:=(.+))?$")

#: What the Network Operator writes into the NicClusterPolicy's status, by situation (see the module docstring).
NOT_RECONCILED: Final[dict[str, Any]] = {}
AKS_FIRST_RUN_EMPTY_ND_POOLS: Final = {
    "status": {
        "state": "notReady",
        "appliedStates": [
            {"name": "state-OFED", "state": "notReady"},  # no Mellanox node: no objects
            {"name": "state-RDMA-device-plugin", "state": "notReady"},  # DesiredNumberScheduled == 0
        ],
    }
}
ONPREM_ONE_RDMA_NODE_NOT_READY: Final = {
    "status": {
        "state": "notReady",
        "appliedStates": [{"name": "state-SRIOV-device-plugin", "state": "notReady"}],  # one pod unavailable
    }
}
HEALTHY: Final = {
    "status": {"state": "ready", "appliedStates": [{"name": "state-SRIOV-device-plugin", "state": "ready"}]}
}

#: The situations a run must get through; every awaited object's wait must be met in each.
NO_NODE_READY: Final = {
    "aks first run, ND pools empty": AKS_FIRST_RUN_EMPTY_ND_POOLS,
    "on-prem, one RDMA node NotReady": ONPREM_ONE_RDMA_NODE_NOT_READY,
}


def wait_met(expression: str, obj: dict[str, Any]) -> bool:
    """Whether pulumi-kubernetes' ``pulumi.com/waitFor`` ``expression`` is met by ``obj``."""
    m = _DOTTED.match(expression)
    assert m, f"this evaluator knows dotted JSONPaths only, with an optional =value; got {expression!r}"
    path, value = m.group(1), m.group(2)
    here: Any = obj
    for key in path.strip(".").split("."):
        if not isinstance(here, dict) or key not in here:
            return False  # "selected nothing"
        here = here[key]
    if value is None:
        return True
    if isinstance(here, (dict, list)):
        return False  # pulumi-kubernetes refuses a value test on a non-primitive
    # Go's fmt.Sprint of the selected value: booleans print lower case.
    return (str(here).lower() if isinstance(here, bool) else str(here)) == value


def awaited(run: Run) -> dict[str, tuple[str, str]]:
    """``kind/name`` -> (its ``pulumi.com/waitFor``, its kind) of every object in the plan that has one."""
    out: dict[str, tuple[str, str]] = {}
    for r in run.records:
        if r.custom and r.type.startswith("kubernetes:"):
            obj = manifest(r)
            wait = ((obj.get("metadata") or {}).get("annotations") or {}).get(WAIT_FOR)
            if wait is not None:
                out[f"{obj['kind']}/{obj['metadata']['name']}"] = (str(wait), str(obj["kind"]))
    return out


def runs() -> dict[str, Run]:
    variants = {"aks-elastic": "aks", "onprem-dra": "onprem", "onprem-hami": "onprem"}
    out = {stack: offline_run(stack) for stack in ("onprem", "aks")}
    for variant, stack in variants.items():
        out[variant] = run_program(stack, config=stack_config(stack, ROOT / "tests" / "stacks" / f"{variant}.yaml"))
    return out


@pytest.fixture(scope="module")
def plans() -> dict[str, Run]:
    return runs()


# --------------------------------------------------------------------------------------------
# the evaluator


def test_the_evaluator_reads_a_wait_as_pulumi_kubernetes_does() -> None:
    obj = {"status": {"state": "notReady", "ready": True}}
    assert wait_met("jsonpath={.status.state}", obj)
    assert not wait_met("jsonpath={.status.state}", {"status": {}})
    assert wait_met("jsonpath={.status.state}=notReady", obj)
    assert not wait_met("jsonpath={.status.state}=ready", obj)
    assert wait_met("jsonpath={.status.ready}=true", obj) and not wait_met("jsonpath={.status.ready}=True", obj)
    with pytest.raises(AssertionError, match="dotted JSONPaths only"):
        wait_met("jsonpath={.status.conditions[?(@.type=='Ready')].status}=True", obj)


# --------------------------------------------------------------------------------------------
# the plans


def test_every_wait_of_every_plan_is_met_while_no_rdma_node_is_ready(plans: dict[str, Run]) -> None:
    """The AKS first run (ND pools at 0) and an on-prem run with one RDMA node NotReady finish: no
    object waits for a readiness only a node can give. Today's ``=ready`` failed both."""
    problems = []
    for stack, run in plans.items():
        waits = awaited(run)
        assert waits, f"{stack}: no object with {WAIT_FOR}: the NicClusterPolicy's is expected"
        for ref, (wait, kind) in waits.items():
            assert kind == "NicClusterPolicy", (
                f"{stack}: {ref} waits ({wait}) and this test has no oracle of its status"
            )
            problems += [
                f"{stack}: {ref} {wait!r} never met when {why}"
                for why, o in NO_NODE_READY.items()
                if not wait_met(wait, o)
            ]
    assert not problems, "\n".join(problems)


def test_a_run_still_waits_for_the_operator_to_have_reconciled_the_policy(plans: dict[str, Run]) -> None:
    """The allowed twin: a wait that is met whatever happens would not order anything. Before the
    operator's first reconcile there is no status, and the run waits; once it is healthy, it goes on."""
    for stack, run in plans.items():
        for ref, (wait, _kind) in awaited(run).items():
            assert not wait_met(wait, NOT_RECONCILED), f"{stack}: {ref} {wait!r} is met before the operator read it"
            assert wait_met(wait, HEALTHY), f"{stack}: {ref} {wait!r} is not met on a healthy fleet"
