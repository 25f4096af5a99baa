"""Teams as stack config: invariants (hypothesis), bad-input table, and the wired program.

Invariants: reordering ``gpuaas:teams`` changes nothing; adding a team leaves every other team's
objects, and the shared team objects (member role, admission policies), byte-identical — foreign
partition resources are refused by admission, not zeroed in each quota (:mod:`components.tenancy.quotas`);
no GUID is in two partitions;
every rendered ``partitions.conf`` passes the tests' own OpenSM grammar checker.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.fabric import guid_plan
from components.fabric.partitions import opensm_conf, partitions_conf
from components.loader import parse_config
from components.model import resources
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.plan import writer
from components.plan.offline import run_program
from components.rules.tenancy import RESERVED_NAMESPACES
from components.tenancy import admission, quotas
from tests import tenancy_objects
from tests.conftest import fixture_config, qualified, raw_stack
from tests.fabric.test_partitions import osm_parse

VFS = 8


def _base() -> dict[str, Any]:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"].update({"vfsPerHca": VFS, "firmwareMaxVfs": 16})
    raw["teams"] = []
    return raw


@st.composite
def team_lists(draw: st.DrawFn, min_size: int = 1, max_size: int = VFS) -> list[dict[str, Any]]:
    n = draw(st.integers(min_size, max_size))
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True).filter(
                lambda s: s not in RESERVED_NAMESPACES and not s.startswith("kube-") and "--" not in s
            ),
            min_size=n,
            max_size=n,
            unique=True,
        )
    )
    pkeys = draw(st.lists(st.integers(1, 0x7FFE), min_size=n, max_size=n, unique=True))
    vfs = draw(st.permutations(list(range(VFS))))[:n]
    spell = draw(st.lists(st.sampled_from(["int", "short", "full"]), min_size=n, max_size=n))
    ipoib = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    out = []
    for name, pkey, vf, how, ib in zip(names, pkeys, vfs, spell, ipoib, strict=True):
        written: int | str = pkey if how == "int" else f"0x{pkey:x}" if how == "short" else f"0x{pkey | 0x8000:04x}"
        out.append(
            {
                "name": name,
                "groups": [f"oidc:{name}"],
                "partition": {"pkey": written, "vfIndex": vf, "ipoib": ib},
                "quota": {"cpu": "4", "memory": "8Gi"},
            }
        )
    return out


def _cfg(team_list: list[dict[str, Any]]) -> StackConfig:
    raw = _base()
    raw["teams"] = copy.deepcopy(team_list)
    return parse_config(raw)


def _rendered(cfg: StackConfig) -> dict[str, str]:
    """Every team's objects as canonical JSON, keyed ``<team>/<role>``."""
    return {
        f"{t.name}/{role}": json.dumps(obj, sort_keys=True)
        for t in cfg.teams
        for role, obj in tenancy_objects.team_objects(cfg, t).items()
    }


def _bytes(cfg: StackConfig) -> dict[str, bytes]:
    """Every team's objects and the team-wide ones as the bytes the plan writes (components/plan/writer.py)."""
    out = {
        f"{t.name}/{role}": writer.dump(writer._ordered(obj)).encode()
        for t in cfg.teams
        for role, obj in tenancy_objects.team_objects(cfg, t).items()
    }
    out["*/member-role"] = writer.dump(writer._ordered(tenancy_objects.cluster_role(cfg))).encode()
    for role, obj in tenancy_objects.admission_objects(cfg).items():
        out[f"*/{role}"] = writer.dump(writer._ordered(obj)).encode()
    return out


PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(team_lists(), st.randoms(use_true_random=False))
def test_reordering_teams_changes_nothing(team_list: list[dict[str, Any]], rnd: Any) -> None:
    shuffled = list(team_list)
    rnd.shuffle(shuffled)
    a, b = _cfg(team_list), _cfg(shuffled)
    assert _rendered(a) == _rendered(b)
    assert partitions_conf(a) == partitions_conf(b)
    assert guid_plan.guid_plan(a) == guid_plan.guid_plan(b)
    assert {t.name: tenancy_objects.team_export(a, t) for t in a.teams} == {
        t.name: tenancy_objects.team_export(b, t) for t in b.teams
    }


