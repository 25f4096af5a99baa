"""The on-prem node labels, the SR-IOV host side, OpenSM's files and HAMi work alone (issue #33, item 1).

Each test is a small Pulumi program written here, outside ``Platform``, run under the SDK's mocks with
no gpuaas stack config: the arguments are written by hand (never mapped from a stack config by
``components.platform_args``), and the objects the program registers are compared with objects written
out in the test: labels, GUIDs, P_Keys and partitions.conf lines worked out from the GUID scheme's
formula (``base | node id << 12 | HCA index << 8 | VF index`` with the default 16/4/8 bits).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.clusters.onprem_nodes import OnPremNodes, OnPremNodesArgs
from components.fabric.opensm import OpenSm, OpenSmArgs
from components.fabric.sriov_host import SriovHost, SriovHostArgs
from components.model.fabric import Fabric
from components.model.fabric import OpenSm as OpenSmSettings
from components.model.network import Network, Toleration
from components.model.platform import Node, NodeGroup
from components.model.sharing import Hami as HamiSettings
from components.model.sharing import MigConfig
from components.model.teams import OnPremPartition
from components.model.versions import Versions
from components.operators.hami import Hami, HamiArgs
from tests.reuse.harness import assert_depends_on_and_provider_reach_every_child, objects, run

PART_OF = {"app.kubernetes.io/part-of": "gpuaas"}
FORCE = {"pulumi.com/patchForce": "true"}
#: Two nodes of one group with two HCAs each (ids 1 and 2).
GROUP = NodeGroup(name="h100", gpu_model="H100-80GB", hcas=["mlx5_0", "mlx5_1"])
NODES = (Node(name="n1", id=1, node_group="h100"), Node(name="n2", id=2, node_group="h100"))
#: Two team partitions, by team name.
PARTITIONS = {
    "vision": OnPremPartition(pkey=0x0001, vf_index=0),
    "speech": OnPremPartition(pkey=0x0003, vf_index=1, ipoib=False),
}


def _node_patch(node: str, labels: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    return (
        "kubernetes:core/v1:NodePatch",
        "lab-nodes",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels, "annotations": FORCE}},
    )


def test_onprem_nodes_alone_label_each_node_for_its_group() -> None:
    def program() -> None:
        OnPremNodes(
            "lab-nodes",
            OnPremNodesArgs(
                node_groups=(
                    NodeGroup(name="mig", gpu_model="H100-80GB", mig=MigConfig(layout="1x4g.40gb-3x1g.10gb")),
                    NodeGroup(name="slices", gpu_model="H100-80GB", hami=HamiSettings()),
                ),
                nodes=(Node(name="gpu-a", id=1, node_group="mig"), Node(name="gpu-b", id=2, node_group="slices")),
            ),
        )

    records = run(program)
    assert objects(records) == {
        "lab-nodes-gpu-a": _node_patch(
            "gpu-a",
            {
                "nvidia.com/mig.config": "1x4g.40gb-3x1g.10gb",
                "nvidia.com/device-plugin.config": "mig",
                "gpuaas.io/node-group": "mig",
            },
        ),
        # A HAMi group's nodes: HAMi's device plugin selects them, the Operator's plugins stay off.
        "lab-nodes-gpu-b": _node_patch(
            "gpu-b",
            {
                "nvidia.com/mig.config": "all-disabled",
                "nvidia.com/device-plugin.config": "slices",
                "gpuaas.io/node-group": "slices",
                "gpu": "on",
                "gpuaas.io/hami": "true",
                "nvidia.com/gpu.deploy.device-plugin": "false",
                "nvidia.com/gpu.deploy.mig-manager": "false",
                "nvidia.com/gpu.deploy.operator-validator": "false",
            },
        ),
    }
    # Dropping a node leaves its labels (the GPU Operator would otherwise reset its GPUs).
    assert all(r.retain_on_delete for r in records if r.custom)


def test_a_node_of_a_group_not_given_is_refused_by_name() -> None:
    def program() -> None:
        OnPremNodes(
            "lab-nodes",
            OnPremNodesArgs(node_groups=(GROUP,), nodes=(*NODES, Node(name="n9", id=9, node_group="a100"))),
        )

    with pytest.raises(
        Exception, match=r"node 'n9' names node group 'a100': not one of the node groups given \(h100\)"
    ):
        run(program)
    # The allowed twin: the same nodes without the stray one.
    assert sorted(
        objects(run(lambda: OnPremNodes("lab-nodes", OnPremNodesArgs(node_groups=(GROUP,), nodes=NODES))))
    ) == [
        "lab-nodes-n1",
        "lab-nodes-n2",
    ]


def _config_map(name: str, data: dict[str, str], parent: str) -> tuple[str, str, dict[str, Any]]:
    return (
        "kubernetes:core/v1:ConfigMap",
        parent,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "fabric", "labels": PART_OF},
            "data": data,
        },
    )


def test_sriov_host_alone_plans_each_nodes_vf_guids_and_the_team_pkeys() -> None:
    def program() -> None:
        SriovHost(
            "lab-host",
            SriovHostArgs(
                node_groups=(GROUP,),
                nodes=NODES,
                fabric=Fabric(vfs_per_hca=2),
                partitions=PARTITIONS,
                network=Network(namespace="fabric", node_selector={"fabric": "ib"}),
            ),
        )

    got = objects(run(program))
    assert sorted(got) == ["lab-host-daemonset", "lab-host-gpuaas-vf-guids-h100-0", "lab-host-gpuaas-vf-pkeys"]
    # One line per HCA: the GUID of VF 0 (node id << 12 | HCA index << 8) and the VF count.
    assert got["lab-host-gpuaas-vf-guids-h100-0"] == _config_map(
        "gpuaas-vf-guids-h100-0",
        {
            "n1": "mlx5_0 02:00:00:00:00:00:10:00 2\nmlx5_1 02:00:00:00:00:00:11:00 2\n",
            "n2": "mlx5_0 02:00:00:00:00:00:20:00 2\nmlx5_1 02:00:00:00:00:00:21:00 2\n",
        },
        "lab-host",
    )
    # By VF index: the full-member P_Key each team VF must show before the device plugin restarts.
    assert got["lab-host-gpuaas-vf-pkeys"] == _config_map(
        "gpuaas-vf-pkeys", {"pkeys": "0 0x8001 vision\n1 0x8003 speech\n"}, "lab-host"
    )
    kind, parent, daemonset = got["lab-host-daemonset"]
    pod = daemonset["spec"]["template"]["spec"]
    assert (kind, parent, daemonset["metadata"]["name"], daemonset["metadata"]["namespace"]) == (
        "kubernetes:apps/v1:DaemonSet",
        "lab-host",
        "gpuaas-vf-config",
        "fabric",
    )
    assert pod["nodeSelector"] == {"fabric": "ib"}
    assert pod["volumes"][0] == {
        "name": "plan",
        "projected": {"sources": [{"configMap": {"name": "gpuaas-vf-guids-h100-0"}}]},
    }
    assert pod["containers"][0]["image"] == f"{Versions().node_tools_image}:{Versions().node_tools}"


def test_sriov_host_refuses_a_fabric_whose_vfs_another_tool_creates() -> None:
    def program(vf_config: str) -> Callable[[], object]:
        return lambda: SriovHost(
            "lab-host",
            SriovHostArgs(node_groups=(GROUP,), nodes=NODES, fabric=Fabric(vf_config=vf_config)),
        )

    with pytest.raises(Exception, match=r"fabric\.vf_config is 'sriov-network-operator', allowed: 'daemonset'"):
        run(program("sriov-network-operator"))
    assert "lab-host-daemonset" in objects(run(program("daemonset")))


#: partitions.conf of NODES with PARTITIONS, comments left out: the Default partition, then each team
#: partition by P_Key with its VF (VF index = the lowest byte) on every HCA of every node, by node id.
PARTITION_LINES = [
    "Default=0x7fff, ipoib : ALL_SWITCHES=full, SELF=full;",
    "vision=0x0001, indx0, ipoib, mtu=4 : 0x0200000000001000=full, 0x0200000000001100=full,"
    " 0x0200000000002000=full, 0x0200000000002100=full;",
    "speech=0x0003, indx0 : 0x0200000000001001=full, 0x0200000000001101=full,"
    " 0x0200000000002001=full, 0x0200000000002101=full;",
]


def test_opensm_alone_writes_partitions_conf_and_opensm_conf() -> None:
    def program() -> None:
        OpenSm(
            "lab-sm",
            OpenSmArgs(
                node_groups=(GROUP,),
                nodes=NODES,
                fabric=Fabric(opensm=OpenSmSettings(routing_engine="updn", ipoib_mtu=4)),
                partitions=PARTITIONS,
                network=Network(namespace="fabric"),
            ),
        )

    got = objects(run(program))
    assert sorted(got) == ["lab-sm-config", "lab-sm-gpuaas-opensm-partitions-0"]
    part = got["lab-sm-gpuaas-opensm-partitions-0"][2]
    text = part["data"]["partitions.conf"]
    assert [line for line in text.splitlines() if not line.startswith("#")] == PARTITION_LINES
    assert got["lab-sm-gpuaas-opensm-partitions-0"] == _config_map(
        "gpuaas-opensm-partitions-0", {"partitions.conf": text}, "lab-sm"
    )
    main = got["lab-sm-config"][2]
    conf = main["data"]["opensm.conf"]
    assert [line for line in conf.splitlines() if not line.startswith("#")] == [
        "virt_enabled 2",
        "routing_engine updn",
        "partition_config_file /etc/opensm/partitions.conf",
    ]
    assert got["lab-sm-config"] == _config_map(
        "gpuaas-opensm",
        {
            "opensm.conf": conf,
            "partitions.conf.parts": "gpuaas-opensm-partitions-0\n",
            "partitions.conf.sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
        "lab-sm",
    )


def test_opensm_alone_runs_the_sm_on_its_node_only_when_named() -> None:
    def program(node: str | None) -> Callable[[], object]:
        sm = OpenSmSettings(deploy_in_cluster=True, node=node)
        args = OpenSmArgs(
            node_groups=(GROUP,),
            nodes=NODES,
            fabric=Fabric(opensm=sm),
            network=Network(namespace="fabric", tolerations=[Toleration(key="ib")]),
        )
        return lambda: OpenSm("lab-sm", args)

    with pytest.raises(Exception, match=r"in-cluster OpenSM .* needs fabric\.opensm\.node"):
        run(program(None))
    kind, parent, deployment = objects(run(program("n2")))["lab-sm-deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert (kind, parent, deployment["metadata"]["namespace"], deployment["spec"]["strategy"]) == (
        "kubernetes:apps/v1:Deployment",
        "lab-sm",
        "fabric",
        {"type": "Recreate"},
    )
    assert (pod["nodeSelector"], pod["tolerations"]) == (
        {"kubernetes.io/hostname": "n2"},
        [{"key": "ib", "operator": "Exists"}],
    )
    assert pod["containers"][0]["image"] == f"{Versions().opensm_image}:{Versions().opensm}"


def test_hami_alone_at_kubernetes_1_33_with_tainted_nodes() -> None:
    def program() -> None:
        args = HamiArgs(
            kubernetes_version="1.33.5",
            settings=HamiSettings(split_count=4, core_policy="force"),
            gpu_operator_namespace="gpus",
            taints=("pool=slices:NoSchedule", "pool=slices:NoSchedule", "spot:NoExecute"),
        )
        Hami("lab-hami", args)

    got = objects(run(program))
    # Before 1.34 kube-scheduler starts no DRA informers: no extra RBAC.
    assert sorted(got) == ["lab-hami-namespace", "lab-hami-node-validation", "lab-hami-release"]
    assert got["lab-hami-namespace"][2]["metadata"] == {
        "name": "hami-system",
        "labels": {
            **PART_OF,
            "pod-security.kubernetes.io/audit": "privileged",
            "pod-security.kubernetes.io/enforce": "privileged",
            "pod-security.kubernetes.io/warn": "privileged",
            "hami.io/webhook": "ignore",
        },
    }
    tolerations = [
        {"key": "pool", "operator": "Equal", "value": "slices", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists", "effect": "NoExecute"},
    ]
    release = got["lab-hami-release"][2]
    assert (release["chart"], release["version"], release["namespace"], release["repositoryOpts"]) == (
        "hami",
        "2.10.0",
        "hami-system",
        {"repo": "https://project-hami.github.io/HAMi/"},
    )
    values = release["values"]
    assert values["scheduler"]["kubeScheduler"]["image"] == {
        "registry": "registry.k8s.io",
        "repository": "kube-scheduler",
        "tag": "v1.33.5",
    }
    plugin = values["devicePlugin"]
    assert (plugin["deviceSplitCount"], plugin["tolerations"], values["devices"]) == (
        4,
        tolerations,
        {"nvidia": {"gpuCorePolicy": "force"}},
    )
    assert "nvidiaDriverRoot" not in plugin  # the hosts carry the driver (operator_driver off)
    validation = got["lab-hami-node-validation"][2]
    assert validation["metadata"]["namespace"] == "gpus"
    assert validation["spec"]["template"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        *tolerations,
    ]


def test_hami_alone_from_1_34_grants_the_schedulers_dra_reads_and_uses_the_operators_driver() -> None:
    def program() -> None:
        Hami("lab-hami", HamiArgs(kubernetes_version="1.34.0", operator_driver=True))

    got = objects(run(program))
    assert sorted(got) == [
        "lab-hami-dra-read-binding",
        "lab-hami-dra-read-role",
        "lab-hami-namespace",
        "lab-hami-node-validation",
        "lab-hami-release",
    ]
    assert got["lab-hami-dra-read-role"][2]["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["deviceclasses", "devicetaintrules", "resourceclaims", "resourceslices"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert got["lab-hami-release"][2]["values"]["devicePlugin"]["nvidiaDriverRoot"] == "/run/nvidia/driver"


def test_hami_refuses_a_version_that_is_not_major_minor_patch() -> None:
    with pytest.raises(Exception, match=r"kubernetes_version '1.34': want MAJOR.MINOR.PATCH"):
        run(lambda: Hami("lab-hami", HamiArgs(kubernetes_version="1.34")))
    assert "lab-hami-release" in objects(run(lambda: Hami("lab-hami", HamiArgs(kubernetes_version="1.34.1"))))


def test_hami_refuses_settings_for_its_dra_driver() -> None:
    def program(driver: str) -> Callable[[], object]:
        settings = HamiSettings(driver=driver)
        return lambda: Hami("lab-hami", HamiArgs(kubernetes_version="1.36.1", settings=settings))

    with pytest.raises(Exception, match=r"settings\.driver is 'dra', allowed: 'devicePlugin'"):
        run(program("dra"))
    assert "lab-hami-release" in objects(run(program("devicePlugin")))


# --------------------------------------------------------------------------------------------
# Ordering and providers through ordinary ResourceOptions


COMPONENTS: dict[str, Callable[[str, pulumi.ResourceOptions], pulumi.ComponentResource]] = {
    "OnPremNodes": lambda name, opts: OnPremNodes(name, OnPremNodesArgs(node_groups=(GROUP,), nodes=NODES), opts),
    "SriovHost": lambda name, opts: SriovHost(
        name, SriovHostArgs(node_groups=(GROUP,), nodes=NODES, partitions=PARTITIONS), opts
    ),
    "OpenSm": lambda name, opts: OpenSm(
        name,
        OpenSmArgs(
            node_groups=(GROUP,),
            nodes=NODES,
            partitions=PARTITIONS,
            fabric=Fabric(opensm=OpenSmSettings(deploy_in_cluster=True, node="n1")),
        ),
        opts,
    ),
    "Hami": lambda name, opts: Hami(name, HamiArgs(kubernetes_version="1.34.0"), opts),
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_depends_on_and_the_provider_reach_every_child(component: str) -> None:
    assert_depends_on_and_provider_reach_every_child(COMPONENTS[component])


def test_hamis_release_after_holds_back_the_release_and_the_node_validation_only() -> None:
    def program() -> None:
        operator = k8s.core.v1.ConfigMap("operator", metadata={"name": "operator"})
        Hami("it", HamiArgs(kubernetes_version="1.33.0", release_after=(operator,)))

    records = run(program)
    operator = next(r.urn for r in records if r.name == "operator")
    waits = {r.name: operator in r.dependencies for r in records if r.custom and r.name.startswith("it-")}
    assert waits == {"it-namespace": False, "it-node-validation": True, "it-release": True}
