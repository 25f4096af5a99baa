"""Properties of every accepted config: partitions are unique and GPUs are never over-committed."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.loader import parse_config
from components.model.capacity import capacity, team_requests
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.model.teams import OnPremPartition

PKEY_SPELLINGS = st.integers(1, 12).flatmap(
    lambda k: st.sampled_from([k, str(k), f"0x{k:x}", f"0x{k:04x}", f"0x{k | 0x8000:04x}"])
)


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    layouts = ["all-disabled", "1x4g.40gb-3x1g.10gb", "all-1g.10gb", "2x3g.40gb", "all-balanced"]
    groups = []
    for g in range(draw(st.integers(1, 3))):
        group: dict[str, Any] = {
            "name": f"g{g}",
            "gpuModel": "H100-80GB",
            "gpusPerNode": draw(st.integers(1, 8)),
            "hcas": [f"mlx5_{h}" for h in range(draw(st.integers(1, 4)))],
        }
        mode = draw(st.sampled_from(["plain", "mig", "ts"]))
        if mode == "mig":
            group["mig"] = {"layout": draw(st.sampled_from(layouts))}
        elif mode == "ts":
            group["timeSlicing"] = {"replicas": draw(st.integers(1, 4))}
        groups.append(group)
    nodes = [
        {"name": f"n{i}", "id": i, "nodeGroup": f"g{draw(st.integers(0, len(groups) - 1))}"}
        for i in range(draw(st.integers(1, 6)))
    ]
    teams = []
    for t in range(draw(st.integers(0, 6))):
        team: dict[str, Any] = {
            "name": f"t{t}",
            "quota": {
                "gpus": draw(st.integers(0, 16)),
                "timeSlicedGpus": draw(st.integers(0, 16)),
                "mig": draw(
                    st.dictionaries(st.sampled_from(["1g.10gb", "4g.40gb", "3g.40gb"]), st.integers(0, 8), max_size=2)
                ),
                "rdma": draw(st.integers(0, 8)),
            },
        }
        if draw(st.booleans()):
            team["partition"] = {"pkey": draw(PKEY_SPELLINGS), "vfIndex": draw(st.integers(0, 7))}
        teams.append(team)
    return {
        "platform": {
            "kind": "onprem",
            "kubernetesVersion": "1.37.2",
            "nodeGroups": groups,
            "nodes": nodes,
            "fabric": {"vfsPerHca": draw(st.integers(1, 8))},
            "multus": {"clusterNetwork": "cilium"},
        },
        "teams": teams,
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_accepted_configs_have_unique_partitions_and_no_overcommit(raw: dict[str, Any]) -> None:
    try:
        cfg: StackConfig = parse_config(raw)
    except ConfigError as err:
        assert err.issues, "a rejected config always says why"
        assert all(i.path.startswith("gpuaas:") for i in err.issues)
        return
    parts = [t.partition for t in cfg.teams if isinstance(t.partition, OnPremPartition)]
    assert len({p.pkey for p in parts}) == len(parts)
    assert len({p.vf_index for p in parts}) == len(parts)
    cap = capacity(cfg)
    asked: Counter[str] = Counter()
    for i in range(len(cfg.teams)):
        asked.update(team_requests(cfg, i))
    for resource, n in asked.items():
        assert n <= cap.get(resource, 0), resource
