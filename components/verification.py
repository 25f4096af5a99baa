"""Verification workloads: the proofs that a team's partition carries RDMA and GPUDirect traffic.

Per team with ``verify: true`` (and, when ``verification.aksPools``, per AKS GPU pool) in the
team's namespace, so that its quota, admission policy and Pod Security level apply to them:

- **ib_write_bw** (perftest): a server Job and a Service, and a client Job that reaches the
  server over the pod network for perftest's out-of-band exchange; the data then moves over
  the InfiniBand device the pod was given. The client fails (exit 1) when the ``BW average``
  of ``--report_gbits`` is below ``verification.ibWriteBwMinFraction`` × the link rate.
- **NCCL all_reduce**: an Indexed Job of two pods on two nodes (one GPU each) with a headless
  Service for the rendezvous, running ``workloads/allreduce_bench.py`` (from a ConfigMap)
  three times: GPUDirect RDMA, RDMA through host memory, TCP. It fails when the GPUDirect run's
  busbw is below ``verification.ncclGdrMinFraction`` × the link rate or when NCCL logged no
  ``GDRDMA`` channel (domain.md §4.3).

Which RDMA device a pod has: on-prem the SR-IOV device plugin injects the VF's PCI address as
``PCIDEVICE_<RESOURCE>`` (resource name upper-cased, ``.``/``/``/``-`` as ``_``:
k8snetworkplumbingwg/sriov-network-device-plugin, pkg/resources/server.go ``getEnvs``) and the
VF's RDMA device is the one entry of ``/sys/bus/pci/devices/<bdf>/infiniband/``. On AKS the RDMA
shared device plugin hands the pod every HCA of the node, and the first ACTIVE InfiniBand port
is taken (NCCL picks the GPU's nearest HCA by itself).

Containers stay within Pod Security ``baseline``: no privileged mode, no added capabilities
(``IPC_LOCK`` included: the locked-memory limit is raised host-side by ib-node-config), no
host namespaces or host paths.

The Jobs are not awaited by Pulumi (``pulumi.com/skipAwait``): a proof that waits for two free
GPU nodes must not hold or fail ``pulumi up``. Read the outcome with ``workloads/gather_results.py``.
A Job is immutable, so it runs again when its pod template changes (the scripts' hash is an
annotation of it); to run it again unchanged, ``pulumi up --replace <urn of the Job>``.

Pure renderers here return manifests; :class:`Verification` only registers them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import pulumi

from components import dra
from components import k8s as kube
from components.catalog import ND_SKUS
from components.config import AksPartition, GpuPool, OnPremPartition, StackConfig, Team
from components.k8s import Manifest
from components.queue_admission import QUEUE_LABEL
from components.queues import local_queue_name
from components.resources import AKS_POOL_LABEL, GPU, NODE_GROUP_LABEL, rdma_shared_resource, sriov_resource
from components.rules import isolation_domains
from components.teams import proof_network

ROOT = Path(__file__).resolve().parent.parent
BENCH_SCRIPT: Final = ROOT / "workloads" / "allreduce_bench.py"

#: Namespace of the per-pool proofs (AKS, ``verification.aksPools``): pools have no team namespace.
POOL_NAMESPACE: Final = "gpuaas-verify"
#: perftest's default out-of-band TCP port (perftest README, ``-p``).
PERFTEST_PORT: Final = 18515
#: torch.distributed rendezvous ports, one per NCCL run so that no run waits on a closing socket.
RENDEZVOUS_PORT: Final = 29500
#: ib_write_bw message size and count: 8 MiB × 5000 ≈ 42 GB, about a second at NDR, well past
#: the size at which perftest reaches line rate (domain.md §4.1 measured NDR at 32 MiB messages).
IB_MESSAGE_BYTES: Final = 8 * 1024 * 1024
IB_ITERATIONS: Final = 5000
#: Where the scripts ConfigMap is mounted.
SCRIPTS_DIR: Final = "/opt/gpuaas"
#: Multus' secondary-interface name for the team network (domain: NCCL_SOCKET_IFNAME on-prem).
SECONDARY_IFNAME: Final = "net1"
#: Seconds a proof may take end to end (image pull and the three NCCL runs included).
DEADLINE_SECONDS: Final = 1800
#: Largest size of the TCP comparison run (all_reduce only).
TCP_MAX_BYTES: Final = 256 * 1024 * 1024
MULTUS_NETWORKS: Final = "k8s.v1.cni.cncf.io/networks"
SKIP_AWAIT: Final = "pulumi.com/skipAwait"

#: The three NCCL runs: label, extra environment, whether it is the one judged.
#: NCCL_NET_GDR_LEVEL=SYS lets the NIC read/write GPU memory at any PCI distance; LOC never
#: (RDMA through host memory); NCCL_IB_DISABLE=1 falls back to sockets (NCCL env docs; domain.md §4.3).
NCCL_RUNS: Final[tuple[tuple[str, dict[str, str]], ...]] = (
    ("gdr", {"NCCL_NET_GDR_LEVEL": "SYS", "NCCL_NET_GDR_READ": "1"}),
    ("rdma", {"NCCL_NET_GDR_LEVEL": "LOC"}),
    ("tcp", {"NCCL_IB_DISABLE": "1"}),
)


def pcidevice_env(resource: str) -> str:
    """The variable the SR-IOV device plugin sets to the allocated PCI addresses of ``resource``."""
    return "PCIDEVICE_" + resource.upper().replace(".", "_").replace("/", "_").replace("-", "_")


def socket_ifname(cfg: StackConfig) -> str:
    """NCCL's socket interface (bootstrap and the TCP run): the team network where it has addresses.

    With ``fabric.ipam: nv-ipam`` every pod gets an address on ``net1``. With ``static`` a pod's
    address comes from ``ips`` in its own network annotation (:func:`components.teams.ipam`), and the
    two pods of an Indexed Job share one template, so ``net1`` has no IPv4 address there and NCCL's
    sockets use the pod network; the RDMA data path is the partition's VF either way.
    """
    onprem = cfg.onprem
    if onprem is not None and onprem.fabric.ipam == "nv-ipam":
        return SECONDARY_IFNAME
    return "eth0"


def gbits_to_gbytes(gbps: float) -> float:
    """Gb/s (line rates, perftest's ``--report_gbits``) to GB/s (nccl-tests' busbw)."""
    return gbps / 8


def perftest_image(cfg: StackConfig) -> str:
    """``image@sha256:…`` where a digest pins it (with the tag kept for readers, ``image:tag@sha256:…``),
    else ``image:tag``. The rules refuse a config with neither."""
    v = cfg.versions
    ref = v.perftest_image + (f":{v.perftest}" if v.perftest else "")
    return ref + (f"@{v.perftest_digest}" if v.perftest_digest else "")


def pytorch_image(cfg: StackConfig) -> str:
    return f"{cfg.versions.pytorch_image}:{cfg.versions.pytorch}"


@dataclass(frozen=True)
class Target:
    """Where one set of proofs runs and what it must reach. Built by :func:`targets`."""

    #: Segment of the Pulumi child names: the team name, or ``pool-<pool>``.
    key: str
    namespace: str
    #: Prefix of every object's metadata.name in ``namespace``.
    prefix: str
    link_rate_gbps: int
    #: The extended resource that hands the pod its RDMA device.
    rdma_resource: str
    #: NetworkAttachmentDefinition to attach as ``net1`` (on-prem), else None.
    network: str | None
    socket_ifname: str
    #: On AKS: the pool's node selector label value and its tolerations.
    pool: str | None = None
    tolerations: tuple[dict[str, str], ...] = field(default_factory=tuple)
    #: The team's Kueue LocalQueue with elastic quotas (its GPU Jobs must name it), else None.
    queue: str | None = None

    @property
    def vf_env(self) -> str | None:
        return pcidevice_env(self.rdma_resource) if self.network is not None else None


def _pool_target(cfg: StackConfig, key: str, namespace: str, prefix: str, pool: GpuPool) -> Target:
    sku = ND_SKUS.get(pool.vm_size)
    return Target(
        key=key,
        namespace=namespace,
        prefix=prefix,
        link_rate_gbps=sku.ib_gbps_per_gpu if sku else 0,
        rdma_resource=rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name),
        network=None,
        socket_ifname="eth0",
        pool=pool.name,
        tolerations=tuple(kube.taint_toleration(t) for t in pool.taints),
    )


def team_target(cfg: StackConfig, team: Team) -> Target | None:
    """Where a team's proofs (and the probes into its partition) run; ``None`` without a usable partition."""
    target = _team_target(cfg, team)
    if target is not None and cfg.queues.elastic:
        return replace(target, queue=local_queue_name(team))
    return target


