"""The scripts ConfigMap of a target: the benchmark, the shared ``rdma_device`` and each proof's shell."""

from __future__ import annotations

import hashlib
import json
from typing import Final

from components.k8s import Manifest
from components.proofs import pods
from components.proofs.ib_write_bw import IB_CLIENT_SH, IB_SERVER_SH
from components.proofs.nccl import nccl_sh
from components.proofs.targets import Target

#: Sourced by every script: prints the pod's RDMA device name. ``SYSFS`` only exists for tests.
RDMA_DEVICE_SH: Final = r"""# Prints the RDMA device this pod was given (see components/proofs/scripts.py).
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


def scripts_config_map(t: Target, bench_source: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": pods.object_meta(t, "scripts"),
        "data": scripts(bench_source),
    }
