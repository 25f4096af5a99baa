"""The one mapping from a stack config to each component's arguments (components/platform_args.py).

Expected values are written from the stack files (Pulumi.onprem.yaml, Pulumi.aks.yaml) and the
tests' own edits, not computed by the mapping.
"""

from __future__ import annotations

from decimal import Decimal

from components import platform_args
from components.dra.tenancy import DraTeam
from components.loader import parse_config
from components.model.elastic import ANY_NODE, Line
from components.queueing.queues import Flavor
from tests.conftest import raw_stack


def test_aks_labels_the_ib_vfs_and_has_no_team_networks() -> None:
    cfg = parse_config(raw_stack("aks"))
    assert platform_args.network_operator(cfg).azure_vfs is True
    ncp = platform_args.nic_cluster_policy(cfg)
    assert (ncp.azure_vfs, ncp.secondary_network, ncp.sriov_pkeys, ncp.multus, ncp.nv_ipam) == (
        True,
        False,
        (),
        None,
        False,
    )
    # Two ND pools at maxCount 4 and 2 (Pulumi.aks.yaml).
    assert platform_args.ib_node_config(cfg).nodes == 6
    gpu = platform_args.gpu_operator(cfg)
    # AKS skips the pools' own driver (the operator brings it); ofedDriver: container.
    assert (gpu.driver_enabled, gpu.host_mofed) == (True, False)
    assert platform_args.rdma_shared_device_plugin(cfg).physical_functions_only is False


def test_onprem_team_partitions_become_vf_pools_sorted_by_team() -> None:
    raw = raw_stack("onprem")
    raw["teams"] = [
        {"name": "zeta", "partition": {"pkey": "0x0002", "vfIndex": 1}},
        {"name": "alpha", "partition": {"pkey": "0x0005", "vfIndex": 0}},
        {"name": "plain"},
    ]
    raw["queues"] = {"elastic": False}
    cfg = parse_config(raw)
    ncp = platform_args.nic_cluster_policy(cfg)
    assert (ncp.azure_vfs, ncp.secondary_network, ncp.sriov_pkeys, ncp.nv_ipam) == (
        False,
        True,
        (0x0005, 0x0002),
        False,
    )
    assert ncp.multus is not None
    assert platform_args.network_operator(cfg).cni_network_directory == ncp.multus.cni_conf_dir
    assert platform_args.rdma_shared_device_plugin(cfg).physical_functions_only is True
    gpu = platform_args.gpu_operator(cfg)
    assert (gpu.driver_enabled, gpu.host_mofed) == (False, True)
    assert [g.name for g in gpu.groups] == ["h100-mig", "h100-shared", "h100-full"]


def test_the_gate_and_the_release_order_pass_through_unchanged() -> None:
    cfg = parse_config(raw_stack("onprem"))
    marker: object = object()
    assert platform_args.nic_cluster_policy(cfg, gate=marker).gate is marker  # type: ignore[arg-type]
    assert platform_args.gpu_operator(cfg, gate=marker).gate is marker  # type: ignore[arg-type]
    assert platform_args.nic_cluster_policy(cfg).gate is None


# --------------------------------------------------------------------------------------------
# Queues, the DRA model, observability and verification


def test_onprem_queues_get_a_flavor_per_node_group_and_a_queue_per_team() -> None:
    cfg = parse_config(raw_stack("onprem"))
    q = platform_args.queues(cfg)
    assert q.queues is cfg.queues and q.versions is cfg.versions
    assert q.flavors == (Flavor("h100-mig"), Flavor("h100-shared"), Flavor("h100-full"))
    assert [(t.name, t.namespace, t.cohort) for t in q.teams] == [
        (name, name, "gpuaas") for name in ("vision", "language", "speech", "research", "inference", "platform-qa")
    ]
    # vision: quota.gpus 12 whole GPUs, which only h100-full offers, borrowing at most 8 more.
    vision = q.team("vision")
    assert vision.lines["h100-full"]["nvidia.com/gpu"] == Line(Decimal(12), Decimal(8), None)
    assert list(vision.lines)[-1] == ANY_NODE
    # observability on: ClusterQueue metrics; neither HAMi nor DRA: nothing more for Kueue to count.
    assert (q.cluster_queue_metrics, q.excluded_resource_prefixes, q.transformations, q.device_class_mappings) == (
        True,
        (),
        (),
        (),
    )
    assert (q.chart.chart, q.chart.version) == ("oci://registry.k8s.io/kueue/charts/kueue", "0.19.2")