@PROPS
@given(team_lists(min_size=2), st.data())
def test_adding_a_team_leaves_the_others_alone(team_list: list[dict[str, Any]], data: st.DataObject) -> None:
    new = data.draw(st.integers(0, len(team_list) - 1))
    without = [t for i, t in enumerate(team_list) if i != new]
    small, big = _cfg(without), _cfg(team_list)
    added = big.teams[new]
    before, after = _bytes(small), _bytes(big)
    assert set(after) - set(before) == {f"{added.name}/{role}" for role in tenancy_objects.team_objects(big, added)}
    assert set(before) <= set(after)
    changed = sorted(key for key, data in before.items() if after[key] != data)
    assert changed == [], f"adding {added.name!r} changed {changed}"
    # isolation kept: the others' quotas do not name the new partition, and admission refuses it there
    foreign = resources.sriov_resource(added.partition.pkey)
    for team in small.teams:
        assert f"requests.{foreign}" not in quotas.quota_hard(big, team)
        spec = {"containers": [{"name": "m", "resources": {"limits": {foreign: "1"}}}]}
        assert admission.partition_resource_violations(spec, quotas.own_partition_resource(team)) == [foreign]
        assert admission.partition_resource_violations(spec, foreign) == []
    # the other teams' partition lines are untouched
    old_lines = set(partitions_conf(small).splitlines())
    new_lines = set(partitions_conf(big).splitlines())
    assert old_lines <= new_lines
    assert all(line.startswith(f"{added.name}=") for line in new_lines - old_lines)


@PROPS
@given(team_lists())
def test_partitions_parse_and_never_share_a_guid(team_list: list[dict[str, Any]]) -> None:
    cfg = _cfg(team_list)
    parts = osm_parse(partitions_conf(cfg))
    assert set(parts) == {0x7FFF} | {t.partition.pkey for t in cfg.teams}
    owners: dict[str, int] = {}
    for pkey, part in parts.items():
        assert len(part.names) == 1
        for port in part.ports:
            if port.startswith("0x"):
                assert owners.setdefault(port, pkey) == pkey, f"{port} in {owners[port]:#x} and {pkey:#x}"
    assert len(owners) == len(cfg.teams) * 6 * 8


# --------------------------------------------------------------------------------------------
# Bad input: every problem path-qualified


def _issues(stack: str, edit: Any) -> list[str]:
    raw = raw_stack(stack)
    edit(raw)
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    return [str(i) for i in err.value.issues]


def _set(*path: Any, value: Any) -> Any:
    def edit(raw: dict[str, Any]) -> None:
        node: Any = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _many_nodes(n: int, vfs: int = 6, hcas: int = 8, ipam: str = "none") -> Any:
    def edit(raw: dict[str, Any]) -> None:
        p = raw["platform"]
        p["nodeGroups"][2]["hcas"] = [f"mlx5_{i}" for i in range(hcas)]
        p["nodes"] = [{"name": f"node-{i:04d}", "id": i + 1, "nodeGroup": "h100-full"} for i in range(n)]
        p["fabric"].update({"vfsPerHca": vfs, "firmwareMaxVfs": max(vfs, 16), "ipam": ipam})
        for t in raw["teams"]:
            t["quota"] = {"cpu": "1", "memory": "1Gi"}
            t.pop("queue", None)  # its limits refer to the quota just dropped

    return edit


def _huge_node(raw: dict[str, Any]) -> None:
    """One node whose VF GUID plan alone exceeds a ConfigMap: 30000 HCAs (a line each)."""
    _many_nodes(2, hcas=30_000)(raw)
    raw["platform"]["fabric"]["guidScheme"] = {"hcaBits": 15}


BAD = [
    (
        "pkey-1-vs-0x8001",
        "onprem",
        _set("teams", 1, "partition", "pkey", value="0x8001"),
        "gpuaas:teams[1].partition.pkey",
    ),
    ("pkey-int-vs-hex", "onprem", _set("teams", 1, "partition", "pkey", value=1), "gpuaas:teams[1].partition.pkey"),
    ("vf-beyond", "onprem", _set("teams", 1, "partition", "vfIndex", value=6), "gpuaas:teams[1].partition.vfIndex"),
    ("node-id-overflow", "onprem", _set("platform", "nodes", 0, "id", value=1 << 16), "gpuaas:platform.nodes[0].id"),
    (
        "guid-base-overlap",
        "onprem",
        _set("platform", "fabric", "guidScheme", "base", value="0x0200000000000001"),
        "gpuaas:platform.fabric.guidScheme.base",
    ),
    (
        "guid-bits-overflow",
        "onprem",
        _set("platform", "fabric", "guidScheme", "nodeBits", value=48),
        "gpuaas:platform.fabric.guidScheme",
    ),
    (
        "vf-bits",
        "onprem",
        _set("platform", "fabric", "guidScheme", "vfBits", value=2),
        "gpuaas:platform.fabric.guidScheme.vfBits",
    ),
    (
        "hca-bits",
        "onprem",
        _set("platform", "fabric", "guidScheme", "hcaBits", value=2),
        "gpuaas:platform.fabric.guidScheme.hcaBits",
    ),
    ("gpu-quota-over", "onprem", _set("teams", 2, "quota", "gpus", value=100), "gpuaas:teams[*].quota.gpus"),
    ("rdma-quota-over", "onprem", _set("teams", 0, "quota", "rdma", value=49), "gpuaas:teams[0].quota.rdma"),
    (
        "vf-config-operator",
        "onprem",
        _set("platform", "fabric", "vfConfig", value="sriov-network-operator"),
        "gpuaas:platform.fabric.vfConfig",
    ),
    (
        "aks-shared-pool",
        "aks",
        _set("teams", 1, "partition", "nodePool", value="ndh100a"),
        "gpuaas:teams[1].partition.nodePool",
    ),
    ("guid-plan-too-big", "onprem", _huge_node, "gpuaas:platform.nodeGroups[2].hcas"),
    ("nv-ipam-too-many-nodes", "onprem", _many_nodes(40, ipam="nv-ipam"), "gpuaas:platform.fabric.ipam"),
]


