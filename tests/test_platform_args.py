"""The one mapping from a stack config to each component's arguments (components/platform_args.py).

Expected values are written from the stack files (Pulumi.onprem.yaml, Pulumi.aks.yaml) and the
tests' own edits, not computed by the mapping.
"""

from __future__ import annotations

import pytest

from components import platform_args
from components.loader import parse_config
from tests.conftest import raw_stack
from tests.hami_cases import hami_cfg


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
