"""workloads/gather_results.py: parsing of real-shaped pod logs and Job statuses, and the table."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import stack_path

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gather_results", ROOT / "workloads" / "gather_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gather_results"] = module
    spec.loader.exec_module(module)
    return module


g = _load()

IB_CLIENT_LOG = """\
ib_write_bw client on mlx5_4 (verify-ib-client-x7k2p) -> verify-ib-server, pass mark 360 Gb/s
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_4
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 TX depth        : 128
 CQ Moderation   : 100
 Mtu             : 4096[B]
 Link type       : IB
 Max inline data : 0[B]
 rdma_cm QPs     : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
 local address: LID 0x2f QPN 0x0127 PSN 0x8a3c1 RKey 0x1fff00 VAddr 0x007f3c2a000000
 remote address: LID 0x31 QPN 0x0129 PSN 0x51e0f RKey 0x1fff00 VAddr 0x007f8a44000000
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8388608    5000             392.45             391.87              0.005839
---------------------------------------------------------------------------------------
IB_WRITE_BW_RESULT {"device": "mlx5_4", "bw_average_gbps": 391.87, "min_gbps": 360, "passed": true}
"""


def _nccl_pod_log(rank: int, gdr_busbw: float, gdr_rc: int, gdrdma: bool) -> str:
    lines = [f"rank {rank} on verify-nccl-{rank}-abcde, NCCL_IB_HCA==mlx5_4"]
    for label, busbw, rc, threshold in (
        ("gdr", gdr_busbw, gdr_rc, 42.5),
        ("rdma", 38.1, 0, None),
        ("tcp", 9.7, 0, None),
    ):
        if rank == 0:
            lines.append(f"# all_reduce {label} backend=nccl world=2 device=NVIDIA H100 80GB HBM3")
            lines.append(f"   256 MiB     20      5600.0      5590.0       47.93       {busbw:.2f}       48.01")
        lines.append(
            "node:12:40 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"
            + ("/GDRDMA" if gdrdma and label == "gdr" else "")
        )
        summary = {
            "label": label,
            "backend": "nccl",
            "world_size": 2,
            "peak_busbw_gbps": busbw,
            "min_busbw_gbps": threshold,
            "busbw_ok": None if threshold is None else busbw >= threshold,
            "gdrdma": gdrdma if label == "gdr" else False,
            "transports": [],
            "passed": rc == 0,
            "rank": rank,
        }
        lines.append("ALLREDUCE_RESULT " + json.dumps(summary))
        lines.append(f'VERIFY_RUN {{"label": "{label}", "rc": {rc}}}')
    return "\n".join(lines) + "\n"


COMPLETE = {"status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}}
FAILED = {
    "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
}


def test_perftest_table_bw_average() -> None:
    assert g.perftest_bw_average(IB_CLIENT_LOG) == 391.87
    assert g.perftest_bw_average("no table here") is None


def test_ib_row_from_the_result_line() -> None:
    (row,) = g.ib_rows("vision", "vision/verify-ib-client", "Complete", [IB_CLIENT_LOG])
    assert (row.check, row.value, row.threshold, row.unit, row.passed) == ("ib_write_bw", 391.87, 360, "Gb/s", True)
    assert row.note == "device mlx5_4"


def test_ib_row_without_a_result_line_falls_back_to_the_table() -> None:
    text = IB_CLIENT_LOG.rsplit("IB_WRITE_BW_RESULT", 1)[0]
    (row,) = g.ib_rows("vision", "j", "Failed", [text])
    assert (row.value, row.passed, row.note) == (391.87, False, "no result")


def test_nccl_rows_one_per_run_from_rank_0() -> None:
    logs = [_nccl_pod_log(0, 47.93, 0, True), _nccl_pod_log(1, 47.93, 0, True)]
    rows = g.nccl_rows("vision", "vision/verify-nccl", "Complete", logs)
    assert [(r.check, r.value, r.threshold, r.passed) for r in rows] == [
        ("nccl gdr", 47.93, 42.5, True),
        ("nccl rdma", 38.1, None, True),
        ("nccl tcp", 9.7, None, True),
    ]
    assert rows[0].note == "GDRDMA yes, rc 0"
    assert g.overall(g.ib_rows("vision", "j", "Complete", [IB_CLIENT_LOG]) + rows)


def test_nccl_row_notes_the_average_and_latency_when_the_bench_reports_them() -> None:
    summary = {"label": "gdr", "rank": 0, "peak_busbw_gbps": 48.1, "avg_busbw_gbps": 41.25, "bw_mode": "batch"}
    summary |= {"latency_p50_us": 12.0, "latency_p99_us": 19.5, "gdrdma": True, "passed": True}
    text = "ALLREDUCE_RESULT " + json.dumps(summary) + '\nVERIFY_RUN {"label": "gdr", "rc": 0}\n'
    (row,) = g.nccl_rows("vision", "j", "Complete", [text])
    assert row.note == "avg 41.25 GB/s (batch), p50/p99 12.0/19.5 us, GDRDMA yes, rc 0"


def test_nccl_gdr_below_threshold_fails() -> None:
    logs = [_nccl_pod_log(0, 30.0, 1, False), _nccl_pod_log(1, 30.0, 1, False)]
    rows = g.nccl_rows("vision", "vision/verify-nccl", "Failed", logs)
    gdr = rows[0]
    assert (gdr.passed, gdr.note) == (False, "GDRDMA no, rc 1")
    assert not g.overall(rows)


def test_one_rank_failing_fails_the_run() -> None:
    logs = [_nccl_pod_log(0, 47.93, 0, True), _nccl_pod_log(1, 47.93, 1, True)]
    assert g.nccl_rows("t", "j", "Failed", logs)[0].passed is False


def test_nothing_logged() -> None:
    (row,) = g.nccl_rows("t", "j", "missing", [])
    assert (row.check, row.passed, row.note) == ("nccl", None, "no result")
    assert not g.overall([row])


def test_marked_tolerates_kubectl_prefix_and_garbage() -> None:
    text = '[pod/verify-nccl-0-abc/nccl] ALLREDUCE_RESULT {"label": "gdr", "rank": 0}\nALLREDUCE_RESULT {oops\n'
    assert g.marked(text, g.ALLREDUCE_MARK) == [{"label": "gdr", "rank": 0}]


def test_job_states() -> None:
    assert g.job_state(None) == "missing"
    assert g.job_state(COMPLETE) == "Complete"
    assert g.job_state(FAILED) == "Failed"
    assert g.job_state({"status": {"active": 2}}) == "Running"
    assert g.job_state({"status": {}}) == "Pending"


def test_table() -> None:
    rows = g.ib_rows("vision", "vision/verify-ib-client", "Complete", [IB_CLIENT_LOG])
    text = g.format_table(rows)
    header, line = text.splitlines()
    assert header.split() == [
        "proof",
        "target",
        "check",
        "job",
        "state",
        "value",
        "threshold",
        "unit",
        "result",
        "note",
    ]
    assert line.split()[:9] == [
        "positive",
        "vision",
        "ib_write_bw",
        "vision/verify-ib-client",
        "Complete",
        "391.87",
        "360.00",
        "Gb/s",
        "PASS",
    ]


PROBE_BLOCKED_LOG = """\
isolation probe: vision on mlx5_12 (P_Key 0x8001) -> inference at isolation-vision-to-inference-server.inference.svc
 remote address: LID 0x31 QPN 0x0129 PSN 0x51e0f RKey 0x1fff00 VAddr 0x007f8a44000000
 Completion with error at client
 Failed status 12: wr_id 0 syndrom 0x81
