"""The one mapping from a stack config to each component's arguments (components/platform_args.py).

Expected values are written from the stack files (Pulumi.onprem.yaml, Pulumi.aks.yaml) and the
tests' own edits, not computed by the mapping.
"""

from __future__ import annotations

from components import platform_args
from components.loader import parse_config
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
