"""The on-prem fabric sections: ``platform.fabric`` (SR-IOV, GUID scheme, OpenSM) and ``platform.multus``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from components.model.base import Model
from components.model.types import (
    DnsLabel,
    DnsSubdomain,
    Guid,
    HostPath,
    PKey,
    PositiveInt,
    RoutingEngine,
)


class GuidScheme(Model):
    """VF GUID = ``base | node.id << (hcaBits+vfBits) | hcaIndex << vfBits | vfIndex``.

    Defaults place GUIDs in the locally administered 0x02… range that NVIDIA's ib-kubernetes
    uses for its pool (Mellanox/ib-kubernetes pkg/config/config.go).
    """

    base: Guid = 0x0200_0000_0000_0000
    """High bits every VF GUID starts from (default ``0x0200000000000000``, the locally administered range
    ib-kubernetes uses); its low ``nodeBits+hcaBits+vfBits`` bits must be clear."""
    node_bits: PositiveInt = 16
    """Bits of the node id in a VF GUID (default 16): every ``nodes[].id`` must be below ``2**nodeBits``;
    ``nodeBits+hcaBits+vfBits`` is at most 56."""
    hca_bits: PositiveInt = 4
    """Bits of the HCA index (the HCA's place in its node group's ``hcas``) in a VF GUID (default 4: up to 16 HCAs
    per node)."""
    vf_bits: PositiveInt = 8
    """Bits of the VF index in a VF GUID (default 8); ``vfsPerHca`` must fit in them."""


class OpenSm(Model):
    """Subnet-manager settings rendered into ``partitions.conf`` and an ``opensm.conf`` fragment."""

    routing_engine: RoutingEngine = "ftree"
    """OpenSM ``routing_engine`` written to the opensm.conf fragment (default ``ftree``): a comma list without
    spaces tried in order, optionally ending in ``no_fallback`` (opensm(8))."""
    ipoib_mtu: Literal[4, 5] = 5
    """IBTA MTU code of the IPoIB broadcast groups: 4 = 2048, 5 = 4096 (opensm(8))."""
    ipoib_rate: Literal[17, 21, 23] | None = None
    """IBTA rate code of the IPoIB broadcast groups: 17 = 200 Gb/s (HDR), 21 = 400 Gb/s (NDR),
    23 = 800 Gb/s (XDR). ``None`` (default): no ``rate=`` flag. A group's rate is a join
    requirement: a port whose link trained slower cannot join it (opensm(8) "rate"), so one
    degraded link would lose IPoIB; set it only on a fabric whose links all run at that rate."""
    deploy_in_cluster: bool = False
    """Run NVIDIA OpenSM in the cluster (privileged Deployment pinned to ``node``)."""
    node: DnsSubdomain | None = None
    """Kubernetes node (one of ``platform.nodes``) that runs the in-cluster OpenSM: it needs that node's HCA and
    umad devices. Required with ``deployInCluster``."""


class InfraPartition(Model):
    """The hosts' own ports (PFs) as full members of one partition: host IPoIB, storage over RDMA.

    With a partitions.conf, OpenSM makes every port a *limited* member of the default partition
    (linux-rdma/opensm ``osm_prtn.c`` ``osm_prtn_make_default``), and two limited members cannot
    talk: PF-to-PF traffic stops. This partition gives the listed PF ports a partition of their
    own, at P_Key index 0 (``indx0``: the parent IPoIB interface and RDMA CM use index 0), and
    never holds a VF, so team VFs still reach no host.
    """

    name: DnsLabel = "infra"
    """The partition's name in partitions.conf."""
    pkey: PKey
    """P_Key of the hosts' partition (``0x0001``..``0x7ffe``, written as a number or hex string; the full-member bit
    is ignored); unique among the stack's partitions."""
    ipoib: bool = True
    """Give the partition an IPoIB broadcast group (``ipoib`` flag in partitions.conf, with
    ``opensm.ipoibMtu``/``ipoibRate``); default true: host IPoIB runs over it."""
    ports: list[Guid]
    """Port GUIDs of the hosts' PFs (``ibstat -p`` on each host); VF GUIDs are refused."""