ISOLATION_RESULT {"client": "vision", "server": "inference", "device": "mlx5_12", "pkey": "0x8001", "rc": 1, \
"verdict": "blocked", "reason": "Failed status 12: wr_id 0 syndrom 0x81 (IBV_WC_RETRY_EXC_ERR: no acknowledgement \
from the other partition)", "passed": true}
"""
SERVER_QUIET = 'ISOLATION_SERVER {"device": "mlx5_20", "pkey": "0x8005", "rc": 1, "completed": false}\n'
SERVER_LEAK = 'ISOLATION_SERVER {"device": "mlx5_20", "pkey": "0x8005", "rc": 0, "completed": true}\n'


def _probe_log(verdict: str, passed: bool, reason: str) -> str:
    result = {"client": "vision", "server": "inference", "verdict": verdict, "reason": reason, "passed": passed}
    return "ISOLATION_RESULT " + json.dumps(result) + "\n"


def test_isolation_row_passes_on_the_partition_error() -> None:
    (row,) = g.isolation_rows("vision", "inference", "vision/iso", "Complete", [PROBE_BLOCKED_LOG], [SERVER_QUIET])
    assert (row.proof, row.target, row.check, row.passed) == ("negative", "vision", "isolation -> inference", True)
    assert row.note.startswith("blocked: Failed status 12: wr_id 0 syndrom 0x81 (IBV_WC_RETRY_EXC_ERR")
    assert g.overall([row])


def test_isolation_row_fails_loudly_on_a_leak_seen_by_either_side() -> None:
    leak = _probe_log("leak", False, "RDMA writes completed: bytes crossed from vision into inference")
    (row,) = g.isolation_rows("vision", "inference", "j", "Failed", [leak], [SERVER_QUIET])
    assert (row.passed, row.note) == (False, "LEAK: RDMA writes completed: bytes crossed from vision into inference")
    # The client says blocked, but the server finished a test: that is a leak too.
    (row,) = g.isolation_rows("vision", "inference", "j", "Complete", [PROBE_BLOCKED_LOG], [SERVER_LEAK])
    assert row.passed is False and row.note.startswith("LEAK")
    (row,) = g.isolation_rows("vision", "inference", "j", "Failed", [], [SERVER_LEAK])
    assert (row.passed, row.note) == (False, "LEAK: the server completed a test")


def test_isolation_row_inconclusive_or_missing_is_not_a_pass() -> None:
    other = _probe_log("inconclusive", False, "the server never answered over the pod network")
    (row,) = g.isolation_rows("vision", "inference", "j", "Failed", [other], [])
    assert (row.passed, row.note) == (False, "inconclusive: the server never answered over the pod network")
    (row,) = g.isolation_rows("vision", "inference", "j", "Running", [], [])
    assert (row.passed, row.note) == (None, "no result")
    assert not g.overall([row])


def test_gather_against_a_fake_kubectl() -> None:
    pods = {
        "verify-ib-client": ["verify-ib-client-x7k2p"],
        "verify-nccl": ["verify-nccl-1-b", "verify-nccl-0-a"],
    }
    logs = {
        "verify-ib-client-x7k2p": IB_CLIENT_LOG,
        "verify-nccl-0-a": _nccl_pod_log(0, 47.93, 0, True),
        "verify-nccl-1-b": _nccl_pod_log(1, 47.93, 0, True),
    }
    # vision (the one verifying team) probes every other partition.
    servers = ("inference", "language", "platform-qa", "research", "speech")
    for s in servers:
        pods[f"isolation-vision-to-{s}"] = [f"isolation-vision-to-{s}-q1"]
        pods[f"isolation-vision-to-{s}-server"] = [f"isolation-vision-to-{s}-server-z9"]
        logs[f"isolation-vision-to-{s}-q1"] = PROBE_BLOCKED_LOG
        logs[f"isolation-vision-to-{s}-server-z9"] = SERVER_QUIET
    seen: list[list[str]] = []

    def kubectl(args: Sequence[str]) -> str | None:
        seen.append(list(args))
        if args[:2] == ["get", "job"]:
            return json.dumps(COMPLETE)
        if args[:2] == ["get", "pods"]:
            job = args[-3].split("=", 1)[1]
            return json.dumps({"items": [{"metadata": {"name": n}} for n in pods[job]]})
        if args[0] == "logs":
            return logs[args[-1]]
        return None

    rows = g.gather("onprem", kubectl, stack_path("onprem"))
    assert [(r.proof, r.target, r.check, r.passed) for r in rows] == [
        ("positive", "vision", "ib_write_bw", True),
        ("positive", "vision", "nccl gdr", True),
        ("positive", "vision", "nccl rdma", True),
        ("positive", "vision", "nccl tcp", True),
        *[("negative", "vision", f"isolation -> {s}", True) for s in servers],
    ]
    assert ["get", "job", "-n", "vision", "verify-nccl", "-o", "json"] in seen
    assert ["get", "job", "-n", "inference", "isolation-vision-to-inference-server", "-o", "json"] in seen
    assert g.overall(rows)


def _fake_kubectl(tmp_path: Path, script: str) -> str:
    """A PATH whose ``kubectl`` is ``script`` (a shell body), ahead of any real one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "kubectl"
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def test_a_context_that_does_not_exist_is_named_not_every_proof_missing(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # What kubectl prints for `--context nope` (kubectl 1.3x): no server answered anything.
    monkeypatch.setenv(
        "PATH",
        _fake_kubectl(tmp_path, 'echo "error: context was not found for specified context: nope" >&2\nexit 1\n'),
    )
    assert g.main(["--context", "nope", "--stack", "onprem", "--stack-file", str(stack_path("onprem"))]) == 2
    out = capsys.readouterr()
    assert "context 'nope'" in out.err and "context was not found for specified context: nope" in out.err
    assert "missing" not in out.out


def test_a_job_the_server_does_not_have_is_missing(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    # The allowed twin: the context exists, the server answers NotFound: every proof "missing", exit 1.
    monkeypatch.setenv(
        "PATH",
        _fake_kubectl(
            tmp_path, "echo 'Error from server (NotFound): jobs.batch \"verify-nccl\" not found' >&2\nexit 1\n"
        ),
    )
    assert g.main(["--context", "lab", "--stack", "onprem", "--stack-file", str(stack_path("onprem"))]) == 1
    out = capsys.readouterr()
    assert "missing" in out.out and "NOT ALL PASSED" in out.out
    assert out.err == ""
