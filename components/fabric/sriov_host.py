"""The host side of SR-IOV: VFs per HCA and the deterministic GUID of every VF.

Two ways exist to give VFs fixed GUIDs; ``platform.fabric.vfConfig`` picks one:

``daemonset`` (default, implemented)
    A privileged, idempotent DaemonSet reads its node's GUID plan (a file named for the node, from
    the plan ConfigMaps) and, per HCA: sets ``sriov_numvfs`` when it differs (0 first — the kernel refuses to
    change a non-zero count), then per VF whose current node GUID differs: writes node and port
    GUID and link policy Follow — MLNX_OFED's ``/sys/class/infiniband/<pf>/device/sriov/<vf>/
    {node,port,policy}`` where present, else the upstream netlink way ``ip link set <pf> vf <n>
    node_guid … port_guid … state auto`` (ip-link(8)) — and unbinds/rebinds the VF so the driver
    picks the GUID up (k8snetworkplumbingwg/sriovnet mofed_ib_helper.go; ib-sriov-cni sriov.go does
    the same per pod). A VF already carrying its GUID is left alone, so re-runs never disturb a
    running pod. It works with inbox and DOCA/MLNX_OFED drivers and needs nothing but the config.

``sriov-network-operator`` (rendered, not deployable yet: a config error says so)
    The operator assigns GUIDs from ``/etc/sriov-operator/infiniband/guids`` on the host — JSON
    ``[{"pciAddress"|"pfGuid", "guids": [...] | "rangeStart"/"rangeEnd"}]``; note the code's keys
    (k8snetworkplumbingwg/sriov-network-operator pkg/host/internal/infiniband/ib_guid_config.go)
    differ from its design doc's ``pci_address``/``guidsRange``. :func:`operator_guid_file`
    renders it. But a per-partition resource needs one SriovNetworkNodePolicy per team selecting
    VF ``n`` of every PF by *netdev name* (``pfNames: ["ibp12s0#n-n"]``), and the operator's
    device plugin config has no ``pKeys`` selector; the stack config names HCAs by RDMA device
    (``mlx5_0``), not netdev. :func:`sriov_network_node_policy` renders the policy from PF names
    (validated against the network-operator-bundled CRD) for when the config carries them.

The SR-IOV device plugin reads VFs once, at start, so the DaemonSet also restarts its node's
plugin once every planned VF exists and each team VF's ``pkeys/0`` shows its team's key, and
after every later change (:data:`CONFIGURE_VFS`). By signal in the host PID namespace, not by
deleting the plugin's pod through the API: the node-tools image carries no API client, and RBAC
cannot limit a ``delete pods`` grant to the pods of one node, so every node's privileged pod
would hold a lever over the whole namespace.

Scale: the GUID plan is data — a key per node, a line per HCA (``<hca> <GUID of VF 0> <VF
count>``; VF ``n`` is VF 0 + ``n``), never a resource per node×HCA×VF, and its size does not
depend on the VF count. It is cut into ConfigMaps below the 1 MiB object limit
(:data:`MAX_PLAN_BYTES`): per node group, by ``node id // shard size`` where the shard size is
the largest power of two of worst-case node plans that fits (:func:`shard_size`; 1024 nodes for
8 HCAs). A node's shard so depends only on its id and its group's HCA layout: adding,
removing or renaming nodes changes no other shard. The DaemonSet mounts every shard as one
projected volume.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import pulumi

from components import k8s as kube
from components.fabric.guid_plan import (
    CONFIG_HASH_ANNOTATION,
    PKEYS_CONFIG_MAP,
    PKEYS_DIR,
    PKEYS_KEY,
    config_hash,
    fleet,
    fleet_guid_shards,
    guid_shards,
    partition_pkeys_config_map,
    shard_config_maps,
)
from components.fabric.vf_script import CONFIGURE_VFS
from components.guards.gate import gated
from components.k8s import Manifest, driver_ready_node_selector
from components.model import resources
from components.model.config import StackConfig
from components.model.fabric import Fabric
from components.model.network import Network
from components.model.platform import Node, NodeGroup
from components.model.teams import OnPremPartition, Team
from components.model.types import colon_guid
from components.model.versions import Versions

PART_OF: Final = resources.PART_OF
DAEMONSET: Final = "gpuaas-vf-config"
PLAN_DIR: Final = "/etc/gpuaas/vf-guids"
#: Host tmpfs directory keeping the state the device plugin was last restarted for.
STATE_DIR: Final = "/run/gpuaas"
#: Host file of the SR-IOV Network Operator's static IB GUID assignment.
OPERATOR_GUID_FILE: Final = "/etc/sriov-operator/infiniband/guids"


def daemonset(cfg: StackConfig, shards: Mapping[str, Mapping[str, str]] | None = None) -> Manifest:
    """The privileged VF/GUID DaemonSet, rolled whenever the plan or the script changes.

    Every shard is one source of a projected volume, so each pod sees ``$PLAN_DIR/<its node>``
    whichever ConfigMap holds it. ``shards``: :func:`guid_shards` when the caller has them.
    """
    return vf_daemonset(cfg.network, cfg.versions, guid_shards(cfg) if shards is None else shards)


def vf_daemonset(network: Network, versions: Versions, shards: Mapping[str, Mapping[str, str]]) -> Manifest:
    """:func:`daemonset` on ``network``'s RDMA nodes, with ``versions``' node tools, mounting ``shards``."""
    # The script, not the plan: pods pick plan changes up themselves (:data:`CONFIGURE_VFS`).
    digest = config_hash(CONFIGURE_VFS)
    v = versions
    return kube.node_daemonset(
        network,
        DAEMONSET,
        {
            "hostNetwork": True,
            "hostPID": True,
            "priorityClassName": "system-node-critical",
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "configure-vfs",
                    "image": f"{v.node_tools_image}:{v.node_tools}",
                    "command": ["/bin/bash", "-c", CONFIGURE_VFS],
                    "env": [
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "PLAN_DIR", "value": PLAN_DIR},
                        {"name": "PKEYS", "value": f"{PKEYS_DIR}/{PKEYS_KEY}"},
                        {"name": "STATE", "value": f"{STATE_DIR}/vf-state"},
                    ],
                    "securityContext": {"privileged": True},
                    "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 5},
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                    "volumeMounts": [
                        {"name": "plan", "mountPath": PLAN_DIR, "readOnly": True},
                        {"name": "pkeys", "mountPath": PKEYS_DIR, "readOnly": True},
                        {"name": "state", "mountPath": STATE_DIR},
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "plan",
                    "projected": {"sources": [{"configMap": {"name": shard}} for shard in shards]},
                },
                {"name": "pkeys", "configMap": {"name": PKEYS_CONFIG_MAP}},
                {"name": "state", "hostPath": {"path": STATE_DIR, "type": "DirectoryOrCreate"}},
            ],
        },
        # After the containerized DOCA driver: VFs created on inbox modules vanish when the driver
        # container swaps them.
        node_selector=driver_ready_node_selector(network),
        # Restarting a pod leaves configured VFs alone, so a script or image change may roll a
        # tenth of the fleet at once (one at a time would outlast Pulumi's rollout wait).
        max_unavailable="10%",
        annotations={CONFIG_HASH_ANNOTATION: digest},
    )


def operator_guid_file(table: Mapping[str, Sequence[int]], pci_by_hca: Mapping[str, str]) -> str:
    """The SR-IOV Network Operator's GUID file for one node: VF n of each PF gets ``guids[n]``."""
    entries = [{"pciAddress": pci_by_hca[hca], "guids": [colon_guid(g) for g in guids]} for hca, guids in table.items()]
    return json.dumps(entries, indent=2) + "\n"


