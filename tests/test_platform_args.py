"""The one mapping from a stack config to each component's arguments (components/platform_args.py).

Expected values are written from the stack files (Pulumi.onprem.yaml, Pulumi.aks.yaml) and the
tests' own edits, not computed by the mapping.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from components import platform_args
from components.dra.tenancy import DraTeam
from components.loader import parse_config
from components.model import resources, versions
from components.model.elastic import ANY_NODE, Line
from components.queueing.queues import Flavor
from components.tenancy.admission import AdmissionArgs
from components.tenancy.networks import PartitionNetworks
from tests.conftest import raw_stack
from tests.hami_cases import TEAM as HAMI_TEAM
from tests.hami_cases import hami_cfg, hami_raw


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
# Tenancy: the team set and the admission guards


def test_onprem_teams_get_partition_networks_and_the_partition_guard() -> None:
    cfg = parse_config(raw_stack("onprem"))
    assert platform_args.admission(cfg) == AdmissionArgs(partitions=True, node_pools=None, hami_core_policy=None)
    args = platform_args.teams(cfg)
    # Six nodes of 8 HCAs each, one VF per HCA per partition; nv-ipam's block is one address per HCA.
    assert args.networks == PartitionNetworks(
        ipam="none",
        ipam_supernet="192.168.0.0/16",
        per_node_block=8,
        pool_namespace="nvidia-network-operator",
        vfs_per_partition=48,
    )
    assert [t.team.name for t in args.teams] == ["vision", "language", "speech", "research", "inference", "platform-qa"]
    vision = args.teams[0]
    assert vision.pool_taints is None and dict(vision.namespace_labels) == {}
    # The rendered quota: its own partition's VFs (quota.rdma 16 of pkey 0x0001); with elastic quotas the CPU
    # and memory ceilings are its own plus its borrowing limit (192 + 128, 1536Gi + 1Ti).
    assert vision.quota["requests.nvidia.com/sriov8001"] == "16"
    assert (vision.quota["requests.cpu"], vision.quota["requests.memory"]) == ("320", "2560Gi")
    assert not any(
        k.startswith("requests.nvidia.com/sriov800") and k != "requests.nvidia.com/sriov8001" for k in vision.quota
    )
    # Elastic quotas are on (Pulumi.onprem.yaml): the team role knows the kinds Kueue runs.
    assert args.queue_integrations is not None and "jobset.x-k8s.io/jobset" in args.queue_integrations


def test_aks_teams_get_their_pools_taints_and_the_pool_guard() -> None:
    raw = raw_stack("aks")
    raw["teams"].append({"name": "interns"})
    cfg = parse_config(raw)
    # Both GPU pools are partitions of a team: a partitionless team has no pool to run GPU pods on.
    assert platform_args.admission(cfg) == AdmissionArgs(partitions=False, node_pools=(), hami_core_policy=None)
    args = platform_args.teams(cfg)
    assert args.networks is None and args.queue_integrations is None
    assert [(t.team.name, t.pool_taints) for t in args.teams] == [
        ("training", ("nvidia.com/gpu=present:NoSchedule",)),
        ("finetune", ("nvidia.com/gpu=present:NoSchedule",)),
        ("interns", None),
    ]
    assert args.teams[0].quota["requests.nvidia.com/gpu"] == "32"


def test_an_aks_pool_no_team_owns_is_where_partitionless_teams_run() -> None:
    raw = raw_stack("aks")
    raw["teams"][1].pop("partition")
    raw["teams"][1]["quota"].pop("rdma")
    cfg = parse_config(raw)
    assert platform_args.admission(cfg).node_pools == ("ndh100b",)
    assert platform_args.teams(cfg).teams[1].pool_taints is None


def test_hami_brings_its_guard_with_the_clusters_core_policy_and_its_teams_label() -> None:
    raw = hami_raw()
    raw["platform"]["nodeGroups"][1]["hami"]["corePolicy"] = "force"
    cfg = parse_config(raw)
    assert platform_args.admission(cfg).hami_core_policy == "force"
    labels = {t.team.name: dict(t.namespace_labels) for t in platform_args.teams(cfg).teams}
    assert labels[HAMI_TEAM] == {"gpuaas.io/hami": "true"}
    assert labels["vision"] == {}, "no HAMi quota, nothing to borrow: out of HAMi's webhook's sight"
    # The twin: the sample stack runs no HAMi, and has no HAMi guard.
    assert platform_args.admission(parse_config(raw_stack("onprem"))).hami_core_policy is None


def test_elastic_quotas_off_leave_the_team_role_without_queue_rules() -> None:
    raw = raw_stack("onprem")
    raw["queues"] = {"elastic": False}
    assert platform_args.teams(parse_config(raw)).queue_integrations is None


def test_the_team_orderings_pass_through_unchanged() -> None:
    cfg = parse_config(raw_stack("onprem"))
    first, second = object(), object()
    args = platform_args.teams(cfg, objects_after=(first,), guards=(second,))  # type: ignore[arg-type]
    assert (args.objects_after, args.guards) == ((first,), (second,))
    assert (platform_args.teams(cfg).objects_after, platform_args.teams(cfg).guards) == ((), ())


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
    # vision probes every other team's partition (each of the six teams has one), by name.
    assert [(p.client.key, p.server.key) for p in v.probes] == [
        ("vision", "inference"),
        ("vision", "language"),
        ("vision", "platform-qa"),
        ("vision", "research"),
        ("vision", "speech"),
    ]
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


def test_onprem_nodes_sriov_host_and_opensm_get_the_fleet_and_the_team_partitions() -> None:
    raw = raw_stack("onprem")
    raw["teams"] = [
        {"name": "zeta", "partition": {"pkey": "0x0002", "vfIndex": 1}},
        {"name": "alpha", "partition": {"pkey": "0x0005", "vfIndex": 0, "ipoib": False}},
        {"name": "plain"},
    ]
    raw["queues"] = {"elastic": False}
    cfg = parse_config(raw)
    nodes = platform_args.onprem_nodes(cfg)
    # Pulumi.onprem.yaml: three groups, six nodes, in the file's order.
    assert [g.name for g in nodes.node_groups] == ["h100-mig", "h100-shared", "h100-full"]
    assert [(n.name, n.id, n.node_group) for n in nodes.nodes] == [
        ("gpu-node-01", 1, "h100-full"),
        ("gpu-node-02", 2, "h100-full"),
        ("gpu-node-03", 3, "h100-full"),
        ("gpu-node-04", 4, "h100-full"),
        ("gpu-node-05", 5, "h100-mig"),
        ("gpu-node-06", 6, "h100-shared"),
    ]
    for args in (platform_args.sriov_host(cfg), platform_args.opensm(cfg)):
        assert (args.node_groups, args.nodes) == (nodes.node_groups, nodes.nodes)
        assert (args.fabric.vfs_per_hca, args.fabric.opensm.ipoib_mtu, args.fabric.guid_scheme.base) == (
            6,
            5,
            0x0200000000000000,
        )
        # The team without a partition has none; the others keep their keys, VF indices and IPoIB flag.
        assert {t: (p.pkey, p.vf_index, p.ipoib) for t, p in args.partitions.items()} == {
            "alpha": (0x0005, 0, False),
            "zeta": (0x0002, 1, True),
        }
        assert args.network.ofed_driver == "host"
        assert args.gate is None


def test_the_fleets_components_are_onprem_only() -> None:
    cfg = parse_config(raw_stack("aks"))
    for mapping in (platform_args.onprem_nodes, platform_args.sriov_host, platform_args.opensm):
        with pytest.raises(ValueError, match="platform kind onprem only"):
            mapping(cfg)
    # The allowed twin: the on-prem stack maps onto all three.
    onprem = parse_config(raw_stack("onprem"))
    assert [
        len(m(onprem).nodes) for m in (platform_args.onprem_nodes, platform_args.sriov_host, platform_args.opensm)
    ] == [
        6,
        6,
        6,
    ]


def test_the_fleets_gate_passes_through_unchanged() -> None:
    cfg = parse_config(raw_stack("onprem"))
    marker: object = object()
    for mapping in (platform_args.onprem_nodes, platform_args.sriov_host, platform_args.opensm):
        assert mapping(cfg, gate=marker).gate is marker  # type: ignore[arg-type]


def test_hami_onprem_takes_the_declared_version_and_the_hosts_driver() -> None:
    args = platform_args.hami(hami_cfg())
    # tests/stacks/onprem-hami.yaml: kubernetesVersion 1.37.2, HAMi's defaults, the driver on the hosts.
    assert (args.kubernetes_version, args.operator_driver, args.taints) == ("1.37.2", False, ())
    assert (args.settings.split_count, args.settings.memory_scaling, args.settings.core_policy) == (10, 1.0, "default")
    assert (args.chart.chart, args.chart.version, args.chart.repository) == (
        "hami",
        "2.10.0",
        "https://project-hami.github.io/HAMi/",
    )
    assert args.gpu_operator_namespace == "gpu-operator"
    assert args.release_after == ()


def test_hami_on_aks_tolerates_only_the_hami_pools_taints_and_brings_the_operators_driver() -> None:
    raw = raw_stack("aks")
    raw["platform"]["gpuPools"].append(
        {"name": "ndhami", "minCount": 1, "maxCount": 1, "hami": {"splitCount": 4}, "taints": ["sku=gpu:NoSchedule"]}
    )
    args = platform_args.hami(parse_config(raw))
    # The other pools' taints (nvidia.com/gpu=present:NoSchedule) are not HAMi's to tolerate.
    assert (args.taints, args.operator_driver, args.settings.split_count) == (("sku=gpu:NoSchedule",), True, 4)
    # The AKS default version (components/model/versions.py AKS_KUBERNETES).
    assert args.kubernetes_version == "1.36.3"


def test_hami_without_a_hami_group_is_refused() -> None:
    with pytest.raises(ValueError, match="HAMi node group"):
        platform_args.hami(parse_config(raw_stack("onprem")))
    # The allowed twin: the HAMi variant of the same stack.
    assert platform_args.hami(hami_cfg()).kubernetes_version == "1.37.2"


def test_the_aks_cluster_is_the_platform_section_but_its_pools() -> None:
    cfg = parse_config(raw_stack("aks"))
    marker: object = object()
    args = platform_args.aks_cluster(cfg, marker)  # type: ignore[arg-type]
    assert (args.cluster_name, args.location) == ("gpuaas-aks", "eastus")
    assert args.kubernetes_version == versions.AKS_KUBERNETES  # not set in the stack: the pinned default
    assert (args.resource_group.name, args.resource_group.create) == ("rg-gpuaas", True)
    assert (args.system_pool.name, args.system_pool.vm_size, args.system_pool.max_count) == (
        "system",
        "Standard_D8ds_v5",
        3,
    )
    assert (args.existing_cluster, args.register_infiniband_feature, args.gate) == (False, True, marker)


def test_an_existing_cluster_is_only_read() -> None:
    raw = raw_stack("aks")
    raw["platform"].update(existingCluster=True, registerInfinibandFeature=False)
    raw["platform"]["resourceGroup"] = {"name": "rg-existing", "create": False}
    args = platform_args.aks_cluster(parse_config(raw))
    assert (args.existing_cluster, args.register_infiniband_feature) == (True, False)
    assert (args.resource_group.name, args.resource_group.create, args.gate) == ("rg-existing", False, None)


def test_each_nd_pool_gets_its_settings_labels_and_template_tags() -> None:
    raw = raw_stack("aks")
    raw["platform"]["kubernetesVersion"] = "1.35.7"
    raw["platform"]["gpuPools"][1].update(
        {"minCount": 1, "taints": ["sku=h100:NoSchedule"], "labels": {"team": "finetune"}}
    )
    cfg = parse_config(raw)
    marker: object = object()
    a, b = platform_args.aks_nd_pools(cfg, marker)  # type: ignore[arg-type]
    # Pulumi.aks.yaml's pools, in order; without cluster outputs, the config's names.
    assert (a.pool_name, a.resource_group_name, a.cluster_name) == ("ndh100a", "rg-gpuaas", "gpuaas-aks")
    assert (a.vm_size, a.os_sku, a.min_count, a.max_count) == ("Standard_ND96isr_H100_v5", "Ubuntu2204", 0, 4)
    assert (b.pool_name, b.min_count, b.max_count, b.taints) == ("ndh100b", 1, 2, ("sku=h100:NoSchedule",))
    assert a.taints == ("nvidia.com/gpu=present:NoSchedule",)  # the stack file's default
    assert a.orchestrator_version == b.orchestrator_version == "1.35.7"
    assert (a.gate, b.gate, a.gpu_driver) == (marker, marker, "None")
    gpuaas = {resources.NODE_GROUP_LABEL: "ndh100b", resources.MIG_CONFIG_LABEL: "all-disabled"}
    assert dict(b.labels) == {"team": "finetune", **gpuaas, resources.DEVICE_PLUGIN_CONFIG_LABEL: "ndh100b"}
    # An empty pool's template node: 8 H100s per ND96isr_H100_v5 and the RDMA plugin's rdmaHcaMax (1000).
    tag = "k8s.io_cluster-autoscaler_node-template_resources_"
    assert dict(a.tags) == {f"{tag}nvidia.com_gpu": "8", f"{tag}rdma_hcashared": "1000"}


def test_nd_pools_take_the_clusters_outputs_when_given() -> None:
    cfg = parse_config(raw_stack("aks"))
    group: object = object()
    cluster: object = object()
    pools = platform_args.aks_nd_pools(cfg, resource_group_name=group, cluster_name=cluster)  # type: ignore[arg-type]
    assert {(p.resource_group_name, p.cluster_name, p.gate) for p in pools} == {(group, cluster, None)}