def _team_target(cfg: StackConfig, team: Team) -> Target | None:
    onprem, aks = cfg.onprem, cfg.aks
    if onprem is not None and isinstance(team.partition, OnPremPartition):
        return Target(
            key=team.name,
            namespace=team.ns,
            prefix="verify",
            link_rate_gbps=onprem.fabric.link_rate_gbps,
            rdma_resource=sriov_resource(team.partition.pkey),
            network=proof_network(cfg, team),
            socket_ifname=socket_ifname(cfg),
        )
    if aks is not None and isinstance(team.partition, AksPartition):
        pool = aks.pools_by_name.get(team.partition.node_pool)
        if pool is not None:  # an unknown pool is a config error reported by the rules
            return _pool_target(cfg, team.name, team.ns, "verify", pool)
    return None


def _pool_targets(cfg: StackConfig) -> list[Target]:
    aks = cfg.aks
    if aks is None or not cfg.verification.aks_pools:
        return []
    return [_pool_target(cfg, f"pool-{p.name}", POOL_NAMESPACE, f"verify-{p.name}", p) for p in aks.gpu_pools]


def targets(cfg: StackConfig) -> list[Target]:
    """Every place proofs run, in config order: verify teams first, then AKS pools."""
    out = [t for team in cfg.teams if team.verify and (t := team_target(cfg, team)) is not None]
    return out + _pool_targets(cfg)


