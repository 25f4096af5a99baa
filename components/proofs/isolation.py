"""Negative proofs: isolation probes, an RDMA write into another partition that must fail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from components.k8s import Manifest
from components.model.capacity import isolation_domains
from components.model.config import StackConfig
from components.model.resources import AKS_POOL_LABEL
from components.proofs import pods
from components.proofs.ib_write_bw import PERFTEST_PORT
from components.proofs.pods import SKIP_AWAIT, network_annotation
from components.proofs.scripts import RDMA_DEVICE_SH
from components.proofs.targets import POOL_NAMESPACE, ProofConfig, Target, every_target, perftest_image, targets

# A P_Key is checked by the receiving port: a packet whose BTH P_Key is not in the port's table is
# dropped and counted as a P_Key violation (InfiniBand Architecture Specification vol. 1, 10.9.3,
# "Partition key matching"). So a reliable-connection write from a QP of partition A to a QP of
# partition B is never acknowledged: the sender's retries run out and the work completion reports
# IBV_WC_RETRY_EXC_ERR, status 12 (libibverbs ``enum ibv_wc_status``), which perftest prints as
# ``Failed status 12: wr_id … syndrom …`` (linux-rdma/perftest src/perftest_resources.c,
# NOTIFY_COMP_ERROR_SEND). The QP numbers and LIDs are exchanged over TCP first (perftest's
# out-of-band exchange, "Data ex. method: Ethernet"), so the client really knows B's address.


@dataclass(frozen=True)
class Probe:
    """One negative probe: ``client`` tries an RDMA write into ``server``'s partition."""

    client: Target
    server: Target
    #: What each side is in, as the rules name it ("P_Key 0x0002", "pool ndh100b").
    client_domain: str
    server_domain: str

    @property
    def id(self) -> str:
        return pods.bounded(f"{self.client.key}-to-{self.server.key}")


#: perftest's completion error for "transport retry counter exceeded" (IBV_WC_RETRY_EXC_ERR = 12).
PARTITION_ERROR: Final = "Failed status 12:"
#: Small and short: the probe proves reachability, not bandwidth.
_PROBE_ARGS = f'-d "$dev" -F --report_gbits -s 65536 -n 100 -p {PERFTEST_PORT}'
#: Seconds a probe Job may run (the server waits for its client's image pull and scheduling).
PROBE_DEADLINE_SECONDS: Final = 1200


def _default_servers(
    client: Target, domains: dict[str, str], everyone: dict[str, Target], no_rdma: set[str]
) -> list[str]:
    """Every key of the same kind as ``client`` (teams, or AKS pools) in another partition whose quota
    admits the server pod (one RDMA device), by name.

    Every one, not one chosen among them: a pair is kept or dropped by its two ends alone, so adding,
    removing or reordering a team adds or removes only the probes that involve it. Choosing one
    server per client (the next partition by name) could not: a team inserted between ``llm`` and
    ``vision`` turned ``llm→vision`` into ``llm→speech``, and every such re-pairing deletes and
    recreates three objects in two namespaces (a one-team change became an 882-line plan diff). The
    cost is one probe per verifying target and other partition: ``verify`` is opt-in, and on-prem the
    partitions are bounded by the VFs per HCA.
    """
    pool_kind = client.namespace == POOL_NAMESPACE
    return sorted(
        k
        for k, t in everyone.items()
        if (t.namespace == POOL_NAMESPACE) == pool_kind
        and k not in no_rdma
        and domains.get(k) != domains.get(client.key)
    )


def isolation_probes(cfg: StackConfig) -> list[Probe]:
    """The configured probes (``verification.isolationPairs``), or by default from every verifying
    target into every other partition (:func:`_default_servers`). Pairs the rules refuse are left out here."""
    domains = isolation_domains(cfg)
    everyone = every_target(cfg)
    pairs = cfg.verification.isolation_pairs
    if pairs is None:
        no_rdma = {t.name for t in cfg.teams if t.quota.rdma < 1}
        keys = [(t.key, server) for t in targets(cfg) for server in _default_servers(t, domains, everyone, no_rdma)]
    else:
        keys = [(p.client, p.server) for p in pairs]
    out: list[Probe] = []
    for client, server in dict.fromkeys(keys):
        if client in everyone and server in everyone and domains[client] != domains[server]:
            out.append(Probe(everyone[client], everyone[server], domains[client], domains[server]))
    return out


