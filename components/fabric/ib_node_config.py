"""ib-node-config: the host settings every RDMA pod needs, applied by a privileged DaemonSet.

On every RDMA node (``cfg.network.node_selector``) it

1. loads ``ib_umad`` (``/dev/infiniband/umad*``: ``ibstat``, OpenSM, perftest's path queries)
   and ``rdma_ucm`` (``/dev/infiniband/rdma_cm``: the RDMA CM that NCCL and ``ib_write_bw -R``
   use), and lists both in ``/etc/modules-load.d/gpuaas-ib.conf`` so they return after a reboot;
2. writes systemd drop-ins ``LimitMEMLOCK=infinity`` for containerd and the kubelet: containers
   inherit containerd's memlock limit, and RDMA memory registration fails under the usual 64 KiB
   (Azure/aks-rdma-infiniband README: "without this ... ``ulimit -l`` value of 64");
3. runs ``systemctl daemon-reload`` and restarts a service **only** when its drop-in changed or
   its running process still has a lower limit: the *live* ``Max locked memory`` of the
   service's ``MainPID`` (``/proc/<pid>/limits``; the pod shares the host PID namespace) is
   compared, not just the file, so a pod killed between writing the drop-in and restarting is
   repaired by the next one instead of seeing "unchanged" forever. A re-rolled DaemonSet (or a
   rebooted node) never restarts containerd/kubelet twice;
4. staggers a node's *first* restart (no drop-in there yet): on a first install every pod starts
   at once (a DaemonSet's ``maxUnavailable`` only paces updates), so each node waits
   ``cksum(node name) mod window`` seconds, the window growing with the fleet
   (:func:`stagger_seconds`); repairs and drifts restart at once;
5. logs one line ``ib-node-config: node=… changed=… restarted=…`` and marks itself done, which
   makes the pod Ready; then it sleeps.

**Result signalling: readiness + a log line, no node label.** The pod turns Ready only after
the script succeeded, so ``pulumi up`` (which awaits DaemonSet rollouts since
pulumi-kubernetes#2953) and ``kubectl rollout
status ds/ib-node-config`` report per-node completion. A node label was considered and left out:
the node-tools image carries no API client, and the ServiceAccount would need a ClusterRole to
patch *any* Node (RBAC cannot limit it to its own), a cluster-wide steering lever held by a
privileged hostPID pod.

It runs after the NicClusterPolicy is ready, and with the containerized DOCA driver only on nodes
whose driver pod is ready (the operator's ``network.nvidia.com/operator.mofed.wait=false`` label,
:func:`components.k8s.driver_ready_node_selector`; the policy being ready does not
mean every node's driver is, and a node's driver reloads on upgrade): loading the modules earlier
would pull in the inbox ones the driver container is about to replace (the race behind
Mellanox/doca-driver-build#52).

The script lives here as a string, goes into a ConfigMap, and its SHA-256 is a pod-template
annotation, so editing it re-rolls the DaemonSet. Every host access goes through variables a test
can point elsewhere: ``IB_NODE_CONFIG_ROOT`` (host filesystem, default ``/host``),
``IB_NODE_CONFIG_SYSTEMCTL`` / ``IB_NODE_CONFIG_MODPROBE`` (default: the host's, via
``nsenter`` into PID 1), ``IB_NODE_CONFIG_PROC`` (the host's ``/proc``), ``IB_NODE_CONFIG_STAGGER``
(the first-restart window in seconds), ``IB_NODE_CONFIG_DONE`` (readiness marker) and
``IB_NODE_CONFIG_ONESHOT`` (exit instead of sleeping).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components import k8s as kube
from components.k8s import Manifest, driver_ready_node_selector
from components.model.network import Network
from components.model.resources import PART_OF
from components.model.versions import Versions

NAME = "ib-node-config"
SCRIPT_KEY = "ib-node-config.sh"
SCRIPT_DIR = "/opt/gpuaas"
DONE_FILE = "/tmp/ib-node-config.done"
#: Host modules loaded now and at every boot.
MODULES = ("ib_umad", "rdma_ucm")
#: Services that get the memlock drop-in (restarted only when it changes).
SERVICES = ("containerd", "kubelet")
MODULES_LOAD_FILE = "/etc/modules-load.d/gpuaas-ib.conf"
DROPIN_NAME = "50-gpuaas-memlock.conf"

SCRIPT = r"""#!/usr/bin/env bash
# ib-node-config (gpuaas): IB kernel modules and memlock limits on an RDMA node.
# Source of truth: components/fabric/ib_node_config.py; see its docstring for why each step exists.
set -euo pipefail

