"""The VF configuration script the SR-IOV host DaemonSet runs on every node (:mod:`components.fabric.sriov_host`).

One piece: a shell script, kept as the one string the DaemonSet's pods run and the tests run
against a fake sysfs.
"""

from __future__ import annotations

from typing import Final

#: Idempotent per-node VF configuration (see the module docstring), re-checked against the host
#: every ``PERIOD`` seconds, not only when the plan changes: a driver reload or ``mlxfwreset``
#: destroys the VFs (``sriov_numvfs`` back to 0) and the next pass recreates them. Then the SR-IOV
#: device plugin: it discovers devices once, at start, and reads each VF's P_Key from
#: ``pkeys/0`` while building it (sriov-network-device-plugin v3.11.0 ``cmd/sriovdp/main.go``
#: ``discoverHostDevices`` before ``startAllServers``; ``pkg/netdevice/pciNetDevice.go``
#: ``GetPKey``), so a plugin started before the VFs exist advertises empty pools, and one started
#: before the subnet manager programmed a partition keeps that VF under its old resource. Once
#: every planned VF exists and each team VF's ``pkeys/0`` reads its team's full-member key
#: (:func:`pkey_table`), the script restarts every device-plugin process of its node that was running
#: at that moment, each named by its pid and start time (never "started at or before", which a
#: 10 ms clock tick cannot tell apart from "just after"): SIGTERM, which the plugin answers by
#: stopping its servers and exiting (``signal.Notify(... SIGTERM ...)``), and the kubelet starts the container again
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
# The device-plugin processes of this node, each as pid:starttime (/proc/<pid>/stat field 22, clock
# ticks since boot): a pid with its start time names one process, never a later one reusing the pid.
plugin_processes() {
  local p comm stat fields out=""
  for p in "$proc"/[0-9]*; do
    { read -r comm < "$p/comm"; } 2>/dev/null || continue
    [ "$comm" = "$plugin" ] || continue
    { read -r stat < "$p/stat"; } 2>/dev/null || continue
    read -r -a fields <<< "${stat##*) }"
    out+=" ${p##*/}:${fields[19]}"
  done
  echo "${out# }"
}
# Restart exactly the device-plugin processes that were running when the VFs became final ($stale):
# they discovered them before that. Matched by identity (pid and start time), never by comparing
# times: a plugin the kubelet started again within the same 10 ms clock tick is a new process.
restart_stale_plugins() {
  local id
  for id in $(plugin_processes); do
    case " $stale " in
      *" $id "*)
        echo "restarting the SR-IOV device plugin (pid ${id%%:*}): it discovered the VFs before they were final"
        kill -TERM "${id%%:*}" 2>/dev/null || true
        ;;
    esac
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
    stale=$(plugin_processes)
    mkdir -p "$(dirname "$state_file")"
    printf '%s\n%s' "$stale" "$settled" > "$state_file.tmp" && mv -f "$state_file.tmp" "$state_file"
    echo "VFs of $NODE_NAME final: every team VF carries its partition's key at pkeys/0"
  fi
  restart_stale_plugins
}
applied=""
settled=""
stale=""
waiting="-"
if [ -f "$state_file" ]; then { read -r stale || true; settled=$(cat)$'\n'; } < "$state_file"; fi
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
