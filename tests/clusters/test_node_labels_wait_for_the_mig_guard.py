"""The on-prem NodePatch labels wait for the day-2 MIG guard themselves (issue #21, item 20).

Ungating the labels (``metadata=body["metadata"]``) left the suite green: the patches still waited
for the mig-parted ConfigMap, which is gated too, so no failing run ever sent them. That is one
refactor away from relabelling nodes (and MIG Manager re-partitioning their GPUs) on a run the
guard refuses. So each patch must depend on the guard's own input, the stack's last run.
"""

from __future__ import annotations

from tests.conftest import offline_run

NODE_PATCH = "kubernetes:core/v1:NodePatch"
LAST_RUN = "pulumi:pulumi:StackReference::gpuaas-last-run"


def test_every_node_patch_waits_for_the_last_run_the_guard_reads() -> None:
    patches = [r for r in offline_run("onprem").records if r.type == NODE_PATCH]
    assert len(patches) == 6  # gpu-node-01..06 of tests/stacks/onprem.yaml
    for patch in patches:
        assert any(d.endswith(LAST_RUN) for d in patch.dependencies), (patch.name, patch.dependencies)


def test_the_guards_input_is_what_they_wait_for_not_any_dependency() -> None:
    """The twin: a resource that does not carry MIG labels (a team's namespace) does not wait for it."""
    run = offline_run("onprem")
    [namespace] = [
        r for r in run.records if r.type == "kubernetes:core/v1:Namespace" and r.name == "gpuaas-teams-vision-namespace"
    ]
    assert not any(d.endswith(LAST_RUN) for d in namespace.dependencies)
