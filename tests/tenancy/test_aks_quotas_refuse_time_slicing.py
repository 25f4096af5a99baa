"""AKS team quotas, pinned from tests/stacks/aks.yaml's numbers (issue #21, item 20).

Dropping ``requests.nvidia.com/gpu.shared: "0"`` left the suite green: no AKS pool time-slices, so
only the explicit zero refuses a time-sliced GPU there, and the on-prem tests see it from the fleet.
Without it a team could take ``nvidia.com/gpu.shared`` as soon as a pool starts time-slicing, beyond
any quota. The whole ``spec.hard`` is written out here: a key lost or added fails.
"""

from __future__ import annotations

from components.loader import parse_config
from components.tenancy.quotas import quota_hard
from tests.conftest import raw_stack

# training: gpus 32, rdma 32; finetune: gpus 16, rdma 16 (each its own ND pool); the model's defaults
# cpu 64, memory 512Gi, pods 200; every other GPU kind a pod could ask for: 0.
PINNED = {
    "training": {"gpu": "32", "rdma": "32"},
    "finetune": {"gpu": "16", "rdma": "16"},
}


def test_aks_team_quotas_are_exactly_these() -> None:
    cfg = parse_config(raw_stack("aks"))
    for team in cfg.teams:
        n = PINNED[team.name]
        assert quota_hard(cfg, team) == {
            "pods": "200",
            "requests.cpu": "64",
            "requests.memory": "512Gi",
            "requests.nvidia.com/gpu": n["gpu"],
            "requests.nvidia.com/gpu.shared": "0",
            "requests.rdma/hcashared": n["rdma"],
        }, team.name