class Fabric(Model):
    """The on-prem InfiniBand fabric: SR-IOV layout, GUIDs and the subnet manager."""

    vfs_per_hca: PositiveInt = 6
    """SR-IOV VFs created on every HCA (``sriov_numvfs``, default 6): at most ``firmwareMaxVfs`` and
    ``2**guidScheme.vfBits``; teams' ``partition.vfIndex`` must be below it. Changing it needs ``reconfigure``."""
    firmware_max_vfs: Annotated[int, Field(ge=1, le=127)] = 16
    """``NUM_OF_VFS`` burnt into firmware (mlxconfig); ConnectX allows at most 127 per port."""
    link_rate_gbps: Literal[200, 400, 800] = 400
    """Line rate of one HCA port in Gb/s: 200 (HDR), 400 (NDR, default) or 800 (XDR). The ib_write_bw proof expects
    ``verification.ibWriteBwMinFraction`` of it."""
    guid_scheme: GuidScheme = GuidScheme()
    """How VF GUIDs are derived from node id, HCA and VF index (see :class:`GuidScheme`). Changing it re-binds every
    VF and needs ``reconfigure``."""
    opensm: OpenSm = OpenSm()
    """The subnet manager's settings: routing engine, IPoIB MTU and rate, and whether OpenSM runs in the cluster."""
    vf_config: Literal["daemonset", "sriov-network-operator"] = "daemonset"
    """How VFs are created and given GUIDs on the hosts (see components/fabric/sriov_host.py)."""
    ipam: Literal["none", "static", "nv-ipam"] = "none"
    """IPAM of the team NADs. ``none``: the VF gets no IPv4 address (RDMA needs none; NCCL
    bootstraps over the pod network). ``static``: every pod lists its own ``ips`` in its
    network-selection element (pods that list none use the team's address-less
    ``ib-<team>-rdma`` NAD). ``nv-ipam``: NVIDIA nv-ipam assigns them from a pool per team."""
    ipam_supernet: str = "192.168.0.0/16"
    """Subnet each team's secondary network draws from (nv-ipam) — one /24 per team by P_Key."""
    reconfigure: bool = False
    """Acknowledges that changing ``vfsPerHca`` or ``guidScheme`` re-creates (``sriov_numvfs``) or
    re-binds (new GUIDs) every VF of every node under running pods. Without it a run whose
    values differ from the last run's stops (components/guards/fabric.py)."""
    infrastructure: InfraPartition | None = None
    """A partition for the hosts' own PF ports; ``None``: PFs are only limited members of the
    default partition and cannot reach each other (see :class:`InfraPartition`)."""


class Multus(Model):
    """Multus on-prem: the thin plugin in front of the cluster's own CNI (see components/fabric/multus.py).

    Multus needs to know which network is the pods' primary one; the Network Operator's
    "auto" mode would find it but cannot switch on ``namespaceIsolation``, so gpuaas writes
    the whole Multus config and asks for that network here.
    """

    cluster_network: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=253)]
    """The primary CNI network: the ``name`` inside its conf file in ``cniConfDir`` (Calico
    ``k8s-pod-network``, Cilium ``cilium``, Flannel ``cbr0``) or a NAD in ``kube-system``.
    (The operator pastes the Multus config into a single-quoted template: no quotes here.)"""
    cni_conf_dir: HostPath = "/etc/cni/net.d"
    """The container runtime's CNI conf directory on every node (k3s/RKE2 use their own): the
    primary CNI's conf is there, and the Network Operator writes Multus' conf there."""
    readiness_indicator_file: HostPath | None = None
    """A file whose existence means the primary CNI is ready (Multus waits for it); ``None``: no wait."""
