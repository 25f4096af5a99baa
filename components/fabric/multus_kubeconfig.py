"""Keeps Multus' kubeconfig token fresh on every node (on-prem, custom Multus config).

**Why.** The thin plugin runs on each CNI ADD/DEL with the kubeconfig its DaemonSet's entrypoint
wrote on the host (``<cniConfDir>/multus.d/multus.kubeconfig``), holding the service-account token
of that entrypoint's pod. The entrypoint writes it once at start; it re-writes it when the token
rotates only in its watch loop, which runs with ``--multus-conf-file=auto`` and without
``--skip-config-watch`` (k8snetworkplumbingwg/multus-cni v4.3.0 ``cmd/thin_entrypoint/main.go``,
``watchChanges``). gpuaas gives the Network Operator a custom config (:mod:`components.fabric.multus`:
``namespaceIsolation`` needs it), and the operator passes ``--skip-config-watch`` in any case
(Mellanox/network-operator v26.4.1 ``manifests/state-multus-cni/0050-multus-ds.yml``). So the token in
the file is never refreshed: once the API server stops accepting it (a bound token expires — after
an hour where ``--service-account-extend-token-expiration`` is off, after a year where it is on — or
its pod is gone), every pod with a secondary network fails its sandbox set-up.

**Choice.** Not auto mode (it cannot turn on ``namespaceIsolation`` under the operator), not periodic
restarts of the operator's DaemonSet (it is the operator's object), not Multus' thick plugin (the
operator does not deploy it). A small DaemonSet of gpuaas's own runs beside Multus on the same
nodes, with Multus' own ServiceAccount (``multus``, created by the operator with the ClusterRole
Multus needs: ``manifests/state-multus-cni/0010``–``0030``), and every :data:`INTERVAL_SECONDS`
renders the same kubeconfig from its own projected token — which the kubelet rotates — and replaces
the host file atomically when it differs. Multus reads the file on every invocation, so a new token
takes effect at the next CNI call. The thin entrypoint still writes its own at start; whichever
wrote last, the token is valid.

**Host network.** The refresher is ``hostNetwork``: the kubelet sets up no pod network for it, so
its sandbox never waits on a CNI ADD — and every CNI ADD on the node goes through the Multus
whose kubeconfig it writes. A refresher on the pod network could not start (nor roll out a fix)
while that file is broken. It needs no network at all: it reads its projected token from disk.

**The server address** is joined as Go's ``net.JoinHostPort`` joins it (what the thin
entrypoint writes, multus-cni v4.3.0 ``cmd/thin_entrypoint/main.go``: ``KubeConfigHost``):
brackets only around an IPv6 address. Go's ``net/url`` refuses an IPv4 address in brackets
(``https://[10.96.0.1]:443``: "invalid IP-literal") since Go 1.24.8 / 1.25.2, so Multus' client
could not be built from such a file and every pod's sandbox set-up would fail.
(tests/e2e/test_multus_reads_the_api_with_the_refreshed_kubeconfig.py loads the file with
Multus' own client code.)

Rollout: a refresher pod that is replaced leaves, for the seconds until its successor writes, a
token bound to a deleted pod; CNI calls in that window fail and the kubelet retries them.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from components import k8s as kube
from components.fabric.multus import KUBECONFIG_IN_CONF_DIR
from components.k8s import Manifest
from components.model.fabric import Multus
from components.model.network import Network
from components.model.versions import Versions

NAME: Final = "gpuaas-multus-kubeconfig"
#: The ServiceAccount the operator creates for Multus (network-operator v26.4.1
#: manifests/state-multus-cni/0020-service_account.yml), bound to the ``multus`` ClusterRole.
SERVICE_ACCOUNT: Final = "multus"
#: How often the token is compared (seconds); the kubelet rotates projected tokens hourly at most.
INTERVAL_SECONDS: Final = 60
#: Where the host's CNI conf directory is mounted in the refresher.
HOST_CONF_DIR: Final = "/host/cni/net.d"

#: Renders the kubeconfig the thin entrypoint writes (same template: the server joined as
#: ``net.JoinHostPort`` does, the service account's CA inline, its token), and replaces the host
#: file when it differs.
#: Environment: ``SA_DIR`` (default: the projected token's directory), ``KUBECONFIG_FILE``,
#: ``INTERVAL_SECONDS``; ``ONCE=1`` runs one round (tests).
SCRIPT: Final = r"""#!/bin/bash
set -euo pipefail
SA_DIR="${SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}"
OUT="${KUBECONFIG_FILE:?KUBECONFIG_FILE is required}"
INTERVAL="${INTERVAL_SECONDS:-60}"
render() {
  # printf, not a here-document: bash may back one with a file in /tmp, and the root is read-only.
  local ca token host port hostport
  ca="$(base64 -w0 < "$SA_DIR/ca.crt")"
  token="$(cat "$SA_DIR/token")"
  host="${KUBERNETES_SERVICE_HOST:?}"
  port="${KUBERNETES_SERVICE_PORT:?}"
  # As Go's net.JoinHostPort: brackets only around a host with a colon (IPv6). Go's net/url
  # refuses "[10.96.0.1]" (invalid IP-literal), and Multus could not reach the API server.
  case "$host" in
    *:*) hostport="[$host]:$port" ;;
    *) hostport="$host:$port" ;;
  esac
  printf '%s\n' \
    "# Kubeconfig file for Multus CNI plugin (kept fresh by gpuaas-multus-kubeconfig)." \
    "apiVersion: v1" \
    "kind: Config" \
    "clusters:" \
    "- name: local" \
    "  cluster:" \
    "    server: ${KUBERNETES_SERVICE_PROTOCOL:-https}://${hostport}" \
    "    certificate-authority-data: ${ca}" \
    "users:" \
    "- name: multus" \
    "  user:" \
    "    token: \"${token}\"" \
    "contexts:" \
    "- name: multus-context" \
    "  context:" \
    "    cluster: local" \
    "    user: multus" \
    "current-context: multus-context"
}
mkdir -p "$(dirname "$OUT")"
while true; do
  new="$(render)"
  old=""
  if [ -f "$OUT" ]; then old="$(cat "$OUT")"; fi
  if [ "$new" != "$old" ]; then
    tmp="$OUT.gpuaas.$$"
    umask 077
    printf '%s\n' "$new" > "$tmp"
    mv -f "$tmp" "$OUT"
    echo "$(date -u +%FT%TZ) multus kubeconfig written (token or CA changed)"
  fi
  if [ "${ONCE:-0}" = 1 ]; then exit 0; fi
  sleep "$INTERVAL"