_PKEY_SH = r"""pkey="$(cat "${SYSFS:-/sys}/class/infiniband/$dev/ports/1/pkeys/0" 2>/dev/null || echo unknown)"
"""

ISOLATION_SERVER_SH: Final = f"""#!/bin/bash
# Isolation probe, server side: waits on this partition's device for a client from another partition.
set -uo pipefail
{RDMA_DEVICE_SH}
dev="$(rdma_device)" || exit 1
{_PKEY_SH}echo "isolation probe server on $dev (P_Key $pkey, $(hostname)), for $ISO_CLIENT"
timeout "${{ISO_SERVER_SECONDS:-1100}}" ib_write_bw {_PROBE_ARGS} >/tmp/server.log 2>&1
rc=$?
cat /tmp/server.log
completed=false
[ "$rc" = 0 ] && completed=true   # a finished test: the client's writes arrived
printf 'ISOLATION_SERVER {{"device": "%s", "pkey": "%s", "rc": %d, "completed": %s}}\\n' \\
  "$dev" "$pkey" "$rc" "$completed"
if [ "$completed" = true ]; then
  echo "ISOLATION BROKEN: RDMA writes from $ISO_CLIENT arrived in this partition" >&2
  exit 1
fi
"""

ISOLATION_CLIENT_SH: Final = f"""#!/bin/bash
# Isolation probe, client side: an RDMA write into another partition that must fail with the
# partition's error (see components/proofs/isolation.py). Exit 0 only when it did.
set -uo pipefail
{RDMA_DEVICE_SH}
dev="$(rdma_device)" || exit 1
{_PKEY_SH}echo "isolation probe: $ISO_CLIENT on $dev (P_Key $pkey) -> $ISO_TARGET at $ISO_SERVER"
echo "the RDMA write must NOT get through"
verdict=inconclusive
reason="the server never answered over the pod network"
rc=-1
for attempt in $(seq 1 "${{ISO_ATTEMPTS:-120}}"); do
  timeout "${{ISO_CLIENT_SECONDS:-120}}" ib_write_bw {_PROBE_ARGS} "$ISO_SERVER" >/tmp/probe.log 2>&1
  rc=$?
  # perftest prints a number row under its "BW average" header only after the writes completed.
  if [ "$rc" = 0 ] || awk '/BW average/ {{ getline; if ($1 ~ /^[0-9]+$/) found = 1 }} END {{ exit !found }}' \\
      /tmp/probe.log; then
    verdict=leak
    reason="RDMA writes completed: bytes crossed from $ISO_CLIENT into $ISO_TARGET"
    break
  fi
  if grep -q "remote address:" /tmp/probe.log; then  # the QPs were exchanged: the write was tried
    if line="$(grep -m1 -F "{PARTITION_ERROR}" /tmp/probe.log)"; then
      verdict=blocked
      reason="$line (IBV_WC_RETRY_EXC_ERR: no acknowledgement from the other partition)"
    else
      verdict=inconclusive
      other="$(grep -m1 -iE 'error|fail|unable' /tmp/probe.log || tail -n 1 /tmp/probe.log)"
      reason="the write failed, but not with the partition error: $other"
    fi
    break
  fi
  echo "attempt $attempt: no QP exchange with $ISO_SERVER yet"; tail -n 3 /tmp/probe.log; sleep 5
done
cat /tmp/probe.log
reason="$(printf '%s' "$reason" | tr -d '"\\\\' | tr -s '[:space:]' ' ' | sed 's/^ //; s/ $//')"
passed=false
[ "$verdict" = blocked ] && passed=true
[ "$verdict" = leak ] && echo "ISOLATION BROKEN: $reason" >&2
echo "isolation probe verdict: $verdict ($reason)"
printf 'ISOLATION_RESULT {{"client": "%s", "server": "%s", "device": "%s", "pkey": "%s", "rc": %d, ' \\
  "$ISO_CLIENT" "$ISO_TARGET" "$dev" "$pkey" "$rc"
printf '"verdict": "%s", "reason": "%s", "passed": %s}}\\n' "$verdict" "$reason" "$passed"
[ "$passed" = true ]
"""