def every_target(cfg: StackConfig) -> dict[str, Target]:
    """Every team with a partition (verified or not: a probe's server may be in any) and the pool targets."""
    out = {t.key: t for team in cfg.teams if (t := team_target(cfg, team)) is not None}
    out |= {t.key: t for t in _pool_targets(cfg)}
    return out


def ib_min_gbps(cfg: StackConfig, t: Target) -> float:
    """ib_write_bw pass mark in Gb/s."""
    return round(cfg.verification.ib_write_bw_min_fraction * t.link_rate_gbps, 3)


def nccl_min_busbw_gbytes(cfg: StackConfig, t: Target) -> float:
    """NCCL GPUDirect busbw pass mark in GB/s (one GPU and one NIC port per pod)."""
    return round(cfg.verification.nccl_gdr_min_fraction * gbits_to_gbytes(t.link_rate_gbps), 3)


# --------------------------------------------------------------------------------------------
# Scripts


#: Sourced by every script: prints the pod's RDMA device name. ``SYSFS`` only exists for tests.
RDMA_DEVICE_SH: Final = r"""# Prints the RDMA device this pod was given (see components/verification.py).
rdma_device() {
  sys="${SYSFS:-/sys}"
  if [ -n "${VF_ENV:-}" ]; then
    # SR-IOV device plugin: PCIDEVICE_<RESOURCE>=<bdf>[,<bdf>...]; the VF's RDMA device sits under it.
    bdf="$(printenv "$VF_ENV" | cut -d, -f1)"
    if [ -z "$bdf" ]; then
      echo "rdma_device: $VF_ENV is not set: the pod did not get the partition's SR-IOV resource" >&2
      return 1
    fi
    for d in "$sys/bus/pci/devices/$bdf/infiniband/"*; do
      [ -e "$d" ] && { basename "$d"; return 0; }
    done
    echo "rdma_device: VF $bdf has no RDMA device under $sys/bus/pci/devices/$bdf/infiniband" >&2
    return 1
  fi
  # RDMA shared device plugin: every HCA of the node; take the first ACTIVE InfiniBand port.
  for d in "$sys/class/infiniband/"*; do
    [ "$(cat "$d/ports/1/link_layer" 2>/dev/null)" = "InfiniBand" ] || continue
    case "$(cat "$d/ports/1/state" 2>/dev/null)" in *ACTIVE*) basename "$d"; return 0 ;; esac
  done
  echo "rdma_device: no ACTIVE InfiniBand port under $sys/class/infiniband" >&2
  return 1
}
"""

_PERFTEST_ARGS = f'-d "$dev" -F --report_gbits -s {IB_MESSAGE_BYTES} -n {IB_ITERATIONS} -p {PERFTEST_PORT}'

IB_SERVER_SH: Final = f"""#!/bin/bash
# ib_write_bw server: waits for one client, runs the test, exits.
set -euo pipefail
. {SCRIPTS_DIR}/rdma-device.sh
dev="$(rdma_device)"
echo "ib_write_bw server on $dev ($(hostname))"
exec ib_write_bw {_PERFTEST_ARGS}
"""

