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

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Final

import pulumi

from components import k8s as kube
from components import resources
from components.config import Node, NodeGroup, OnPremPartition, OnPremPlatform, StackConfig, Team
from components.guids import check_guids, node_guids
from components.k8s import Manifest
from components.network_operator import tolerations
from components.types import colon_guid

PART_OF: Final = resources.PART_OF
GUIDS_CONFIG_MAP: Final = "gpuaas-vf-guids"
DAEMONSET: Final = "gpuaas-vf-config"
PLAN_DIR: Final = "/etc/gpuaas/vf-guids"
#: Host file of the SR-IOV Network Operator's static IB GUID assignment.
OPERATOR_GUID_FILE: Final = "/etc/sriov-operator/infiniband/guids"
#: ConfigMaps hold at most 1 MiB (etcd's request limit); leave room for metadata.
MAX_PLAN_BYTES: Final = 900 * 1024
#: A node name is a DNS subdomain: at most 253 characters, plus the ConfigMap key's share.
MAX_NODE_NAME: Final = 253
#: A plan line past the HCA name: `` 02:00:00:00:00:00:53:00 127\n`` at most (127 VFs per port).
LINE_CHARS: Final = len(f" {colon_guid(0)} 127\n")
CONFIG_HASH_ANNOTATION: Final = "gpuaas.io/config-hash"

#: Idempotent per-node VF configuration (see the module docstring). Applies the node's plan, then
#: re-applies it whenever the plan file changes (the projected volume follows its ConfigMaps), so
#: adding or changing nodes restarts no pod. ``SYSFS``/``READY``/``ONESHOT``/``PERIOD`` exist for
#: the tests, which run it against a fake sysfs.
CONFIGURE_VFS: Final = r"""set -euo pipefail
sys="${SYSFS:-/sys}"
ready="${READY:-/tmp/ready}"
plan="$PLAN_DIR/$NODE_NAME"
trap 'exit 0' TERM
host() { nsenter --target 1 --mount -- "$@"; }
configure() {
  while read -r hca first n; do
    [ -n "$hca" ] || continue
    dev="$sys/class/infiniband/$hca/device"
    [ -d "$dev" ] || { echo "$hca: no such RDMA device on $NODE_NAME" >&2; exit 1; }
    if [ "$(cat "$dev/sriov_numvfs")" != "$n" ]; then
      echo "$hca: sriov_numvfs -> $n"
      echo 0 > "$dev/sriov_numvfs"
      echo "$n" > "$dev/sriov_numvfs"
    fi
    pf=$(ls "$dev/net" | head -n 1)
    for ((vf = 0; vf < n; vf++)); do
      hex=$(printf '%016x' $((0x${first//:/} + vf)))
      guid="${hex:0:2}:${hex:2:2}:${hex:4:2}:${hex:6:2}:${hex:8:2}:${hex:10:2}:${hex:12:2}:${hex:14:2}"
      bdf=$(basename "$(readlink -f "$dev/virtfn$vf")")
      have=$(cat "$sys"/bus/pci/devices/"$bdf"/infiniband/*/node_guid 2>/dev/null | tr -d ':' || true)
      [ "$have" = "${guid//:/}" ] && continue
      if [ -d "$dev/sriov/$vf" ]; then
        echo "$guid" > "$dev/sriov/$vf/node"
        echo "$guid" > "$dev/sriov/$vf/port"
        echo Follow > "$dev/sriov/$vf/policy"
      else
        host ip link set "$pf" vf "$vf" node_guid "$guid" port_guid "$guid" state auto
      fi
      echo "$bdf" > "$sys"/bus/pci/drivers/mlx5_core/unbind 2>/dev/null || true
      echo "$bdf" > "$sys"/bus/pci/drivers/mlx5_core/bind
      echo "$hca VF $vf ($bdf): GUID $guid"
    done
  done < "$plan"
}
applied=""
while true; do
  if [ -f "$plan" ]; then
    sum=$(cksum < "$plan")
    if [ "$sum" != "$applied" ]; then
      configure
      applied="$sum"
      echo "VF plan of $NODE_NAME applied"
    fi
  elif [ -z "$applied" ]; then
    echo "no GUID plan for node $NODE_NAME: not one of platform.nodes, nothing to do"
    applied="none"
  fi
  touch "$ready"
  [ -z "${ONESHOT:-}" ] || exit 0
  sleep "${PERIOD:-30}" & wait $!
done
"""


def guid_table(onprem: OnPremPlatform, node: Node) -> str:
    """One node's plan: a line per HCA, ``<hca> <GUID of VF 0> <number of VFs>`` (colon form).

    VF ``n`` gets GUID of VF 0 plus ``n``: the VF index is the scheme's lowest field, and
    :func:`components.guids.node_guids` builds exactly that range.
    """
    return "".join(f"{hca} {colon_guid(guids[0])} {len(guids)}\n" for hca, guids in node_guids(onprem, node).items())


def guid_plan(cfg: StackConfig) -> dict[str, str]:
    """Every node's plan, keyed by node name (sorted); every GUID of the fleet checked unique."""
    onprem = cfg.onprem
    if onprem is None:
        return {}
    check_guids(g for n in onprem.nodes for guids in node_guids(onprem, n).values() for g in guids)
    return {n.name: guid_table(onprem, n) for n in sorted(onprem.nodes, key=lambda n: n.name)}


