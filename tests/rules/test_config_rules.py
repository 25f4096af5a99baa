"""Table-driven config rules: each case edits one of the tests' own stacks and asserts the exact error path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.loader import parse_config
from components.model.errors import ConfigError
from tests.conftest import raw_stack

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    """An edit that sets ``a.b[2].c`` (config key names) to ``value``."""

    def edit(raw: dict[str, Any]) -> None:
        node: Any = raw
        parts = path.replace("[", ".[").split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            key: Any = int(part[1:-1]) if part.startswith("[") else part
            if last:
                node[key] = value
            else:
                node = node[key]

    return edit


def _del(path: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        node: Any = raw
        parts = path.replace("[", ".[").split(".")
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        del node[parts[-1]]

    return edit


#: Hard quotas (the fleet-wide rules); the tests' onprem stack is elastic (tests/queueing/test_elastic.py).
def HARD(raw: dict[str, Any]) -> None:  # noqa: N802 - reads as a constant in the tables
    raw["queues"]["elastic"] = False


def _append_team(team: dict[str, Any]) -> Edit:
    return lambda raw: raw["teams"].append(team)


def _issues(stack: str, *edits: Edit) -> list[str]:
    raw = raw_stack(stack)
    for e in edits:
        e(raw)
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    return [str(i) for i in err.value.issues]


INVALID: list[tuple[str, str, list[Edit], str, str]] = [
    # (id, stack, edits, expected path, a fragment of the reason)
    ("unknown-top-key", "onprem", [_set("colour", "blue")], "gpuaas:colour", "unknown key; allowed:"),
    (
        "unknown-nested-key",
        "onprem",
        [_set("teams[1].partition.guid", "x")],
        "gpuaas:teams[1].partition.guid",
        "unknown key",
    ),
    ("bad-dns-team", "onprem", [_set("teams[0].name", "Vision_Team")], "gpuaas:teams[0].name", "DNS-1123"),
    ("bad-dns-node", "onprem", [_set("platform.nodes[0].name", "Node 1")], "gpuaas:platform.nodes[0].name", "DNS-1123"),
    ("dup-team", "onprem", [_set("teams[1].name", "vision")], "gpuaas:teams[1].name", "duplicate team 'vision'"),
    # A duplicate of a team with a GPU quota, on a team without one (the elastic rules once raised KeyError).
    ("dup-team-gpu", "onprem", [_set("teams[3].name", "vision")], "gpuaas:teams[3].name", "duplicate team 'vision'"),
    ("dup-namespace", "onprem", [_set("teams[2].namespace", "vision")], "gpuaas:teams[2].namespace", "already used"),
    ("reserved-ns", "onprem", [_set("teams[0].namespace", "kube-system")], "gpuaas:teams[0].namespace", "reserved"),
    (
        "pkey-msb-only",
        "onprem",
        [_set("teams[1].partition.pkey", "0x8000")],
        "gpuaas:teams[1].partition.pkey",
        "0x8000 is outside 0x0001..0x7ffe (0x7fff is the default partition)",
    ),
    (
        "pkey-default",
        "onprem",
        [_set("teams[1].partition.pkey", "0x7fff")],
        "gpuaas:teams[1].partition.pkey",
        "outside 0x0001..0x7ffe",
    ),
    ("pkey-17-bit", "onprem", [_set("teams[1].partition.pkey", 0x1_0001)], "gpuaas:teams[1].partition.pkey", "16-bit"),
    (
        "pkey-garbage",
        "onprem",
        [_set("teams[1].partition.pkey", "zz")],
        "gpuaas:teams[1].partition.pkey",
        "not a P_Key",
    ),
    (
        "pkey-dup-int",
        "onprem",
        [_set("teams[1].partition.pkey", 1)],
        "gpuaas:teams[1].partition.pkey",
        "already the partition of 'vision'",
    ),
    ("pkey-dup-short", "onprem", [_set("teams[1].partition.pkey", "0x1")], "gpuaas:teams[1].partition.pkey", "already"),
    (
        "pkey-dup-full",
        "onprem",
        [_set("teams[1].partition.pkey", "0x8001")],
        "gpuaas:teams[1].partition.pkey",
        "already",
    ),
    (
        "vf-beyond",
        "onprem",
        [_set("teams[1].partition.vfIndex", 6)],
        "gpuaas:teams[1].partition.vfIndex",
        "beyond the 6 VFs per HCA",
    ),
    ("vf-dup", "onprem", [_set("teams[1].partition.vfIndex", 0)], "gpuaas:teams[1].partition.vfIndex", "already bound"),
    (
        "vfs-over-firmware",
        "onprem",
        [_set("platform.fabric.vfsPerHca", 20)],
        "gpuaas:platform.fabric.vfsPerHca",
        "exceeds firmwareMaxVfs=16",
    ),
    (
        "firmware-over-127",
        "onprem",
        [_set("platform.fabric.firmwareMaxVfs", 128)],
        "gpuaas:platform.fabric.firmwareMaxVfs",
        "less than or equal to 127",
    ),
    (
        "mig-unknown-profile",
        "onprem",
        [_set("platform.nodeGroups[0].mig.layout", "1x4g.40gb-3x1g.5gb")],
        "gpuaas:platform.nodeGroups[0].mig.layout",
        "profile '1g.5gb' does not exist on H100-80GB",
    ),
    (
        "mig-too-much-compute",
        "onprem",
        [_set("platform.nodeGroups[0].mig.layout", "1x4g.40gb-1x3g.40gb-1x1g.10gb")],
        "gpuaas:platform.nodeGroups[0].mig.layout",
        "compute slices",
    ),
    (
        "mig-too-much-memory",
        "onprem",
        [
            _del("platform.nodeGroups[0].mig.layout"),
            _set("platform.nodeGroups[0].mig.profiles", {"1g.20gb": 4, "1g.10gb": 1}),
        ],
        "gpuaas:platform.nodeGroups[0].mig.profiles",
        "memory slices",
    ),
    (
        "mig-max-instances",
        "onprem",
        [_set("platform.nodeGroups[0].mig.layout", "2x4g.40gb")],
        "gpuaas:platform.nodeGroups[0].mig.layout",
        "exceeds the 1 instances",
    ),
    (
        "mig-bad-term",
        "onprem",
        [_set("platform.nodeGroups[0].mig.layout", "four-by-four")],
        "gpuaas:platform.nodeGroups[0].mig.layout",
        "is not '<count>x<profile>'",
    ),
    (
        "mig-and-timeslice",
        "onprem",
        [_set("platform.nodeGroups[0].timeSlicing", {"replicas": 2})],
        "gpuaas:platform.nodeGroups[0].timeSlicing",
        "not supported",
    ),
    (
        "mig-single-mixed",
        "onprem",
        [_set("gpuOperator.migStrategy", "single")],
        "gpuaas:platform.nodeGroups[0].mig.layout",
        "single allows one profile",
    ),
    (
        "unknown-gpu",
        "onprem",
        [_set("platform.nodeGroups[2].gpuModel", "H100-81GB")],
        "gpuaas:platform.nodeGroups[2].gpuModel",
        "unknown GPU model",
    ),
    (
        "timeslice-zero",
        "onprem",
        [_set("platform.nodeGroups[1].timeSlicing.replicas", 0)],
        "gpuaas:platform.nodeGroups[1].timeSlicing.replicas",
        "at least 1 (got 0)",
    ),
    (
        "node-unknown-group",
        "onprem",
        [_set("platform.nodes[0].nodeGroup", "h200")],
        "gpuaas:platform.nodes[0].nodeGroup",
        "'h200' is not a node group",
    ),
    ("node-dup-id", "onprem", [_set("platform.nodes[1].id", 1)], "gpuaas:platform.nodes[1].id", "already the id"),
    (
        "guid-node-overflow",
        "onprem",
        [_set("platform.nodes[1].id", 70000)],
        "gpuaas:platform.nodes[1].id",
        "does not fit guidScheme.nodeBits=16",
    ),
    (
        "guid-base-overlap",
        "onprem",
        [_set("platform.fabric.guidScheme.base", "0x0200000000000001")],
        "gpuaas:platform.fabric.guidScheme.base",
        "low 28 bits",
    ),
    (
        "guid-zero-base",
        "onprem",
        [_set("platform.fabric.guidScheme.base", "0x0")],
        "gpuaas:platform.fabric.guidScheme.base",
        "not a usable GUID",
    ),
    (
        "guid-vf-bits",
        "onprem",
        [_set("platform.fabric.guidScheme.vfBits", 2)],
        "gpuaas:platform.fabric.guidScheme.vfBits",
        "hold 4 VF indices",
    ),
    (
        "quota-gpus-over",
        "onprem",
        [HARD, _set("teams[2].quota.gpus", 9)],
        "gpuaas:teams[*].quota.gpus",
        "teams ask for 33 nvidia.com/gpu",
    ),
    (
        "quota-mig-over",
        "onprem",
        [HARD, _set("teams[3].quota.mig", {"4g.40gb": 5, "1g.10gb": 12})],
        'gpuaas:teams[*].quota.mig["4g.40gb"]',
        "the fleet has 8",
    ),
    (
        "quota-mig-unoffered",
        "onprem",
        [_set("teams[3].quota.mig", {"7g.80gb": 1})],
        'gpuaas:teams[3].quota.mig["7g.80gb"]',
        "no node group offers",
    ),
    (
        "quota-shared-over",
        "onprem",
        [HARD, _set("teams[4].quota.timeSlicedGpus", 17)],
        "gpuaas:teams[4].quota.timeSlicedGpus",
        "the fleet has 16",
    ),
    (
        "quota-rdma-over-partition",
        "onprem",
        [_set("teams[0].quota.rdma", 49)],
        "gpuaas:teams[0].quota.rdma",
        "nvidia.com/sriov8001",
    ),
    (
        "aks-partition-onprem",
        "onprem",
        [_set("teams[0].partition", {"nodePool": "ndh100a"})],
        "gpuaas:teams[0].partition",
        "needs platform kind aks",
    ),
    ("verify-without-partition", "onprem", [_del("teams[0].partition")], "gpuaas:teams[0].verify", "need a partition"),
    (
        "aks-missing-pool",
        "aks",
        [_set("teams[0].partition.nodePool", "ndh200")],
        "gpuaas:teams[0].partition.nodePool",
        "'ndh200' is not a GPU pool",
    ),
    (
        "aks-pkey-partition",
        "aks",
        [_set("teams[0].partition", {"pkey": 1, "vfIndex": 0})],
        "gpuaas:teams[0].partition",
        "needs platform kind onprem",
    ),
    (
        "aks-unknown-sku",
        "aks",
        [_set("platform.gpuPools[0].vmSize", "Standard_ND96isr_H900_v9")],
        "gpuaas:platform.gpuPools[0].vmSize",
        "unknown GPU VM size",
    ),
    (
        "aks-non-ib-sku",
        "aks",
        [_set("platform.gpuPools[0].vmSize", "Standard_NC24ads_A100_v4")],
        "gpuaas:platform.gpuPools[0].vmSize",
        "has no InfiniBand",
    ),
    (
        "aks-min-over-max",
        "aks",
        [_set("platform.gpuPools[1].minCount", 3)],
        "gpuaas:platform.gpuPools[1].minCount",
        "above maxCount 2",
    ),
    (
        "aks-system-zero",
        "aks",
        [_set("platform.systemPool.minCount", 0)],
        "gpuaas:platform.systemPool.minCount",
        "cannot scale to zero",
    ),
    (
        "aks-pool-name",
        "aks",
        [_set("platform.gpuPools[0].name", "nd-h100-pool-a")],
        "gpuaas:platform.gpuPools[0].name",
        "not an AKS pool name",
    ),
    ("aks-gpu-quota-over", "aks", [_set("teams[1].quota.gpus", 17)], "gpuaas:teams[*].quota.gpus", "the fleet has 48"),
    ("platform-kind", "onprem", [_set("platform.kind", "gke")], "gpuaas:platform", "kind"),
    (
        "multus-missing-with-partitions",
        "onprem",
        [_del("platform.multus")],
        "gpuaas:platform.multus",
        "clusterNetwork: k8s-pod-network",
    ),
    (
        "multus-cluster-network-empty",
        "onprem",
        [_set("platform.multus.clusterNetwork", "")],
        "gpuaas:platform.multus.clusterNetwork",
        "should match pattern",
    ),
    (
        "multus-cluster-network-quote",
        "onprem",
        [_set("platform.multus.clusterNetwork", "k8s-pod-network' x")],
        "gpuaas:platform.multus.clusterNetwork",
        "should match pattern",
    ),
    (
        "multus-conf-dir-relative",
        "onprem",
        [_set("platform.multus.cniConfDir", "etc/cni/net.d")],
        "gpuaas:platform.multus.cniConfDir",
        "is not an absolute path",
    ),
    (
        "network-namespace-default",
        "onprem",
        [_set("network", {"namespace": "default"})],
        "gpuaas:network.namespace",
        "Multus treats NADs of the Network Operator namespace as global",
    ),
    (
        "chart-version-range",
        "onprem",
        [_set("versions", {"gpuOperatorChart": "^26"})],
        "gpuaas:versions.gpuOperatorChart",
        "pinned chart version",
    ),
    (
        "image-latest",
        "onprem",
        [_set("versions", {"docaDriver": "latest"})],
        "gpuaas:versions.docaDriver",
        "pinned image tag",
    ),
    (
        "isolation-unknown-target",
        "onprem",
        [_set("verification", {"isolationPairs": [{"client": "vision", "server": "nobody"}]})],
        "gpuaas:verification.isolationPairs[0].server",
        "'nobody' is not a target: a team with a partition",
    ),
    (
        "isolation-same-partition",
        "aks",
        [
            _set(
                "verification", {"aksPools": True, "isolationPairs": [{"client": "training", "server": "pool-ndh100a"}]}
            ),
        ],
        "gpuaas:verification.isolationPairs[0].server",
        "both in pool ndh100a: a probe between them would connect",
    ),
    (
        "isolation-pool-without-aks-pools",
        "aks",
        [_set("verification", {"isolationPairs": [{"client": "pool-ndh100a", "server": "training"}]})],
        "gpuaas:verification.isolationPairs[0].client",
        "(known: finetune, training)",
    ),
    (
        "isolation-duplicate",
        "onprem",
        [
            _set(
                "verification",
                {
                    "isolationPairs": [
                        {"client": "vision", "server": "speech"},
                        {"client": "vision", "server": "speech"},
                    ]
                },
            )
        ],
        "gpuaas:verification.isolationPairs[1]",
        "the same probe as verification.isolationPairs[0]",
    ),
    (
        "isolation-server-without-rdma-quota",
        "onprem",
        [
            _set("teams[5].quota", {"rdma": 0}),
            _set("verification", {"isolationPairs": [{"client": "vision", "server": "platform-qa"}]}),
        ],
        "gpuaas:verification.isolationPairs[0].server",
        "has quota.rdma: 0, so its probe pod",
    ),
    (
        "perftest-unpinned",
        "onprem",
        [_set("versions", {"perftestDigest": None})],
        "gpuaas:versions.perftestDigest",
        "needs a pin: a digest (sha256:…) or a tag in versions.perftest",
    ),
    (
        "perftest-digest-grammar",
        "onprem",
        [_set("versions", {"perftestDigest": "sha256:ABC"})],
        "gpuaas:versions.perftestDigest",
        "not an image digest",
    ),
    (
        "burn-in-schedule",
        "onprem",
        [_set("verification", {"burnIn": {"enabled": True, "schedule": "every night"}})],
        "gpuaas:verification.burnIn.schedule",
        "not a CronJob schedule",
    ),
    (
        "burn-in-priority-not-below-teams",
        "onprem",
        [_set("verification", {"burnIn": {"priority": 0}})],
        "gpuaas:verification.burnIn.priority",
        "less than or equal to -1",
    ),
    (
        # Found on the simulated fleet: the proof pairs need two nodes (required anti-affinity).
        "verified-pool-of-one-node",
        "aks",
        [_set("platform.gpuPools[0].maxCount", 1)],
        "gpuaas:teams[0].verify",
        "pairs of pods on two nodes of pool 'ndh100a', whose maxCount is 1",
    ),
    (
        "verified-pool-without-whole-gpus",
        "aks",
        [_set("platform.gpuPools[0].mig", {"layout": "all-1g.10gb"})],
        "gpuaas:teams[0].verify",
        "pool 'ndh100a' advertises none",
    ),
    (
        "nccl-pair-with-one-whole-gpu-node",
        "onprem",
        [HARD] + [_set(f"platform.nodes[{i}].nodeGroup", "h100-shared") for i in (1, 2, 3)],
        "gpuaas:teams[0].verify",
        "1 node(s) are whole-GPU nodes",
    ),
    (
        # Review item 1: shared RDMA for a partitionless team while teams have partitions.
        "rdma-without-partition-beside-partitions",
        "aks",
        [_append_team({"name": "interns", "quota": {"rdma": 1}})],
        "gpuaas:teams[2].quota.rdma",
        "a team without a partition may have no RDMA while other teams have partitions",
    ),
]


@pytest.mark.parametrize(("stack", "edits", "where", "why"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_config_names_the_key(stack: str, edits: list[Edit], where: str, why: str) -> None:
    issues = _issues(stack, *edits)
    matching = [i for i in issues if i.startswith(f"{where}: ")]
    assert matching, f"no issue at {where}; got {issues}"
    assert any(why in i for i in matching), f"{why!r} not in {matching}"


VALID: list[tuple[str, str, list[Edit]]] = [
    ("onprem-as-checked-in", "onprem", []),
    ("aks-as-checked-in", "aks", []),
    ("pkey-as-int", "onprem", [_set("teams[1].partition.pkey", 0x7FFE)]),
    ("pkey-full-member-form", "onprem", [_set("teams[1].partition.pkey", "0xfffe")]),
    (
        "mig-profiles",
        "onprem",
        [
            _del("platform.nodeGroups[0].mig.layout"),
            _set("platform.nodeGroups[0].mig.profiles", {"4g.40gb": 1, "1g.10gb": 3}),
        ],
    ),
    (
        "mig-all-balanced",
        "onprem",
        [
            _set("platform.nodeGroups[0].mig.layout", "all-balanced"),
            _set("teams[3].quota.mig", {"3g.40gb": 1}),
            _set("teams[5].quota.mig", {}),
        ],
    ),
    (
        "oversubscription-allowed",
        "onprem",
        [HARD, _set("teams[2].quota.gpus", 100), _set("quotaPolicy", {"allowOversubscription": True})],
    ),
    ("team-without-partition", "onprem", [_append_team({"name": "interns", "quota": {"cpu": "8", "memory": "32Gi"}})]),
    ("aks-team-without-partition-no-rdma", "aks", [_append_team({"name": "interns", "quota": {"rdma": 0}})]),
    (
        "aks-shared-rdma-where-no-team-has-a-partition",
        "aks",
        [lambda raw: raw.update(teams=[{"name": "interns", "quota": {"gpus": 1, "rdma": 1}}])],
    ),
    (
        "no-partitions-no-multus",
        "onprem",
        [_del("platform.multus"), lambda raw: raw.update(teams=[{"name": "interns"}])],
    ),
    (
        "aks-existing-cluster",
        "aks",
        [_set("platform.existingCluster", True), _set("platform.resourceGroup.create", False)],
    ),
    (
        "isolation-pairs-and-burn-in",
        "aks",
        [
            _set(
                "verification",
                {
                    "aksPools": True,
                    "isolationPairs": [{"client": "pool-ndh100a", "server": "finetune"}],
                    "burnIn": {"enabled": True, "schedule": "@weekly", "priority": -5},
                },
            )
        ],
    ),
    # the allowed twins of the proof-pair rules: two nodes of the pool, two whole-GPU nodes
    (
        "verified-pool-of-two-nodes",
        "aks",
        [_set("platform.gpuPools[0].maxCount", 2), _set("teams[0].quota", {"gpus": 16, "rdma": 16})],
    ),
    (
        "nccl-pair-with-two-whole-gpu-nodes",
        "onprem",
        [HARD, _set("teams[1].quota.gpus", 4), _set("teams[2].quota.gpus", 0)]
        + [_set(f"platform.nodes[{i}].nodeGroup", "h100-shared") for i in (2, 3)],
    ),
    ("isolation-none", "onprem", [_set("verification", {"isolationPairs": []})]),
    ("perftest-by-tag", "onprem", [_set("versions", {"perftestDigest": None, "perftest": "20260714-101500"})]),
]


@pytest.mark.parametrize(("stack", "edits"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_config_parses(stack: str, edits: list[Edit]) -> None:
    raw = raw_stack(stack)
    for e in edits:
        e(raw)
    cfg = parse_config(raw)
    assert cfg.platform.kind == stack


def test_all_problems_are_reported_at_once() -> None:
    issues = _issues(
        "onprem",
        _set("teams[1].partition.pkey", 1),
        _set("teams[2].partition.vfIndex", 9),
        _set("platform.nodes[0].nodeGroup", "nope"),
    )
    paths = {i.split(": ", 1)[0] for i in issues}
    assert {
        "gpuaas:teams[1].partition.pkey",
        "gpuaas:teams[2].partition.vfIndex",
        "gpuaas:platform.nodes[0].nodeGroup",
    } <= paths


def test_structural_errors_are_all_reported_together() -> None:
    issues = _issues(
        "onprem", _set("teams[0].name", "Bad Name"), _set("teams[1].partition.pkey", "0x8000"), _set("x", 1)
    )
    assert len(issues) == 3


def test_rendered_error_is_one_line_per_problem() -> None:
    raw = raw_stack("onprem")
    raw["teams"][1]["partition"]["pkey"] = "0x8000"
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    lines = err.value.render().splitlines()
    assert lines[0] == "gpuaas: 1 problem in the stack config:"
    assert lines[1].strip() == (
        "gpuaas:teams[1].partition.pkey: 0x8000 is outside 0x0001..0x7ffe (0x7fff is the default partition)"
    )


def test_config_is_frozen() -> None:
    cfg = parse_config(raw_stack("onprem"))
    with pytest.raises(Exception, match="frozen"):
        cfg.teams[0].name = "other"  # type: ignore[misc]


def test_structural_and_cross_field_problems_come_together() -> None:
    issues = _issues(
        "onprem",
        _set("colour", "blue"),
        _set("teams[1].partition.pkey", "0x8000"),
        _set("teams[2].partition.vfIndex", 6),
    )
    paths = [i.split(": ", 1)[0] for i in issues]
    assert paths == ["gpuaas:colour", "gpuaas:teams[1].partition.pkey", "gpuaas:teams[2].partition.vfIndex"]