IB_CLIENT_SH: Final = f"""#!/bin/bash
# ib_write_bw client: retries until the server answers, then judges the BW average.
set -uo pipefail
. {SCRIPTS_DIR}/rdma-device.sh
dev="$(rdma_device)" || exit 1
echo "ib_write_bw client on $dev ($(hostname)) -> $IB_SERVER, pass mark $IB_MIN_GBPS Gb/s"
ok=0
for attempt in $(seq 1 "${{IB_ATTEMPTS:-120}}"); do
  if ib_write_bw {_PERFTEST_ARGS} "$IB_SERVER" >/tmp/ib_write_bw.log 2>&1; then ok=1; break; fi
  echo "attempt $attempt: server not ready"; tail -n 3 /tmp/ib_write_bw.log; sleep 5
done
cat /tmp/ib_write_bw.log
# perftest prints the column header, then one line: #bytes #iterations peak average msgrate.
bw="$(awk '/BW average/ {{ getline; print $4; exit }}' /tmp/ib_write_bw.log)"
if [ "$ok" = 1 ] && [ -n "$bw" ] && awk -v bw="$bw" -v min="$IB_MIN_GBPS" 'BEGIN {{ exit !(bw + 0 >= min + 0) }}'; then
  passed=true
else
  passed=false
fi
printf 'IB_WRITE_BW_RESULT {{"device": "%s", "bw_average_gbps": %s, "min_gbps": %s, "passed": %s}}\\n' \\
  "$dev" "${{bw:-null}}" "$IB_MIN_GBPS" "$passed"
[ "$passed" = true ]
"""


def nccl_sh() -> str:
    """The NCCL pod's script: the three runs in order, each rank in step with the other pod's."""
    runs = []
    for i, (label, env) in enumerate(NCCL_RUNS):
        assigns = " ".join(f"{k}={v}" for k, v in env.items())
        judged = ' --min-busbw-gbps "$MIN_BUSBW_GBPS" --require-gdrdma' if label == "gdr" else ""
        # Sockets run at a few GB/s: all_reduce to 256 MiB says what TCP gives without minutes of 1 GiB calls.
        limited = f" --ops all_reduce --max-bytes {TCP_MAX_BYTES}" if label == "tcp" else ""
        runs.append(f"run {label} {RENDEZVOUS_PORT + i} {assigns} -- --nccl-log '/tmp/nccl-{label}.*'{judged}{limited}")
    body = "\n".join(runs)
    return f"""#!/bin/bash
# NCCL all_reduce proof: GPUDirect RDMA (judged), RDMA via host memory, TCP (for comparison).
set -uo pipefail
. {SCRIPTS_DIR}/rdma-device.sh
if [ -n "${{VF_ENV:-}}" ]; then
  dev="$(rdma_device)" || exit 1
  export NCCL_IB_HCA="=$dev"   # the partition's VF, nothing else
fi
echo "rank ${{JOB_COMPLETION_INDEX}} on $(hostname), NCCL_IB_HCA=${{NCCL_IB_HCA:-auto}}"
status=0
run() {{  # run LABEL PORT [VAR=value ...] -- [bench args ...]
  label="$1"; port="$2"; shift 2
  vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env "${{vars[@]}}" MASTER_PORT="$port" NCCL_DEBUG_FILE="/tmp/nccl-$label.%h.%p.log" \\
    python3 {SCRIPTS_DIR}/allreduce_bench.py --backend nccl --label "$label" "$@"
  rc=$?
  cat /tmp/nccl-"$label".*.log 2>/dev/null || true   # the evidence: NET/IB, GDRDMA, versions
  echo "VERIFY_RUN {{\\"label\\": \\"$label\\", \\"rc\\": $rc}}"
  [ "$rc" = 0 ] || status=1
}}
{body}
exit "$status"
"""


def scripts(bench_source: str) -> dict[str, str]:
    """ConfigMap data: the benchmark and the shell around it."""
    return {
        "allreduce_bench.py": bench_source,
        "rdma-device.sh": RDMA_DEVICE_SH,
        "ib-server.sh": IB_SERVER_SH,
        "ib-client.sh": IB_CLIENT_SH,
        "nccl.sh": nccl_sh(),
    }


def scripts_hash(bench_source: str) -> str:
    data = scripts(bench_source)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Manifests