ROOT="${IB_NODE_CONFIG_ROOT-/host}"
HOST_EXEC="nsenter --target 1 --mount --uts --ipc --net --pid --"
read -r -a SYSTEMCTL <<< "${IB_NODE_CONFIG_SYSTEMCTL:-$HOST_EXEC systemctl}"
read -r -a MODPROBE <<< "${IB_NODE_CONFIG_MODPROBE:-$HOST_EXEC modprobe}"
DONE="${IB_NODE_CONFIG_DONE:-/tmp/ib-node-config.done}"
PROC="${IB_NODE_CONFIG_PROC:-/proc}"
STAGGER="${IB_NODE_CONFIG_STAGGER:-0}"
NODE="${NODE_NAME:-$(hostname)}"
MODULES=(__MODULES__)
SERVICES=(__SERVICES__)

rm -f "$DONE"

# write_if_changed PATH CONTENT: write CONTENT (plus a newline) to ROOT/PATH unless it already
# holds exactly that; exit status 0 = written, 1 = unchanged.
write_if_changed() {
  local path="$ROOT$1" content="$2"
  if [[ -f "$path" && "$(< "$path")" == "$content" ]]; then
    return 1
  fi
  mkdir -p "$(dirname "$path")"
  printf '%s\n' "$content" > "$path.gpuaas-tmp"
  mv -f "$path.gpuaas-tmp" "$path"
  return 0
}

changed=()
for module in "${MODULES[@]}"; do
  "${MODPROBE[@]}" "$module"
done
if write_if_changed __MODULES_LOAD_FILE__ "$(printf '%s\n' "${MODULES[@]}")"; then
  changed+=("modules-load")
fi

MEMLOCK_DROPIN="# gpuaas ib-node-config: RDMA pins the memory it registers; containers inherit this limit.
[Service]
LimitMEMLOCK=infinity"

# live_memlock SERVICE: the soft "Max locked memory" of the service's running main process
# ("unlimited" or bytes); nothing when it has none or it cannot be read.
live_memlock() {
  local pid line
  pid=$("${SYSTEMCTL[@]}" show -p MainPID --value "$1" 2>/dev/null || true)
  [[ "$pid" =~ ^[1-9][0-9]*$ && -r "$PROC/$pid/limits" ]] || return 0
  while read -r line; do
    if [[ "$line" == "Max locked memory"* ]]; then
      read -r -a f <<< "$line"
      echo "${f[3]}"
    fi
  done < "$PROC/$pid/limits"
}

restart=()
first=""
for service in "${SERVICES[@]}"; do
  dropin="/etc/systemd/system/$service.service.d/__DROPIN_NAME__"
  [[ -e "$ROOT$dropin" ]] || first=1
  if write_if_changed "$dropin" "$MEMLOCK_DROPIN"; then
    changed+=("$service-memlock")
    restart+=("$service")
  else
    live=$(live_memlock "$service")
    if [[ -n "$live" && "$live" != "unlimited" ]]; then
      echo "ib-node-config: $service runs with memlock $live although its drop-in says infinity" >&2
      changed+=("$service-live-memlock")
      restart+=("$service")
    fi
  fi
done