done
"""


def script_sha256() -> str:
    return hashlib.sha256(SCRIPT.encode()).hexdigest()


def daemonset(network: Network, versions: Versions, multus: Multus) -> Manifest:
    """The refresher on every node Multus runs on (the policy's node selector and tolerations)."""
    out = f"{HOST_CONF_DIR}/{KUBECONFIG_IN_CONF_DIR}"
    env: list[dict[str, Any]] = [
        {"name": "KUBECONFIG_FILE", "value": out},
        {"name": "INTERVAL_SECONDS", "value": str(INTERVAL_SECONDS)},
    ]
    return kube.node_daemonset(
        network,
        NAME,
        {
            "serviceAccountName": SERVICE_ACCOUNT,
            # No CNI ADD for its sandbox: it must start while Multus' kubeconfig is broken.
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "refresh",
                    "image": f"{versions.node_tools_image}:{versions.node_tools}",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/bash", "-c", SCRIPT],
                    "env": env,
                    # root (the owner of the host's CNI directory and of Multus' 0600
                    # kubeconfig), no capabilities, nothing else writable.
                    "securityContext": {
                        "runAsUser": 0,
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "resources": {
                        "requests": {"cpu": "5m", "memory": "16Mi"},
                        "limits": {"memory": "32Mi"},
                    },
                    "volumeMounts": [{"name": "cni-conf", "mountPath": HOST_CONF_DIR}],
                }
            ],
            "volumes": [{"name": "cni-conf", "hostPath": {"path": multus.cni_conf_dir, "type": "Directory"}}],
        },
        node_selector=network.node_selector,
        max_unavailable=1,
        annotations={"gpuaas.io/script-sha256": script_sha256()},
    )


def refresher(network: Network, versions: Versions, multus: Multus | None) -> Manifest | None:
    """The DaemonSet where gpuaas writes the Multus config (on-prem with ``platform.multus``)."""
    if multus is None:
        return None
    return daemonset(network, versions, multus)