def _name(t: Target, role: str) -> str:
    return f"{t.prefix}-{role}"


def _labels(t: Target, role: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gpuaas-verify",
        "app.kubernetes.io/part-of": "gpuaas",
        "app.kubernetes.io/component": role,
        "gpuaas.io/verify-target": t.key,
    }


def _meta(t: Target, role: str, name: str | None = None) -> dict[str, Any]:
    return {"name": name or _name(t, role), "namespace": t.namespace, "labels": _labels(t, role)}


def scripts_config_map(t: Target, bench_source: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(t, "scripts"), "data": scripts(bench_source)}


def pool_namespace() -> Manifest:
    """The namespace of the per-pool proofs, at Pod Security ``baseline`` like team namespaces."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": POOL_NAMESPACE,
            "labels": {
                "app.kubernetes.io/part-of": "gpuaas",
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/warn": "baseline",
            },
        },
    }


def _affinity(t: Target, role: str, avoid: str) -> dict[str, Any]:
    """Pods of one pair on two nodes (required); away from the other proof's pods (preferred), so that
    ib_write_bw and NCCL do not share an HCA while they measure it."""
    term: dict[str, Any] = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {
            "matchLabels": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": role},
        },
    }
    other = {
        "weight": 100,
        "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": avoid}},
        },
    }
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term],
            "preferredDuringSchedulingIgnoredDuringExecution": [other],
        }
    }
    if t.pool is not None:
        affinity["nodeAffinity"] = _node_affinity(AKS_POOL_LABEL, t.pool)
    return affinity


def _node_affinity(label: str, value: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def _security_context() -> dict[str, Any]:
    """Within Pod Security baseline: nothing added, nothing privileged, escalation off."""
    return {"privileged": False, "allowPrivilegeEscalation": False}


def network_annotation(t: Target) -> dict[str, str]:
    """The Multus annotation that attaches the target's partition network as ``net1``; ``{}`` without one.

    Every proof pod (positive, negative probe, burn-in) takes its network from here and nowhere else,
    so a change of how pods ask for the team network (IPAM, ``ips``) is made once.
    """
    if t.network is None:
        return {}
    nets = [{"name": t.network, "namespace": t.namespace, "interface": SECONDARY_IFNAME}]
    return {MULTUS_NETWORKS: json.dumps(nets, separators=(",", ":"))}


def _pod_annotations(t: Target, digest: str) -> dict[str, str]:
    return {"gpuaas.io/scripts-sha256": digest, **network_annotation(t)}


def _pod_spec(
    t: Target,
    *,
    pair: str,
    avoid: str,
    image: str,
    script: str,
    env: list[dict[str, str]],
    resources: dict[str, str],
    cpu: str,
    memory: str,
    subdomain: str | None = None,
) -> dict[str, Any]:
    common_env = [{"name": "VF_ENV", "value": t.vf_env}] if t.vf_env else []
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": _affinity(t, pair, avoid),
        "containers": [
            {
                "name": pair,
                "image": image,
                "command": ["/bin/bash", f"{SCRIPTS_DIR}/{script}"],
                "env": common_env + env,
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory, **resources},
                    "limits": {"cpu": cpu, "memory": memory, **resources},
                },
                "securityContext": _security_context(),
                "volumeMounts": [
                    {"name": "scripts", "mountPath": SCRIPTS_DIR, "readOnly": True},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "scripts", "configMap": {"name": _name(t, "scripts"), "defaultMode": 0o555}},
            # NCCL keeps its proxy buffers in /dev/shm; the runtime's 64 MiB default is too small.
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        ],
    }
    if t.tolerations:
        spec["tolerations"] = [dict(x) for x in t.tolerations]
    if subdomain is not None:
        spec["subdomain"] = subdomain
    return spec


def _job(t: Target, role: str, pod: dict[str, Any], pair: str, digest: str, indexed: int | None = None) -> Manifest:
    labels = {**_labels(t, role), "gpuaas.io/verify-pair": pair}
    spec: dict[str, Any] = {
        # A retried rank would wait for a partner that is gone: one attempt, then read the logs.
        "backoffLimit": 0,
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "template": {"metadata": {"labels": labels, "annotations": _pod_annotations(t, digest)}, "spec": pod},
    }
    if indexed is not None:
        spec |= {"completionMode": "Indexed", "completions": indexed, "parallelism": indexed}
    meta = _meta(t, role)
    meta["annotations"] = {SKIP_AWAIT: "true"}
    meta["labels"] |= _queue_label(t)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _queue_label(t: Target) -> dict[str, str]:
    """Elastic quotas: the team's queue, which Kueue admits the Job through (components/queue_admission.py)."""
    return {QUEUE_LABEL: t.queue} if t.queue is not None else {}