if ((${#restart[@]})); then
  if [[ -n "$first" && "$STAGGER" -gt 0 ]]; then
    delay=$(( $(printf '%s' "$NODE" | cksum | cut -d' ' -f1) % STAGGER ))
    echo "ib-node-config: node=$NODE first restart of ${restart[*]} in ${delay}s (staggered over ${STAGGER}s)" >&2
    sleep "$delay"
  fi
  "${SYSTEMCTL[@]}" daemon-reload
  for service in "${restart[@]}"; do
    "${SYSTEMCTL[@]}" restart "$service"
  done
fi

join() { local IFS=,; echo "${*:-none}"; }
echo "ib-node-config: node=$NODE modules=$(join "${MODULES[@]}")" \
  "changed=$(join "${changed[@]}") restarted=$(join "${restart[@]}")"
touch "$DONE"

if [[ -n "${IB_NODE_CONFIG_ONESHOT:-}" ]]; then
  exit 0
fi
exec sleep infinity
"""


def script() -> str:
    """The node script with gpuaas's module list, services and paths filled in."""
    return (
        SCRIPT.replace("__MODULES__", " ".join(MODULES))
        .replace("__SERVICES__", " ".join(SERVICES))
        .replace("__MODULES_LOAD_FILE__", MODULES_LOAD_FILE)
        .replace("__DROPIN_NAME__", DROPIN_NAME)
    )


def script_sha256() -> str:
    return hashlib.sha256(script().encode()).hexdigest()


#: Seconds per node of the first-restart window, and its cap: 1000 nodes spread over 10 minutes.
STAGGER_PER_NODE = 2
MAX_STAGGER = 600


@dataclass(frozen=True, kw_only=True)
class IbNodeConfigArgs:
    """Arguments of :class:`IbNodeConfig`. Ordering: ``opts.depends_on`` (the NicClusterPolicy, whose
    DOCA driver replaces the inbox modules first), forwarded to every child."""

    network: Network = field(default_factory=Network)
    """The operator namespace it runs in, the RDMA nodes' selector and tolerations, and whether the DOCA
    driver runs in a container (then it waits for the driver on each node) (``gpuaas:network``)."""
    versions: Versions = field(default_factory=Versions)
    """The node tools image's pinned repository and tag (``nodeToolsImage``, ``nodeTools``)."""
    nodes: int = 0
    """How many nodes run it (on AKS: every ND pool at ``maxCount``): first installs spread their
    containerd and kubelet restarts over :func:`stagger_seconds` of it (defaults to none: no stagger)."""


def stagger_seconds(nodes: int) -> int:
    """The window over which first installs restart containerd and the kubelet (seconds).

    Grows with the ``nodes`` that run it; at most :data:`MAX_STAGGER` (Pulumi waits for the
    DaemonSet's rollout).
    """
    return min(MAX_STAGGER, STAGGER_PER_NODE * nodes)


def config_map(network: Network) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": network.namespace, "labels": dict(PART_OF)},
        "data": {SCRIPT_KEY: script()},
    }


def daemonset(args: IbNodeConfigArgs) -> Manifest:
    """The privileged hostPID DaemonSet running :data:`SCRIPT` on every RDMA node.

    Host files are reached through ``/etc`` mounted at ``/host/etc``; commands (``modprobe``,
    ``systemctl``) run in the host's namespaces via ``nsenter --target 1``. No ServiceAccount
    token: the script never talks to the API server.
    """
    env: list[dict[str, Any]] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "IB_NODE_CONFIG_DONE", "value": DONE_FILE},
        {"name": "IB_NODE_CONFIG_STAGGER", "value": str(stagger_seconds(args.nodes))},
    ]
    return kube.node_daemonset(
        args.network,
        NAME,
        {
            "hostPID": True,
            "priorityClassName": "system-node-critical",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": NAME,
                    "image": f"{args.versions.node_tools_image}:{args.versions.node_tools}",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["bash", f"{SCRIPT_DIR}/{SCRIPT_KEY}"],
                    "env": env,
                    "securityContext": {"privileged": True},
                    "readinessProbe": {
                        "exec": {"command": ["test", "-f", DONE_FILE]},
                        "periodSeconds": 5,
                    },
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"memory": "64Mi"},
                    },
                    "volumeMounts": [
                        {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
                        {"name": "host-etc", "mountPath": "/host/etc"},
                    ],
                }
            ],
            "volumes": [
                {"name": "script", "configMap": {"name": NAME, "defaultMode": 0o555}},
                {"name": "host-etc", "hostPath": {"path": "/etc", "type": "Directory"}},
            ],
        },
        node_selector=driver_ready_node_selector(args.network),
        # One node at a time: a changed drop-in restarts containerd and the kubelet.
        max_unavailable=1,
        annotations={"gpuaas.io/script-sha256": script_sha256()},
    )


class IbNodeConfig(pulumi.ComponentResource):
    """The ib-node-config ConfigMap and DaemonSet; ``opts.depends_on`` should hold the NicClusterPolicy."""

    config_map: pulumi.CustomResource
    daemonset: pulumi.CustomResource

    def __init__(self, name: str, args: IbNodeConfigArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:IbNodeConfig", name, None, opts)
        after = kube.depends_on(opts)
        self.config_map = kube.apply(f"{name}-script", config_map(args.network), kube.child(self, after))
        self.daemonset = kube.apply(f"{name}-daemonset", daemonset(args), kube.child(self, [*after, self.config_map]))
        self.register_outputs({"daemonset": NAME})
