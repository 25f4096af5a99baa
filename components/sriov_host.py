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

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Final

import pulumi

from components import k8s as kube
from components import mig_guard, resources
from components.config import Node, NodeGroup, OnPremPartition, OnPremPlatform, StackConfig, Team
from components.guids import check_guids, node_guids
from components.k8s import Manifest
from components.network_operator import driver_ready_node_selector, tolerations
from components.rules import sriov_partitions
from components.types import colon_guid, full_member_pkey

PART_OF: Final = resources.PART_OF
GUIDS_CONFIG_MAP: Final = "gpuaas-vf-guids"
DAEMONSET: Final = "gpuaas-vf-config"
PLAN_DIR: Final = "/etc/gpuaas/vf-guids"
#: The team P_Key each VF index must show at ``pkeys/0`` before the device plugin is restarted.
PKEYS_CONFIG_MAP: Final = "gpuaas-vf-pkeys"
PKEYS_DIR: Final = "/etc/gpuaas/vf-pkeys"
PKEYS_KEY: Final = "pkeys"
#: Host tmpfs directory keeping the state the device plugin was last restarted for.
STATE_DIR: Final = "/run/gpuaas"
#: Host file of the SR-IOV Network Operator's static IB GUID assignment.
OPERATOR_GUID_FILE: Final = "/etc/sriov-operator/infiniband/guids"
#: ConfigMaps hold at most 1 MiB (etcd's request limit); leave room for metadata.
MAX_PLAN_BYTES: Final = 900 * 1024
#: A node name is a DNS subdomain: at most 253 characters, plus the ConfigMap key's share.
MAX_NODE_NAME: Final = 253
#: A plan line past the HCA name: `` 02:00:00:00:00:00:53:00 127\n`` at most (127 VFs per port).
LINE_CHARS: Final = len(f" {colon_guid(0)} 127\n")
CONFIG_HASH_ANNOTATION: Final = "gpuaas.io/config-hash"

