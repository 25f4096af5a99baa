"""The one mapping from a stack config to each component's arguments (components/platform_args.py).

Expected values are written from the stack files (Pulumi.onprem.yaml, Pulumi.aks.yaml) and the
tests' own edits, not computed by the mapping.
"""

from __future__ import annotations

from components import platform_args
from components.loader import parse_config
from components.model import resources, versions
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
