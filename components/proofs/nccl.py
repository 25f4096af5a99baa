"""The NCCL all_reduce proof: an Indexed Job of two pods (GPUDirect RDMA judged, RDMA via host memory, TCP)."""

from __future__ import annotations

from typing import Final

from components.dra import claims
from components.k8s import Manifest
from components.model.resources import GPU
from components.proofs import pods
from components.proofs.pods import SCRIPTS_DIR
from components.proofs.targets import ProofConfig, Target, nccl_min_busbw_gbytes, pytorch_image

#: torch.distributed rendezvous ports, one per NCCL run so that no run waits on a closing socket.
RENDEZVOUS_PORT: Final = 29500
#: Largest size of the TCP comparison run (all_reduce only).
TCP_MAX_BYTES: Final = 256 * 1024 * 1024
#: The three NCCL runs: label, extra environment, whether it is the one judged.
#: NCCL_NET_GDR_LEVEL=SYS lets the NIC read/write GPU memory at any PCI distance; LOC never
#: (RDMA through host memory); NCCL_IB_DISABLE=1 falls back to sockets (NCCL env docs; domain.md §4.3).
NCCL_RUNS: Final[tuple[tuple[str, dict[str, str]], ...]] = (
    ("gdr", {"NCCL_NET_GDR_LEVEL": "SYS", "NCCL_NET_GDR_READ": "1"}),
    ("rdma", {"NCCL_NET_GDR_LEVEL": "LOC"}),
    ("tcp", {"NCCL_IB_DISABLE": "1"}),
)


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


def nccl_service(t: Target) -> Manifest:
    """Headless Service: gives the Indexed Job's pods DNS names ``<job>-<index>.<service>``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": pods.object_meta(t, "nccl"),
        "spec": {
            "clusterIP": "None",
            "selector": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": "nccl"},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
            # Rank 1 resolves rank 0 before either is Ready.
            "publishNotReadyAddresses": True,
        },
    }


def nccl_job(cfg: ProofConfig, t: Target, digest: str) -> Manifest:
    name = pods.object_name(t, "nccl")
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
    pod = pods.pod_spec(
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
    if t.gpu_claims:
        pod = claims.gpus_as_claims(pod)  # the GPU through the team's gpuaas-gpu claim template
    return pods.job(t, "nccl", pod, "nccl", digest, indexed=2)
