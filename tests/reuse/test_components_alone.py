"""Every public component works alone, in a program that is not gpuaas' (issue #33, item 1).

Each test is a small Pulumi program written here, outside ``Platform``, run under the SDK's mocks
(:func:`components.plan.offline.run_program` with an empty stack config): the arguments are written by
hand (never mapped from a stack config by ``components.platform_args``), and the objects the program
registers are compared with objects written out in the test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.model import charts
from components.model.gpu_operator import GpuOperator as GpuOperatorConfig
from components.model.network import Network, Toleration
from components.operators.gpu_operator import GpuOperator, GpuOperatorArgs
from components.operators.network_operator import NetworkOperator, NetworkOperatorArgs
from components.operators.nic_cluster_policy import NicClusterPolicy, NicClusterPolicyArgs
from tests.reuse.harness import assert_depends_on_and_provider_reach_every_child, objects, run

PART_OF = {"app.kubernetes.io/part-of": "gpuaas"}
PRIVILEGED = {
    "app.kubernetes.io/part-of": "gpuaas",
    "pod-security.kubernetes.io/audit": "privileged",
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}
NVIDIA_REPO = {"repo": "https://helm.ngc.nvidia.com/nvidia"}


def test_network_operator_alone() -> None:
    def program() -> None:
        NetworkOperator(
            "netop",
            NetworkOperatorArgs(
                network=Network(namespace="fabric", deploy_node_feature_rules=False, helm_timeout_seconds=900),
                chart=charts.Source("network-operator", "26.4.1", "https://helm.ngc.nvidia.com/nvidia"),
                cni_network_directory="/var/lib/rancher/k3s/agent/etc/cni/net.d",
            ),
        )

    assert objects(run(program)) == {
        "netop-namespace": (
            "kubernetes:core/v1:Namespace",
            "netop",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fabric", "labels": PRIVILEGED}},
        ),
        "netop-release": (
            "kubernetes:helm.sh/v3:Release",
            "netop",
            {
                "atomic": False,
                "chart": "network-operator",
                "cleanupOnFail": True,
                "compat": "true",
                "createNamespace": False,
                "name": "network-operator",
                "namespace": "fabric",
                "repositoryOpts": NVIDIA_REPO,
                "timeout": 900,
                "values": {
                    "nfd": {"enabled": True, "deployNodeFeatureRules": False},
                    "operator": {
                        "admissionController": {"enabled": False},
                        "cniNetworkDirectory": "/var/lib/rancher/k3s/agent/etc/cni/net.d",
                    },
                },
                "version": "26.4.1",
            },
        ),
        # The chart's NodeFeatureRule is off, so gpuaas' own (InfiniBand class, on-prem) is not here:
        # it belongs to the NicClusterPolicy, which is not part of this program.
    }


def test_nic_cluster_policy_alone_with_two_partitions() -> None:
    def program() -> None:
        NicClusterPolicy(
            "ncp",
            NicClusterPolicyArgs(
                network=Network(node_selector={"fabric": "ib"}, tolerations=[Toleration(key="gpu")], rdma_hca_max=8),
                secondary_network=True,
                sriov_pkeys=(0x0001, 0x0002),
            ),
        )

    image = {"repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v26.4.1"}
    rdma = (
        '{\n  "configList": [\n    {\n      "resourcePrefix": "rdma",\n      "resourceName": "hcashared",\n'
        '      "rdmaHcaMax": 8,\n      "selectors": {\n        "vendors": [\n          "15b3"\n        ],\n'
        '        "drivers": [\n          "mlx5_core"\n        ],\n        "linkTypes": [\n          "infiniband"\n'
        '        ],\n        "deviceIDs": [\n          "1013",\n          "1017",\n          "1019",\n'
        '          "101b",\n          "1021",\n          "1023",\n          "1025",\n          "a2dc"\n'
        "        ]\n      }\n    }\n  ]\n}\n"
    )

    def pool(pkey: str) -> str:
        return (
            f'    {{\n      "resourcePrefix": "nvidia.com",\n      "resourceName": "sriov{pkey}",\n'
            '      "selectors": {\n        "vendors": [\n          "15b3"\n        ],\n        "drivers": [\n'
            '          "mlx5_core"\n        ],\n        "linkTypes": [\n          "infiniband"\n        ],\n'
            f'        "pKeys": [\n          "0x{pkey}"\n        ],\n        "isRdma": true\n      }}\n    }}'
        )

    sriov = '{\n  "resourceList": [\n' + pool("8001") + ",\n" + pool("8002") + "\n  ]\n}\n"
    got = objects(run(program))
    assert sorted(got) == ["ncp-ib-sriov-cni", "ncp-policy"]
    assert got["ncp-policy"] == (
        "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy",
        "ncp",
        {
            "apiVersion": "mellanox.com/v1alpha1",
            "kind": "NicClusterPolicy",
            "metadata": {
                "name": "nic-cluster-policy",
                "labels": PART_OF,
                "annotations": {"pulumi.com/waitFor": "jsonpath={.status.state}"},
            },
            "spec": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "fabric", "operator": "In", "values": ["ib"]}]}
                        ]
                    }
                },
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "rdmaSharedDevicePlugin": {"image": "k8s-rdma-shared-dev-plugin", **image, "config": rdma},
                "sriovDevicePlugin": {"image": "sriov-network-device-plugin", **image, "config": sriov},
                "secondaryNetwork": {
                    "multus": {"image": "multus-cni", **image},
                    "cniPlugins": {"image": "plugins", **image},
                },
            },
        },
    )
    kind, parent, daemonset = got["ncp-ib-sriov-cni"]
    assert (kind, parent, daemonset["metadata"]["namespace"]) == (
        "kubernetes:apps/v1:DaemonSet",
        "ncp",
        "nvidia-network-operator",
    )
    assert daemonset["spec"]["template"]["spec"]["nodeSelector"] == {"fabric": "ib"}


@pytest.mark.parametrize(
    ("gpudirect", "host_mofed", "driver"),
    [
        # Legacy peermem with the Network Operator's DOCA driver container: the sidecar uses that one.
        ("peermem", False, {"enabled": True, "rdma": {"enabled": True, "useHostMofed": False}}),
        # Legacy peermem with DOCA-OFED on the hosts.
        ("peermem", True, {"enabled": True, "rdma": {"enabled": True, "useHostMofed": True}}),
        # DMA-BUF: no peermem, the open kernel modules.
        (
            "dmabuf",
            True,
            {"enabled": True, "rdma": {"enabled": False, "useHostMofed": False}, "kernelModuleType": "open"},
        ),
    ],
)
def test_gpu_operator_alone_with_its_rdma_flags(gpudirect: str, host_mofed: bool, driver: dict[str, Any]) -> None:
    def program() -> None:
        GpuOperator(
            "gpuop",
            GpuOperatorArgs(
                gpu_operator=GpuOperatorConfig(namespace="gpus", gpudirect=gpudirect),  # type: ignore[arg-type]
                driver_enabled=True,
                host_mofed=host_mofed,
            ),
        )

    got = objects(run(program))
    assert sorted(got) == ["gpuop-device-plugin-config", "gpuop-mig-config", "gpuop-namespace", "gpuop-release"]
    kind, parent, release = got["gpuop-release"]
    assert (kind, parent, release["namespace"], release["chart"], release["version"], release["repositoryOpts"]) == (
        "kubernetes:helm.sh/v3:Release",
        "gpuop",
        "gpus",
        "gpu-operator",
        "v26.7.0",
        NVIDIA_REPO,
    )
    assert release["values"] == {
        "nfd": {"enabled": False},
        "operator": {"version": "v26.7.0"},
        "validator": {"version": "v26.7.0"},
        "nodeStatusExporter": {"version": "v26.7.0"},
        "driver": driver,
        "mig": {"strategy": "mixed"},
        "migManager": {"config": {"create": False, "name": "gpuaas-mig-parted-config", "default": "all-disabled"}},
        "devicePlugin": {"config": {"create": False, "name": "gpuaas-time-slicing-config", "default": "default"}},
    }
    assert got["gpuop-mig-config"][2]["data"] == {
        "config.yaml": "mig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\nversion: v1\n"
    }
    assert got["gpuop-namespace"][2]["metadata"] == {"name": "gpus", "labels": PRIVILEGED}


# --------------------------------------------------------------------------------------------
# Ordering and providers through ordinary ResourceOptions


COMPONENTS: dict[str, Callable[[str, pulumi.ResourceOptions], pulumi.ComponentResource]] = {
    "NetworkOperator": lambda name, opts: NetworkOperator(name, NetworkOperatorArgs(), opts),
    "NicClusterPolicy": lambda name, opts: NicClusterPolicy(
        name, NicClusterPolicyArgs(network=Network(deploy_node_feature_rules=False), secondary_network=True), opts
    ),
    "GpuOperator": lambda name, opts: GpuOperator(name, GpuOperatorArgs(), opts),
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_depends_on_and_the_provider_reach_every_child(component: str) -> None:
    assert_depends_on_and_provider_reach_every_child(COMPONENTS[component])


def test_an_output_of_resources_is_refused_as_depends_on() -> None:
    def program() -> None:
        first = k8s.core.v1.ConfigMap("first", metadata={"name": "first"})
        NetworkOperator(
            "it", NetworkOperatorArgs(), pulumi.ResourceOptions(depends_on=pulumi.Output.from_input([first]))
        )

    with pytest.raises(Exception, match="depends_on as a resource or a list of resources"):
        run(program)


def test_a_resource_and_a_list_are_both_accepted_as_depends_on() -> None:
    def program() -> None:
        first = k8s.core.v1.ConfigMap("first", metadata={"name": "first"})
        NetworkOperator("one", NetworkOperatorArgs(), pulumi.ResourceOptions(depends_on=first))
        NetworkOperator("list", NetworkOperatorArgs(), pulumi.ResourceOptions(depends_on=[first]))

    records = run(program)
    first = next(r.urn for r in records if r.name == "first")
    for name in ("one-namespace", "list-namespace"):
        assert next(r for r in records if r.name == name).dependencies == [first]