def test_aks_queue_flavors_are_the_nd_pools_with_their_taints() -> None:
    raw = raw_stack("aks-elastic")
    raw["platform"]["gpuPools"][2]["taints"] = ["sku=shared:NoSchedule"]
    raw["observability"] = {"enabled": False}
    q = platform_args.queues(parse_config(raw))
    default = ("nvidia.com/gpu=present:NoSchedule",)
    assert q.flavors == (
        Flavor("ndh100a", aks_pool=True, taints=default),
        Flavor("ndh100b", aks_pool=True, taints=default),
        Flavor("ndshared", aks_pool=True, taints=("sku=shared:NoSchedule",)),
    )
    assert [t.name for t in q.teams] == ["training", "finetune", "interns"]
    assert q.cluster_queue_metrics is False


def test_dra_maps_offered_profiles_and_each_teams_claimable_classes() -> None:
    cfg = parse_config(raw_stack("onprem-dra"))
    d = platform_args.dra(cfg)
    # Layouts 1x4g.40gb-3x1g.10gb and all-1g.10gb (tests/stacks/onprem-dra.yaml), sorted.
    assert d.mig_profiles == ("1g.10gb", "4g.40gb")
    assert (d.node_pools, d.unowned_pools) == (False, ())
    assert d.teams[0] == DraTeam("vision", "vision", ("gpu.nvidia.com",), ("oidc:team-vision",))
    # Two of the three pools belong to a team's partition; interns (no partition) run on the third.
    aks = platform_args.dra(parse_config(raw_stack("aks-elastic")))
    assert (aks.node_pools, aks.unowned_pools) == (True, ("ndshared",))


def test_observability_maps_groups_and_kueue_only_with_elastic_queues() -> None:
    cfg = parse_config(raw_stack("onprem"))
    marker = (object(),)
    o = platform_args.observability(cfg, kueue_after=marker)  # type: ignore[arg-type]
    assert o.observability is cfg.observability and o.kueue_after is marker
    assert list(o.team_groups) == ["vision", "language", "speech", "research", "inference", "platform-qa"]
    assert list(o.groups) == ["fleet", "dcgm", "allocation", "queues", "alerts"]
    assert o.kueue_namespace == "kueue-system"
    aks = platform_args.observability(parse_config(raw_stack("aks")))
    assert (aks.kueue_namespace, "queues" in aks.groups) == (None, False)


def test_verification_maps_the_verify_teams_probes_and_burn_in_groups() -> None:
    raw = raw_stack("onprem")
    v = platform_args.verification(parse_config(raw))
    assert [t.key for t in v.targets] == ["vision"]  # the one team with verify: true
    # By name after vision, wrapping: inference, in another partition.
    assert [(p.client.key, p.server.key) for p in v.probes] == [("vision", "inference")]
    assert v.burn_in_groups == {}  # burn-in off by default
    raw["verification"] = {"burnIn": {"enabled": True}}
    on = platform_args.verification(parse_config(raw))
    # Whole GPUs on at least two nodes: h100-full only (4 nodes); h100-mig and h100-shared have one each.
    assert on.burn_in_groups == {"vision": (("h100-full", "gpuaas.io/node-group", "h100-full"),)}
    assert not any(t.gpu_claims for t in on.targets)
    aks = platform_args.verification(parse_config(raw_stack("aks")))
    assert [(t.key, t.pool) for t in aks.targets] == [("training", "ndh100a")]
    claimed = platform_args.verification(parse_config(raw_stack("onprem-dra"))).targets
    assert claimed and all(t.gpu_claims for t in claimed)