def sriov_network_node_policy(cfg: StackConfig, team: Team, pf_names: Sequence[str]) -> Manifest:
    """One team's SriovNetworkNodePolicy: VF ``vfIndex`` of every named PF as the team's pool."""
    part = team.partition
    onprem = cfg.onprem
    if onprem is None or not isinstance(part, OnPremPartition):
        raise ValueError(f"team {team.name!r} has no on-prem partition")
    vf = part.vf_index
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": f"gpuaas-{team.name}", "namespace": cfg.network.namespace, "labels": dict(PART_OF)},
        "spec": {
            "resourceName": resources.sriov_resource_name(part.pkey),
            "nodeSelector": dict(cfg.network.node_selector),
            "numVfs": onprem.fabric.vfs_per_hca,
            "nicSelector": {"vendor": "15b3", "pfNames": [f"{pf}#{vf}-{vf}" for pf in pf_names]},
            "linkType": "ib",
            "isRdma": True,
            "deviceType": "netdevice",
            "priority": 90,
        },
    }


@dataclass(frozen=True, kw_only=True)
class SriovHostArgs:
    """Arguments of :class:`SriovHost`.

    Ordering: ``opts.depends_on`` should hold the NicClusterPolicy (the containerized NIC driver must be
    in place before VFs are created); it is forwarded to every child.
    """

    node_groups: tuple[NodeGroup, ...] = ()
    """The node groups (``platform.nodeGroups``): each one's HCAs, in order, fix the HCA index in its
    nodes' VF GUIDs and the size of its plan shards."""
    nodes: tuple[Node, ...] = ()
    """The nodes whose VFs are planned (``platform.nodes``), each with its GUID-scheme id and group."""
    fabric: Fabric = field(default_factory=Fabric)
    """VFs per HCA and the GUID scheme (``platform.fabric``); ``vfConfig`` must be ``daemonset``."""
    partitions: Mapping[str, OnPremPartition] = field(default_factory=dict)
    """The team partitions by team name: the P_Key each VF index must show before the SR-IOV device
    plugin is restarted. None: the VFs are created with their GUIDs, no P_Key is awaited."""
    network: Network = field(default_factory=Network)
    """The RDMA nodes (selector, tolerations), the namespace and the DOCA driver's form (``gpuaas:network``)."""
    versions: Versions = field(default_factory=Versions)
    """The node tools image the DaemonSet runs."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards (:mod:`components.guards`; the fabric guard): a VF count, GUID or partition
    change reaches the nodes only once they passed. ``None``: no guard."""