def _nv_ipam(supernet: str, pkey: Any = None) -> Any:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["fabric"].update({"ipam": "nv-ipam", "ipamSupernet": supernet})
        if pkey is not None:
            raw["teams"][3]["partition"]["pkey"] = pkey

    return edit


BAD += [
    ("nv-ipam-not-a-net", "onprem", _nv_ipam("not-a-net"), "gpuaas:platform.fabric.ipamSupernet"),
    ("nv-ipam-too-small", "onprem", _nv_ipam("10.0.0.0/24"), "gpuaas:platform.fabric.ipamSupernet"),
    ("nv-ipam-pkey-outside", "onprem", _nv_ipam("10.0.0.0/20", "0x0011"), "gpuaas:teams[3].partition.pkey"),
]


@pytest.mark.parametrize(("case", "stack", "edit", "path"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_path_qualified(case: str, stack: str, edit: Any, path: str) -> None:
    issues = _issues(stack, edit)
    assert any(i.startswith(f"{path}: ") for i in issues), issues


def test_nv_ipam_fits_by_default() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["ipam"] = "nv-ipam"
    parse_config(raw)


# --------------------------------------------------------------------------------------------
# The wired program


def test_platform_exports(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    run = run_program("onprem", config=fixture_config("onprem"))
    assert run.outputs["partitionsConf"] == partitions_conf(cfg)
    assert run.outputs["opensmConf"] == opensm_conf(cfg)
    vision = run.outputs["teams"]["vision"]
    assert vision == {
        "namespace": "vision",
        "pkey": "0x0001",
        "fullPkey": "0x8001",
        "vfIndex": 0,
        "guidCount": 48,
        "sriovResource": "nvidia.com/sriov8001",
        "nad": "ib-vision",
        "quota": tenancy_objects.team_export(cfg, cfg.teams[0])["quota"],
    }
    types = {r.name: r.type for r in run.records}
    assert types["gpuaas-teams-vision-nad"] == "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
    assert types["gpuaas-sriov-host-daemonset"] == "kubernetes:apps/v1:DaemonSet"
    assert types["gpuaas-admission-networks-policy"].endswith("ValidatingAdmissionPolicy")
    teams_urn = run.named("gpuaas-teams").urn
    assert all(r.parent == teams_urn for r in run.records if r.name.startswith("gpuaas-teams-"))
    ns = run.named("gpuaas-teams-vision-namespace").urn
    assert ns in run.named("gpuaas-teams-vision-nad").dependencies
    assert run.named("gpuaas-sriov-host-daemonset").urn in run.named("gpuaas-teams-vision-nad").dependencies


def test_removing_a_team_removes_exactly_its_objects() -> None:
    raw = raw_stack("onprem")
    full = run_program("onprem", config=qualified(raw))
    gone = raw["teams"].pop(1)
    assert gone["name"] == "language" and not gone.get("verify")
    less = run_program("onprem", config=qualified(raw))
    before = {r.name: r for r in full.records}
    after = {r.name: r for r in less.records}
    removed = set(before) - set(after)
    # its team objects and, with elastic quotas, its ClusterQueue and LocalQueue, its PrometheusRule, and the
    # isolation probe the verifying team (vision) ran against its partition
    own = (
        "gpuaas-teams-language-",
        "gpuaas-queues-language-",
        "gpuaas-observability-rules-team-language",
        "gpuaas-verification-isolation-vision-to-language-",
    )
    assert removed == {n for n in before if n.startswith(own)}
    assert not set(after) - set(before)
    for name, rec in after.items():
        if name.startswith(("gpuaas-teams-", "gpuaas-admission-", "gpuaas-observability-")):
            assert rec.inputs == before[name].inputs, name


def test_guid_plan_resources_do_not_grow_with_the_fleet() -> None:
    small = raw_stack("onprem")
    big = copy.deepcopy(small)
    _many_nodes(60)(big)
    counts = []
    for raw in (small, big):
        run = run_program("onprem", config=qualified(raw))
        sriov = run.named("gpuaas-sriov-host").urn
        opensm_urn = run.named("gpuaas-opensm").urn
        counts.append(sum(1 for r in run.records if r.parent in (sriov, opensm_urn)))
    # One GUID-plan shard per node group in use, the P_Key table, the DaemonSet, the OpenSM
    # ConfigMap and one partitions.conf part: 60 nodes in one group need fewer resources than 6
    # nodes in three.
    assert counts == [3 + 1 + 1 + 1 + 1, 1 + 1 + 1 + 1 + 1]