def ib_server_job(cfg: StackConfig, t: Target, digest: str) -> Manifest:
    pod = _pod_spec(
        t,
        pair="ib",
        avoid="nccl",
        image=perftest_image(cfg),
        script="ib-server.sh",
        env=[],
        resources={t.rdma_resource: "1"},
        cpu="2",
        memory="4Gi",
    )
    job = _job(t, "ib-server", pod, "ib", digest)
    job["spec"]["template"]["metadata"]["labels"]["gpuaas.io/verify-ib"] = "server"
    return job


def ib_service(t: Target) -> Manifest:
    """ClusterIP Service in front of the ib_write_bw server: perftest's TCP exchange of QP numbers."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(t, "ib-server"),
        "spec": {
            "selector": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-ib": "server"},
            "ports": [{"name": "perftest", "port": PERFTEST_PORT, "targetPort": PERFTEST_PORT, "protocol": "TCP"}],
            "publishNotReadyAddresses": True,
        },
    }


def ib_client_job(cfg: StackConfig, t: Target, digest: str) -> Manifest:
    env = [
        {"name": "IB_SERVER", "value": _name(t, "ib-server")},
        {"name": "IB_MIN_GBPS", "value": f"{ib_min_gbps(cfg, t):g}"},
    ]
    pod = _pod_spec(
        t,
        pair="ib",
        avoid="nccl",
        image=perftest_image(cfg),
        script="ib-client.sh",
        env=env,
        resources={t.rdma_resource: "1"},
        cpu="2",
        memory="4Gi",
    )
    return _job(t, "ib-client", pod, "ib", digest)


def nccl_service(t: Target) -> Manifest:
    """Headless Service: gives the Indexed Job's pods DNS names ``<job>-<index>.<service>``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(t, "nccl"),
        "spec": {
            "clusterIP": "None",
            "selector": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": "nccl"},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
            # Rank 1 resolves rank 0 before either is Ready.
            "publishNotReadyAddresses": True,
        },
    }