def node_plan_bound(group: NodeGroup) -> int:
    """The most bytes one node of ``group`` adds to a shard: longest legal node name, every HCA line.

    Independent of the VF count: a line names VF 0's GUID and how many follow.
    """
    return MAX_NODE_NAME + sum(len(h) + LINE_CHARS for h in group.hcas)


def shard_size(group: NodeGroup) -> int:
    """Nodes per GUID-plan ConfigMap of ``group``: a power of two whose worst case fits; 0 if none does.

    Worst case, not actual size, so adding or renaming a node never moves another node to a
    different shard; only a change of the group's HCA list re-cuts its shards.
    """
    fit = MAX_PLAN_BYTES // node_plan_bound(group)
    return 1 << (fit.bit_length() - 1) if fit else 0


def shard_name(onprem: OnPremPlatform, node: Node) -> str:
    """The ConfigMap holding ``node``'s plan: ``gpuaas-vf-guids-<group>-<id // shard size>``."""
    size = shard_size(onprem.groups_by_name[node.node_group])
    return f"{GUIDS_CONFIG_MAP}-{node.node_group}-{node.id // size}"


def guid_shards(cfg: StackConfig) -> dict[str, dict[str, str]]:
    """:func:`guid_plan` cut into ConfigMap-sized shards: shard name → node name → plan (all sorted)."""
    onprem = cfg.onprem
    if onprem is None:
        return {}
    plan = guid_plan(cfg)
    shards: dict[str, dict[str, str]] = {}
    for node in sorted(onprem.nodes, key=lambda n: n.name):
        shards.setdefault(shard_name(onprem, node), {})[node.name] = plan[node.name]
    return dict(sorted(shards.items()))


def guid_config_maps(cfg: StackConfig, shards: Mapping[str, Mapping[str, str]] | None = None) -> list[Manifest]:
    """One ConfigMap per shard; the DaemonSet mounts them all into one directory.

    ``shards``: :func:`guid_shards` when the caller has them.
    """
    if shards is None:
        shards = guid_shards(cfg)
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": shard, "namespace": cfg.network.namespace, "labels": dict(PART_OF)},
            "data": dict(data),
        }
        for shard, data in shards.items()
    ]


def config_hash(*texts: str) -> str:
    """Short digest of what a pod runs with: a change rolls the pods, nothing else does."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def daemonset(cfg: StackConfig, shards: Mapping[str, Mapping[str, str]] | None = None) -> Manifest:
    """The privileged VF/GUID DaemonSet, rolled whenever the plan or the script changes.

    Every shard is one source of a projected volume, so each pod sees ``$PLAN_DIR/<its node>``
    whichever ConfigMap holds it. ``shards``: :func:`guid_shards` when the caller has them.
    """
    if shards is None:
        shards = guid_shards(cfg)
    # The script, not the plan: pods pick plan changes up themselves (:data:`CONFIGURE_VFS`).
    digest = config_hash(CONFIGURE_VFS)
    labels = {"app.kubernetes.io/name": DAEMONSET, **PART_OF}
    v = cfg.versions
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DAEMONSET, "namespace": cfg.network.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": DAEMONSET}},
            # Restarting a pod leaves configured VFs alone, so a script or image change may roll
            # a tenth of the fleet at once (one at a time would outlast Pulumi's rollout wait).
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {
                "metadata": {"labels": labels, "annotations": {CONFIG_HASH_ANNOTATION: digest}},
                "spec": {
                    "hostNetwork": True,
                    "hostPID": True,
                    "priorityClassName": "system-node-critical",
                    "terminationGracePeriodSeconds": 5,
                    "nodeSelector": dict(cfg.network.node_selector),
                    "tolerations": tolerations(cfg.network),
                    "containers": [
                        {
                            "name": "configure-vfs",
                            "image": f"{v.node_tools_image}:{v.node_tools}",
                            "command": ["/bin/bash", "-c", CONFIGURE_VFS],
                            "env": [
                                {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                {"name": "PLAN_DIR", "value": PLAN_DIR},
                            ],
                            "securityContext": {"privileged": True},
                            "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 5},
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                            "volumeMounts": [{"name": "plan", "mountPath": PLAN_DIR, "readOnly": True}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "plan",
                            "projected": {"sources": [{"configMap": {"name": shard}} for shard in shards]},
                        }
                    ],
                },
            },
        },
    }


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


class SriovHost(pulumi.ComponentResource):
    """The GUID plan ConfigMaps (a few per node group) and the VF DaemonSet."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("gpuaas:index:SriovHost", name, None, opts)
        onprem = cfg.onprem
        if onprem is None or onprem.fabric.vf_config != "daemonset":
            raise ValueError("SriovHost needs an on-prem platform with fabric.vfConfig: daemonset")
        shards = guid_shards(cfg)
        plans = [
            kube.apply(f"{name}-{cm['metadata']['name']}", cm, kube.child(self, list(depends_on)))
            for cm in guid_config_maps(cfg, shards)
        ]
        self.daemonset = kube.apply(
            f"{name}-daemonset", daemonset(cfg, shards), kube.child(self, [*plans, *depends_on])
        )
        self.register_outputs({"nodes": len(onprem.nodes), "configMaps": list(shards)})