def _probe_names(p: Probe) -> dict[str, str]:
    """metadata.name of the probe's objects: the client Job in the client's namespace, the server Job and
    its Service in the server's. Named by the pair, so two probes never share an object."""
    return {
        "client": pods.bounded(f"isolation-{p.id}"),
        "server": pods.bounded(f"isolation-{p.id}-server"),
    }


def _probe_labels(p: Probe, t: Target, role: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gpuaas-verify",
        "app.kubernetes.io/part-of": "gpuaas",
        "app.kubernetes.io/component": f"isolation-{role}",
        "gpuaas.io/verify-target": t.key,
        "gpuaas.io/isolation-probe": p.id,
        "gpuaas.io/isolation-role": role,
    }


def _probe_job(cfg: ProofConfig, p: Probe, role: str) -> Manifest:
    t = p.client if role == "client" else p.server
    names = _probe_names(p)
    env = [{"name": "ISO_CLIENT", "value": p.client.key}, {"name": "ISO_TARGET", "value": p.server.key}]
    if role == "client":
        env.append({"name": "ISO_SERVER", "value": f"{names['server']}.{p.server.namespace}.svc"})
    if t.vf_env:
        env.insert(0, {"name": "VF_ENV", "value": t.vf_env})
    # The two ends on two nodes: the write crosses the fabric's switches, as team traffic would.
    apart = {
        "topologyKey": "kubernetes.io/hostname",
        "namespaces": sorted({p.client.namespace, p.server.namespace}),
        "labelSelector": {"matchLabels": {"gpuaas.io/isolation-probe": p.id}},
    }
    affinity: dict[str, Any] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}
    if t.pool is not None:
        affinity["nodeAffinity"] = pods.node_affinity(AKS_POOL_LABEL, t.pool)
    resources = {"cpu": "1", "memory": "1Gi", t.rdma_resource: "1"}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": affinity,
        "containers": [
            {
                "name": f"isolation-{role}",
                "image": perftest_image(cfg),
                "command": ["/bin/bash", "-c", ISOLATION_CLIENT_SH if role == "client" else ISOLATION_SERVER_SH],
                "env": env,
                "resources": {"requests": dict(resources), "limits": dict(resources)},
                "securityContext": pods.security_context(),
            }
        ],
    }
    if t.tolerations:
        pod["tolerations"] = [dict(x) for x in t.tolerations]
    labels = _probe_labels(p, t, role)
    meta = {
        "name": names[role],
        "namespace": t.namespace,
        # Each end through its own team's queue (the server's is B's, in B's namespace).
        "labels": labels | pods.queue_label(t),
        "annotations": {SKIP_AWAIT: "true"},
    }
    spec = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": PROBE_DEADLINE_SECONDS,
        "template": {"metadata": {"labels": labels, "annotations": network_annotation(t)}, "spec": pod},
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _probe_service(p: Probe) -> Manifest:
    """The server's address on the pod network: the client learns B's QP and LID through it."""
    t = p.server
    labels = _probe_labels(p, t, "server")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": _probe_names(p)["server"], "namespace": t.namespace, "labels": labels},
        "spec": {
            "selector": {"gpuaas.io/isolation-probe": p.id, "gpuaas.io/isolation-role": "server"},
            "ports": [{"name": "perftest", "port": PERFTEST_PORT, "targetPort": PERFTEST_PORT, "protocol": "TCP"}],
            "publishNotReadyAddresses": True,
        },
    }


def probe_manifests(cfg: ProofConfig, p: Probe) -> dict[str, Manifest]:
    """One probe's objects by role, in apply order."""
    return {
        "service": _probe_service(p),
        "server": _probe_job(cfg, p, "server"),
        "client": _probe_job(cfg, p, "client"),
    }


def probe_job_names(p: Probe) -> dict[str, str]:
    """``namespace/name`` of the probe's two Jobs (what a results gatherer reads)."""
    names = _probe_names(p)
    return {"client": f"{p.client.namespace}/{names['client']}", "server": f"{p.server.namespace}/{names['server']}"}