def nccl_job(cfg: StackConfig, t: Target, digest: str) -> Manifest:
    name = _name(t, "nccl")
    env = [
        {"name": "WORLD_SIZE", "value": "2"},
        # Indexed Job pods are named <job>-<index> in the headless Service's subdomain (Kubernetes docs,
        # "Job with Pod-to-Pod Communication"); allreduce_bench.py takes JOB_COMPLETION_INDEX as RANK.
        {"name": "MASTER_ADDR", "value": f"{name}-0.{name}"},
        {"name": "MIN_BUSBW_GBPS", "value": f"{nccl_min_busbw_gbytes(cfg, t):g}"},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"},
        {"name": "NCCL_SOCKET_IFNAME", "value": t.socket_ifname},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    pod = _pod_spec(
        t,
        pair="nccl",
        avoid="ib",
        image=pytorch_image(cfg),
        script="nccl.sh",
        env=env,
        resources={GPU: "1", t.rdma_resource: "1"},
        cpu="8",
        memory="32Gi",
        subdomain=name,
    )
    if dra.uses_dra(cfg):
        pod = dra.gpus_as_claims(pod)  # the GPU through the team's gpuaas-gpu claim template
    return _job(t, "nccl", pod, "nccl", digest, indexed=2)


def manifests(cfg: StackConfig, t: Target, bench_source: str) -> dict[str, Manifest]:
    """One target's objects by role, in apply order (the role is the child name's last segment)."""
    digest = scripts_hash(bench_source)
    return {
        "scripts": scripts_config_map(t, bench_source),
        "ib-service": ib_service(t),
        "ib-server": ib_server_job(cfg, t, digest),
        "ib-client": ib_client_job(cfg, t, digest),
        "nccl-service": nccl_service(t),
        "nccl": nccl_job(cfg, t, digest),
    }


def job_names(t: Target) -> dict[str, str]:
    """The Jobs a results gatherer reads: check → metadata.name."""
    return {"ib_write_bw": _name(t, "ib-client"), "nccl": _name(t, "nccl")}


# --------------------------------------------------------------------------------------------
# Negative proofs: isolation probes
#
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
        return _bounded(f"{self.client.key}-to-{self.server.key}")


#: perftest's completion error for "transport retry counter exceeded" (IBV_WC_RETRY_EXC_ERR = 12).
PARTITION_ERROR: Final = "Failed status 12:"
#: Small and short: the probe proves reachability, not bandwidth.
_PROBE_ARGS = f'-d "$dev" -F --report_gbits -s 65536 -n 100 -p {PERFTEST_PORT}'
#: Seconds a probe Job may run (the server waits for its client's image pull and scheduling).
PROBE_DEADLINE_SECONDS: Final = 1200


def _bounded(name: str, limit: int = 63) -> str:
    """``name`` as a DNS label / label value of at most ``limit`` characters, shortened with a hash."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def _default_server(
    client: Target, domains: dict[str, str], everyone: dict[str, Target], no_rdma: set[str]
) -> str | None:
    """The next key by name after ``client`` (wrapping) of the same kind, in another partition, whose
    quota admits the server pod (one RDMA device).

    By name, not by config order, so that reordering teams never moves a probe.
    """
    pool_kind = client.namespace == POOL_NAMESPACE
    keys = sorted(k for k, t in everyone.items() if (t.namespace == POOL_NAMESPACE) == pool_kind and k not in no_rdma)
    later = [k for k in keys if k > client.key] + [k for k in keys if k < client.key]
    return next((k for k in later if domains.get(k) != domains.get(client.key)), None)


def isolation_probes(cfg: StackConfig) -> list[Probe]:
    """The configured probes (``verification.isolationPairs``), or by default one per target: against
    the next other partition by name. Pairs the rules refuse are left out here."""
    domains = isolation_domains(cfg)
    everyone = every_target(cfg)
    pairs = cfg.verification.isolation_pairs
    if pairs is None:
        keys = []
        no_rdma = {t.name for t in cfg.teams if t.quota.rdma < 1}
        for t in targets(cfg):
            server = _default_server(t, domains, everyone, no_rdma)
            if server is not None:
                keys.append((t.key, server))
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
# partition's error (see components/verification.py). Exit 0 only when it did.
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
        "client": _bounded(f"isolation-{p.id}"),
        "server": _bounded(f"isolation-{p.id}-server"),
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


def _probe_job(cfg: StackConfig, p: Probe, role: str) -> Manifest:
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
        affinity["nodeAffinity"] = _node_affinity(AKS_POOL_LABEL, t.pool)
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
                "securityContext": _security_context(),
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
        "labels": labels | _queue_label(t),
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


def probe_manifests(cfg: StackConfig, p: Probe) -> dict[str, Manifest]:
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


# --------------------------------------------------------------------------------------------
# Burn-in: the NCCL proof again, on a schedule, at the lowest priority

BURN_IN_PRIORITY_CLASS: Final = "gpuaas-burn-in"


def burn_in_priority_class(cfg: StackConfig) -> Manifest:
    """Below every team pod (pods without a class have priority 0), never preempting anything itself:
    any team workload that needs the GPUs evicts a running burn-in (Kubernetes docs, "Pod Priority and
    Preemption"; ``preemptionPolicy: Never`` keeps it from evicting others)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": BURN_IN_PRIORITY_CLASS, "labels": {"app.kubernetes.io/part-of": "gpuaas"}},
        "value": cfg.verification.burn_in.priority,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "gpuaas burn-in proofs: run on idle GPUs, preempted by any team workload",
    }


def burn_in_groups(cfg: StackConfig, t: Target) -> list[tuple[str, str, str]]:
    """(name segment, node label, value) of each node group a target's burn-in runs on.

    AKS: the target's pool. On-prem: every node group with at least two nodes (the proof is a pair).
    """
    if t.pool is not None:
        return [(t.pool, AKS_POOL_LABEL, t.pool)]
    onprem = cfg.onprem
    if onprem is None:
        return []
    counts: dict[str, int] = {}
    for n in onprem.nodes:
        counts[n.node_group] = counts.get(n.node_group, 0) + 1
    return [(g.name, NODE_GROUP_LABEL, g.name) for g in onprem.node_groups if counts.get(g.name, 0) >= 2]


def _burn_in_name(t: Target, group: str) -> str:
    return _bounded(f"{t.prefix}-burn-in-{group}", 52)  # CronJob names: 52 characters (Kubernetes docs)