class SriovHost(pulumi.ComponentResource):
    """The GUID plan ConfigMaps (a few per node group), the P_Key table and the VF DaemonSet.

    ``opts.depends_on`` (the NicClusterPolicy) reaches every child.
    """

    plans: list[pulumi.CustomResource]

    def __init__(self, name: str, args: SriovHostArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:SriovHost", name, None, opts)
        if args.fabric.vf_config != "daemonset":
            raise ValueError(
                f"SriovHost creates VFs with its DaemonSet: fabric.vf_config is {args.fabric.vf_config!r}, "
                "allowed: 'daemonset'"
            )
        after = kube.depends_on(opts)
        shards = fleet_guid_shards(fleet(args.node_groups, args.nodes, args.fabric))
        namespace = args.network.namespace
        partitions = sorted(args.partitions.items())
        # ``gate``: the day-2 fabric guard (components/guards/fabric.py); a VF count, GUID or
        # partition change reaches the nodes only once it passed.
        self.plans = [
            kube.apply(
                f"{name}-{cm['metadata']['name']}",
                {**cm, "data": gated(args.gate, cm["data"])},
                kube.child(self, after),
            )
            for cm in [*shard_config_maps(namespace, shards), partition_pkeys_config_map(namespace, partitions)]
        ]
        self.daemonset = kube.apply(
            f"{name}-daemonset",
            vf_daemonset(args.network, args.versions, shards),
            kube.child(self, [*self.plans, *after]),
        )
        self.register_outputs({"nodes": len(args.nodes), "configMaps": list(shards)})
