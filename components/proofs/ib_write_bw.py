"""The ib_write_bw proof (perftest): a server Job and Service, and a client Job that judges the bandwidth."""

from __future__ import annotations

from typing import Final

from components.k8s import Manifest
from components.proofs import pods
from components.proofs.pods import SCRIPTS_DIR
from components.proofs.targets import ProofConfig, Target, ib_min_gbps, perftest_image

#: perftest's default out-of-band TCP port (perftest README, ``-p``).
PERFTEST_PORT: Final = 18515
#: ib_write_bw message size and count: 8 MiB × 5000 ≈ 42 GB, about a second at NDR, well past
#: the size at which perftest reaches line rate (domain.md §4.1 measured NDR at 32 MiB messages).
IB_MESSAGE_BYTES: Final = 8 * 1024 * 1024
IB_ITERATIONS: Final = 5000
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


def ib_server_job(cfg: ProofConfig, t: Target, digest: str) -> Manifest:
    pod = pods.pod_spec(
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
    job = pods.job(t, "ib-server", pod, "ib", digest)
    job["spec"]["template"]["metadata"]["labels"]["gpuaas.io/verify-ib"] = "server"
    return job


def ib_service(t: Target) -> Manifest:
    """ClusterIP Service in front of the ib_write_bw server: perftest's TCP exchange of QP numbers."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": pods.object_meta(t, "ib-server"),
        "spec": {
            "selector": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-ib": "server"},
            "ports": [{"name": "perftest", "port": PERFTEST_PORT, "targetPort": PERFTEST_PORT, "protocol": "TCP"}],
            "publishNotReadyAddresses": True,
        },
    }


def ib_client_job(cfg: ProofConfig, t: Target, digest: str) -> Manifest:
    env = [
        {"name": "IB_SERVER", "value": pods.object_name(t, "ib-server")},
        {"name": "IB_MIN_GBPS", "value": f"{ib_min_gbps(cfg, t):g}"},
    ]
    pod = pods.pod_spec(
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
    return pods.job(t, "ib-client", pod, "ib", digest)