def burn_in_service(t: Target, group: str) -> Manifest:
    """Headless Service of one group's burn-in pods: ``<job>-0.<service>`` is rank 0."""
    name = _burn_in_name(t, group)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(t, "burn-in", name),
        "spec": {
            "clusterIP": "None",
            "selector": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": name},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
            "publishNotReadyAddresses": True,
        },
    }


def burn_in_cron_job(cfg: StackConfig, t: Target, group: str, label: str, value: str, digest: str) -> Manifest:
    """The NCCL Job of :func:`nccl_job` as a CronJob on one node group, at the burn-in priority.

    A CronJob's Jobs are named ``<cronjob>-<time>``, so rank 0's address comes from the Job-name label
    the Job controller puts on its pods (``batch.kubernetes.io/job-name``, Kubernetes ≥ 1.27).
    """
    name = _burn_in_name(t, group)
    job = nccl_job(cfg, t, digest)
    spec = job["spec"]
    spec["template"]["metadata"]["labels"] |= {"gpuaas.io/verify-pair": name, "gpuaas.io/burn-in": group}
    pod = spec["template"]["spec"]
    pod["subdomain"] = name
    pod["priorityClassName"] = BURN_IN_PRIORITY_CLASS
    pod["affinity"] = _affinity(t, name, "nccl")
    pod["affinity"]["nodeAffinity"] = _node_affinity(label, value)
    env = pod["containers"][0]["env"]
    job_name = {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    master = {"name": "MASTER_ADDR", "value": f"$(JOB_NAME)-0.{name}"}
    pod["containers"][0]["env"] = [{"name": "JOB_NAME", "valueFrom": job_name}] + [
        master if e["name"] == "MASTER_ADDR" else e for e in env
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(t, "burn-in", name),
        "spec": {
            "schedule": cfg.verification.burn_in.schedule,
            # One at a time; a run missed by more than an hour is skipped, not queued.
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 3600,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": {"labels": _labels(t, "burn-in") | _queue_label(t)}, "spec": spec},
        },
    }


def burn_in_manifests(cfg: StackConfig, t: Target, bench_source: str) -> dict[str, Manifest]:
    """A target's burn-in objects by role (``burn-in-<group>-service``, ``burn-in-<group>``); none when off."""
    if not cfg.verification.burn_in.enabled:
        return {}
    digest = scripts_hash(bench_source)
    out: dict[str, Manifest] = {}
    for group, label, value in burn_in_groups(cfg, t):
        out[f"burn-in-{group}-service"] = burn_in_service(t, group)
        out[f"burn-in-{group}"] = burn_in_cron_job(cfg, t, group, label, value, digest)
    return out


# --------------------------------------------------------------------------------------------
# Component


class Verification(pulumi.ComponentResource):
    """The proofs of every verify team (and AKS pool), last in the install order: ib_write_bw and NCCL
    (positive), the isolation probes (negative) and, when enabled, the burn-in CronJobs."""

    jobs: dict[str, dict[str, str]]

    def __init__(self, name: str, cfg: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Verification", name, None, opts)
        bench_source = BENCH_SCRIPT.read_text()
        self.jobs = {}
        found = targets(cfg)
        probes = isolation_probes(cfg)
        namespace: list[pulumi.Resource] = []
        if any(t.namespace == POOL_NAMESPACE for t in found):
            namespace = [kube.apply(f"{name}-namespace", pool_namespace(), kube.child(self))]
        after = kube.child(self, namespace)
        for t in found:
            for role, manifest in manifests(cfg, t, bench_source).items():
                kube.apply(f"{name}-{t.key}-{role}", manifest, after)
            self.jobs[t.key] = {check: f"{t.namespace}/{job}" for check, job in job_names(t).items()}
        for p in probes:
            for role, manifest in probe_manifests(cfg, p).items():
                kube.apply(f"{name}-isolation-{p.id}-{role}", manifest, after)
            self.jobs.setdefault(p.client.key, {})[f"isolation:{p.server.key}"] = probe_job_names(p)["client"]
        if cfg.verification.burn_in.enabled and found:
            priority = kube.apply(f"{name}-burn-in-priority", burn_in_priority_class(cfg), kube.child(self))
            for t in found:
                for role, manifest in burn_in_manifests(cfg, t, bench_source).items():
                    kube.apply(f"{name}-{t.key}-{role}", manifest, kube.child(self, [*namespace, priority]))
        self.register_outputs({"jobs": self.jobs})