#: Idempotent per-node VF configuration (see the module docstring), re-checked against the host
#: every ``PERIOD`` seconds, not only when the plan changes: a driver reload or ``mlxfwreset``
#: destroys the VFs (``sriov_numvfs`` back to 0) and the next pass recreates them. Then the SR-IOV
#: device plugin: it discovers devices once, at start, and reads each VF's P_Key from
#: ``pkeys/0`` while building it (sriov-network-device-plugin v3.11.0 ``cmd/sriovdp/main.go``
#: ``discoverHostDevices`` before ``startAllServers``; ``pkg/netdevice/pciNetDevice.go``
#: ``GetPKey``), so a plugin started before the VFs exist advertises empty pools, and one started
#: before the subnet manager programmed a partition keeps that VF under its old resource. Once
#: every planned VF exists and each team VF's ``pkeys/0`` reads its team's full-member key
#: (:func:`pkey_table`), the script restarts every device-plugin process of its node that started
#: before that moment: SIGTERM, which the plugin answers by stopping its servers and exiting
#: (``signal.Notify(... SIGTERM ...)``), and the kubelet starts the container again
#: (``restartPolicy: Always``), which rediscovers. The pod runs in the host PID namespace, so it
#: sees its node's processes and no other node's: no API access, no RBAC. A state that changes
#: again (VFs recreated, a partition moved) is waited for and restarts the plugin once more. The
#: settled state is kept in ``/run`` (tmpfs: gone after a reboot, when ``/proc`` start times
#: restart too), so a restarted pod does not restart a plugin that already saw it.
#: ``SYSFS``/``PROC``/``READY``/``STATE``/``DEVICE_PLUGIN``/``ONESHOT``/``PERIOD`` exist for the
#: tests, which run it against a fake sysfs and a fake plugin process.
CONFIGURE_VFS: Final = r"""set -euo pipefail
sys="${SYSFS:-/sys}"
proc="${PROC:-/proc}"
ready="${READY:-/tmp/ready}"
state_file="${STATE:-/run/gpuaas/vf-state}"
plugin="${DEVICE_PLUGIN:-sriovdp}"
pkeys="${PKEYS:-}"
plan="$PLAN_DIR/$NODE_NAME"
trap 'exit 0' TERM
host() { nsenter --target 1 --mount -- "$@"; }
fail() { echo "$*" >&2; exit 1; }
vf_bdf() { basename "$(readlink -f "$1/virtfn$2")"; }
vf_ib() {
  local d
  for d in "$sys/bus/pci/devices/$1/infiniband/"*; do [ -d "$d" ] && { echo "$d"; break; }; done
  return 0
}
configure() {
  changes=0
  incomplete=""
  while read -r hca first n; do
    [ -n "$hca" ] || continue
    dev="$sys/class/infiniband/$hca/device"
    [ -d "$dev" ] || fail "$hca: no such RDMA device on $NODE_NAME"
    total=$(cat "$dev/sriov_totalvfs" 2>/dev/null || echo 0)
    [ "$total" -ge "$n" ] || fail "$hca: the firmware allows $total VFs (sriov_totalvfs) but the plan needs $n:" \
      "set NUM_OF_VFS to at least $n (mlxconfig -d <device> set SRIOV_EN=1 NUM_OF_VFS=$n, then mlxfwreset or" \
      "reboot), or lower platform.fabric.vfsPerHca and platform.fabric.firmwareMaxVfs to $total"
    if [ "$(cat "$dev/sriov_numvfs")" != "$n" ]; then
      echo "$hca: sriov_numvfs -> $n"
      echo 0 > "$dev/sriov_numvfs"
      echo "$n" > "$dev/sriov_numvfs"
      changes=$((changes + 1))
    fi
    # The PF's netdev is needed only for the ip-link way; MLNX_OFED's sysfs way works without one.
    pf=""
    for net in "$dev"/net/*; do [ -e "$net" ] && { pf=$(basename "$net"); break; }; done
    for ((vf = 0; vf < n; vf++)); do
      if [ ! -e "$dev/virtfn$vf" ]; then incomplete+=" $hca/VF$vf(absent)"; continue; fi
      hex=$(printf '%016x' $((0x${first//:/} + vf)))
      guid="${hex:0:2}:${hex:2:2}:${hex:4:2}:${hex:6:2}:${hex:8:2}:${hex:10:2}:${hex:12:2}:${hex:14:2}"
      bdf=$(vf_bdf "$dev" "$vf")
      have=$(cat "$sys"/bus/pci/devices/"$bdf"/infiniband/*/node_guid 2>/dev/null | tr -d ':' || true)
      [ "$have" = "${guid//:/}" ] && continue
      if [ -d "$dev/sriov/$vf" ]; then
        echo "$guid" > "$dev/sriov/$vf/node"
        echo "$guid" > "$dev/sriov/$vf/port"
        echo Follow > "$dev/sriov/$vf/policy"
      elif [ -n "$pf" ]; then
        host ip link set "$pf" vf "$vf" node_guid "$guid" port_guid "$guid" state auto
      else
        echo "$hca VF $vf: cannot set GUID $guid: no MLNX_OFED sriov/$vf sysfs and no PF netdev for" \
          "'ip link set <pf> vf $vf' (is the IPoIB module loaded?); retrying" >&2
        incomplete+=" $hca/VF$vf(no-netdev)"
        continue
      fi
      echo "$bdf" > "$sys"/bus/pci/drivers/mlx5_core/unbind 2>/dev/null || true
      echo "$bdf" > "$sys"/bus/pci/drivers/mlx5_core/bind
      echo "$hca VF $vf ($bdf): GUID $guid"
      changes=$((changes + 1))
    done
  done < "$plan"
}
# observe: the node's VFs as the device plugin would build them, one line per planned VF, in
# $observed; $missing lists team VFs whose pkeys/0 is not (yet) their team's full-member key.
observe() {
  declare -A want=() team=()
  local vf key name hca first n dev bdf ib got
  if [ -n "$pkeys" ] && [ -f "$pkeys" ]; then
    while read -r vf key name; do
      [ -n "$vf" ] || continue
      want[$vf]=$key
      team[$vf]=$name
    done < "$pkeys"
  fi
  observed=""
  missing=""
  while read -r hca first n; do
    [ -n "$hca" ] || continue
    dev="$sys/class/infiniband/$hca/device"
    for ((vf = 0; vf < n; vf++)); do
      bdf=""; ib=""; got="-"
      if [ -e "$dev/virtfn$vf" ]; then bdf=$(vf_bdf "$dev" "$vf"); ib=$(vf_ib "$bdf"); fi
      [ -z "$ib" ] || got=$(cat "$ib/ports/1/pkeys/0" 2>/dev/null || echo -)
      observed+="$hca $vf $bdf $(cat "$ib/node_guid" 2>/dev/null || true) $got"$'\n'
      if [ -z "$ib" ]; then
        missing+=" $hca/VF$vf:absent"
      elif [ -n "${want[$vf]:-}" ] && [ "$got" != "${want[$vf]}" ]; then
        missing+=" $hca/VF$vf:pkeys/0=$got,want=${want[$vf]}(${team[$vf]})"
      fi
    done
  done < "$plan"
}
boot_ticks() {
  local up hz
  read -r up _ < "$proc/uptime"
  hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
  echo $(( ${up%.*} * hz + 10#${up#*.} * hz / 100 ))
}
# Restart every device-plugin process of this node that started at or before $settled_at.
restart_stale_plugins() {
  local p comm stat fields
  for p in "$proc"/[0-9]*; do
    { read -r comm < "$p/comm"; } 2>/dev/null || continue
    [ "$comm" = "$plugin" ] || continue
    { read -r stat < "$p/stat"; } 2>/dev/null || continue
    read -r -a fields <<< "${stat##*) }"
    if [ "${fields[19]}" -le "$settled_at" ]; then
      echo "restarting the SR-IOV device plugin (pid ${p##*/}): it discovered the VFs before they were final"
      kill -TERM "${p##*/}" 2>/dev/null || true
    fi
  done
}
sync_device_plugin() {
  observe
  if [ -n "$missing" ] || [ "$changes" -gt 0 ]; then
    if [ "$missing" != "$waiting" ] && [ -n "$missing" ]; then
      read -r -a m <<< "$missing"
      echo "device plugin not restarted yet: ${#m[@]} VF(s) not final, e.g. ${m[*]:0:3}"
    fi
    waiting="$missing"
    settled=""
    return
  fi
  waiting=""
  if [ "$observed" != "$settled" ]; then
    settled="$observed"
    settled_at=$(boot_ticks)
    mkdir -p "$(dirname "$state_file")"
    printf '%s\n%s' "$settled_at" "$settled" > "$state_file.tmp" && mv -f "$state_file.tmp" "$state_file"
    echo "VFs of $NODE_NAME final: every team VF carries its partition's key at pkeys/0"
  fi
  restart_stale_plugins
}
applied=""
settled=""
settled_at=0
waiting="-"
if [ -f "$state_file" ]; then { read -r settled_at; settled=$(cat)$'\n'; } < "$state_file"; fi
while true; do
  if [ -f "$plan" ]; then
    sum=$(cksum < "$plan")
    configure
    if [ "$sum" != "$applied" ] || [ "$changes" -gt 0 ]; then
      applied="$sum"
      echo "VF plan of $NODE_NAME applied"
    fi
    if [ -z "$incomplete" ]; then touch "$ready"; else rm -f "$ready"; fi
    sync_device_plugin
  elif [ -z "$applied" ]; then
    echo "no GUID plan for node $NODE_NAME: not one of platform.nodes, nothing to do"
    applied="none"
    touch "$ready"
  fi
  [ -z "${ONESHOT:-}" ] || { [ -z "${incomplete:-}" ] || exit 1; exit 0; }
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


def pkey_table(cfg: StackConfig) -> str:
    """``<vf index> <full-member P_Key> <team>`` per team partition, by VF index.

    What each team VF's ``pkeys/0`` reads once the subnet manager has programmed it: the team's
    key in the kernel's full-member form at index 0 (``indx0``, ``=full`` in partitions.conf;
    drivers/infiniband/core/sysfs.c prints ``0x%04x``), exactly what the device plugin's
    ``pKeys`` selector compares.
    """
    rows = sorted((part.vf_index, full_member_pkey(part.pkey), team) for team, part in sriov_partitions(cfg))
    return "".join(f"{vf} {key} {name}\n" for vf, key, name in rows)


def pkeys_config_map(cfg: StackConfig) -> Manifest:
    """The :func:`pkey_table` the VF pods wait for (one small ConfigMap for the fleet)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PKEYS_CONFIG_MAP, "namespace": cfg.network.namespace, "labels": dict(PART_OF)},
        "data": {PKEYS_KEY: pkey_table(cfg)},
    }


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
                    # After the containerized DOCA driver: VFs created on inbox modules vanish
                    # when the driver container swaps them.
                    "nodeSelector": driver_ready_node_selector(cfg.network),
                    "tolerations": tolerations(cfg.network),
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
    """The GUID plan ConfigMaps (a few per node group), the P_Key table and the VF DaemonSet."""

    plans: list[pulumi.CustomResource]

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        depends_on: Sequence[pulumi.Resource] = (),
        gate: pulumi.Output[bool] | None = None,
    ) -> None:
        super().__init__("gpuaas:index:SriovHost", name, None, opts)
        onprem = cfg.onprem
        if onprem is None or onprem.fabric.vf_config != "daemonset":
            raise ValueError("SriovHost needs an on-prem platform with fabric.vfConfig: daemonset")
        shards = guid_shards(cfg)
        # ``gate``: the day-2 fabric guard (components/fabric_guard.py); a VF count, GUID or
        # partition change reaches the nodes only once it passed.
        self.plans = [
            kube.apply(
                f"{name}-{cm['metadata']['name']}",
                {**cm, "data": mig_guard.gated(gate, cm["data"])},
                kube.child(self, list(depends_on)),
            )
            for cm in [*guid_config_maps(cfg, shards), pkeys_config_map(cfg)]
        ]
        self.daemonset = kube.apply(
            f"{name}-daemonset", daemonset(cfg, shards), kube.child(self, [*self.plans, *depends_on])
        )
        self.register_outputs({"nodes": len(onprem.nodes), "configMaps": list(shards)})
