#!/usr/bin/env python3
"""Collect the verification Jobs' outcome into one table.

    .venv/bin/python workloads/gather_results.py --context onprem-admin --stack onprem [--json results.json]

The stack's config says which Jobs exist (:func:`components.proofs.targets.targets` and
:func:`components.proofs.isolation.isolation_probes`); ``kubectl`` reads each Job's status and its pods'
logs; the scripts' one-line results (``IB_WRITE_BW_RESULT``, ``ALLREDUCE_RESULT``, ``VERIFY_RUN``,
``ISOLATION_RESULT``, ``ISOLATION_SERVER``) give the numbers and verdicts. One table holds both kinds
of proof: *positive* (the partition carries RDMA and GPUDirect traffic at the expected rate) and
*negative* (an RDMA write from one partition into another fails with the partition's error). Exit
status 0 when every proof passed, 1 otherwise (a missing or unfinished Job included), 2 when kubectl
reaches no cluster (a context that does not exist, no kubeconfig): the message names it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IB_MARK = "IB_WRITE_BW_RESULT "
ALLREDUCE_MARK = "ALLREDUCE_RESULT "
RUN_MARK = "VERIFY_RUN "
ISOLATION_MARK = "ISOLATION_RESULT "
ISOLATION_SERVER_MARK = "ISOLATION_SERVER "
#: perftest's result line under the ``BW average[Gb/sec]`` header: bytes, iterations, peak, average, rate.
_PERFTEST_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


# ----------------------------------------------------------------------------------------------
# Parsing (pure)


def marked(text: str, mark: str) -> list[dict[str, Any]]:
    """Every JSON object printed after ``mark`` at a line's start (``kubectl logs --prefix`` tolerated)."""
    out = []
    for line in text.splitlines():
        at = line.find(mark)
        if at < 0:
            continue
        try:
            value = json.loads(line[at + len(mark) :])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def perftest_bw_average(text: str) -> float | None:
    """The ``BW average[Gb/sec]`` of the last perftest result table in ``text``."""
    found = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "BW average" in line and i + 1 < len(lines):
            m = _PERFTEST_ROW.match(lines[i + 1])
            if m:
                found = float(m.group(4))
    return found


def job_state(job: dict[str, Any] | None) -> str:
    """``Complete``, ``Failed``, ``Running``, ``Pending`` or ``missing`` from a Job's JSON."""
    if job is None:
        return "missing"
    status = job.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return "Running" if status.get("active") else "Pending"


@dataclass(frozen=True)
class Row:
    target: str
    check: str
    job: str
    state: str
    value: float | None
    threshold: float | None
    unit: str
    passed: bool | None
    note: str = ""
    #: ``positive`` (traffic flows as it must) or ``negative`` (traffic between partitions is refused).
    proof: str = "positive"


def ib_rows(target: str, job: str, state: str, logs: Sequence[str]) -> list[Row]:
    """One row from the ib_write_bw client's log."""
    text = "\n".join(logs)
    results = marked(text, IB_MARK)
    if results:
        r = results[-1]
        return [
            Row(
                target,
                "ib_write_bw",
                job,
                state,
                r.get("bw_average_gbps"),
                r.get("min_gbps"),
                "Gb/s",
                bool(r.get("passed")),
                f"device {r.get('device', '?')}",
            )
        ]
    bw = perftest_bw_average(text)
    return [Row(target, "ib_write_bw", job, state, bw, None, "Gb/s", None if state != "Failed" else False, "no result")]


def nccl_rows(target: str, job: str, state: str, logs: Sequence[str]) -> list[Row]:
    """One row per NCCL run (gdr, rdma, tcp), from rank 0's result line, and the run's exit status."""
    text = "\n".join(logs)
    results = {str(r.get("label")): r for r in marked(text, ALLREDUCE_MARK) if r.get("rank") == 0}
    rcs: dict[str, int] = {}
    for run in marked(text, RUN_MARK):
        name = str(run.get("label"))
        rcs[name] = max(rcs.get(name, 0), int(run.get("rc", 1)))  # both pods log their rank's rc
    rows = []
    for label in dict.fromkeys([*results, *rcs]):
        r = results.get(label, {})
        rc = rcs.get(label)
        note = []
        if r.get("avg_busbw_gbps") is not None:  # nccl-tests' closing average, for comparing with it
            note.append(f"avg {r['avg_busbw_gbps']:.2f} GB/s ({r.get('bw_mode', '?')})")
        if r.get("latency_p99_us") is not None:
            note.append(f"p50/p99 {r['latency_p50_us']:.1f}/{r['latency_p99_us']:.1f} us")
        if r.get("gdrdma") is not None:
            note.append(f"GDRDMA {'yes' if r['gdrdma'] else 'no'}")
        if rc is not None:
            note.append(f"rc {rc}")
        passed = None if rc is None else rc == 0
        if r.get("passed") is False:
            passed = False
        rows.append(
            Row(
                target,
                f"nccl {label}",
                job,
                state,
                r.get("peak_busbw_gbps"),
                r.get("min_busbw_gbps"),
                "GB/s",
                passed,
                ", ".join(note),
            )
        )
    if not rows:
        rows.append(
            Row(target, "nccl", job, state, None, None, "GB/s", False if state == "Failed" else None, "no result")
        )
    return rows


def isolation_rows(
    client: str, server: str, job: str, state: str, logs: Sequence[str], server_logs: Sequence[str]
) -> list[Row]:
    """One negative-proof row from the probe client's result line, and the server's.

    PASS only for the verdict ``blocked`` (the write failed with the partition error) with a server that
    saw no completed test; ``leak`` (bytes got through, on either side) is a FAIL that says so first.
    """
    results = marked("\n".join(logs), ISOLATION_MARK)
    served = marked("\n".join(server_logs), ISOLATION_SERVER_MARK)
    check = f"isolation -> {server}"
    leaked_at_server = any(r.get("completed") is True for r in served)
    if not results:
        note = "LEAK: the server completed a test" if leaked_at_server else "no result"
        failed = state == "Failed" or leaked_at_server
        return [Row(client, check, job, state, None, None, "", False if failed else None, note, "negative")]
    r = results[-1]
    verdict = str(r.get("verdict", "inconclusive"))
    if leaked_at_server:
        verdict = "leak"
    passed = verdict == "blocked" and r.get("passed") is True
    note = f"{'LEAK' if verdict == 'leak' else verdict}: {r.get('reason', '')}".rstrip(": ")
    return [Row(client, check, job, state, None, None, "", passed, note, "negative")]


def overall(rows: Sequence[Row]) -> bool:
    """Every proof passed and every Job completed."""
    return bool(rows) and all(r.passed is True and r.state == "Complete" for r in rows)


def format_table(rows: Sequence[Row]) -> str:
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    head = ("proof", "target", "check", "job", "state", "value", "threshold", "unit", "result", "note")
    body = [
        (
            r.proof,
            r.target,
            r.check,
            r.job,
            r.state,
            num(r.value),
            num(r.threshold),
            r.unit,
            {True: "PASS", False: "FAIL", None: "?"}[r.passed],
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in [head, *body]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# kubectl (shell)


Kubectl = Callable[[Sequence[str]], str | None]


class KubectlError(Exception):
    """kubectl could not ask any cluster (no such context, no kubeconfig, no server): nothing it
    returned says anything about a Job, so the run stops instead of calling every proof missing."""


def kubectl_runner(context: str | None) -> Kubectl:
    """Runs kubectl; ``None`` when the server answered an error (a Job or pod not there, logs not
    ready yet: ``Error from server (NotFound)``), :class:`KubectlError` when no server answered."""

    def run(args: Sequence[str]) -> str | None:
        cmd = ["kubectl", *(["--context", context] if context else []), *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as err:  # kubectl not installed or not executable
            raise KubectlError(f"cannot run kubectl: {err.strerror or err}") from None
        if done.returncode == 0:
            return done.stdout
        if "Error from server" in done.stderr:
            return None
        where = f"context {context!r}" if context else "the current context"
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise KubectlError(f"kubectl with {where} failed: {lines[-1].strip() if lines else f'exit {done.returncode}'}")

    return run


def collect(kubectl: Kubectl, namespace: str, job: str) -> tuple[str, list[str]]:
    """A Job's state and the logs of its pods (ordered by name: index 0 first)."""
    raw = kubectl(["get", "job", "-n", namespace, job, "-o", "json"])
    state = job_state(json.loads(raw) if raw else None)
    pods_raw = kubectl(["get", "pods", "-n", namespace, "-l", f"job-name={job}", "-o", "json"])
    pods = sorted(p["metadata"]["name"] for p in (json.loads(pods_raw)["items"] if pods_raw else []))
    logs = [kubectl(["logs", "-n", namespace, pod]) or "" for pod in pods]
    return state, logs


def gather(stack: str, kubectl: Kubectl, stack_file: Path | None = None) -> list[Row]:
    sys.path.insert(0, str(ROOT))
    from components.loader import parse_config
    from components.plan.offline import stack_config
    from components.proofs.isolation import isolation_probes, probe_job_names
    from components.proofs.targets import targets
    from components.proofs.verification import job_names

    raw = {k.split(":", 1)[1]: v for k, v in stack_config(stack, stack_file).items() if k.startswith("gpuaas:")}
    cfg = parse_config(raw)
    rows: list[Row] = []
    for t in targets(cfg):
        names = job_names(t)
        state, logs = collect(kubectl, t.namespace, names["ib_write_bw"])
        rows += ib_rows(t.key, f"{t.namespace}/{names['ib_write_bw']}", state, logs)
        state, logs = collect(kubectl, t.namespace, names["nccl"])
        rows += nccl_rows(t.key, f"{t.namespace}/{names['nccl']}", state, logs)
    for p in isolation_probes(cfg):
        jobs = probe_job_names(p)
        state, logs = collect(kubectl, *jobs["client"].split("/", 1))
        _server_state, server_logs = collect(kubectl, *jobs["server"].split("/", 1))
        rows += isolation_rows(p.client.key, p.server.key, jobs["client"], state, logs, server_logs)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Collect the gpuaas verification Jobs' results into one table.")
    p.add_argument("--context", help="kubeconfig context (default: the current context)")
    p.add_argument("--stack", required=True, help="stack name: reads Pulumi.<stack>.yaml")
    p.add_argument("--stack-file", type=Path, help="read this stack file instead of Pulumi.<stack>.yaml")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    try:
        rows = gather(args.stack, kubectl_runner(args.context), args.stack_file)
    except KubectlError as err:
        print(f"gather_results: {err}", file=sys.stderr)
        return 2
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    ok = overall(rows)
    print("ALL PASSED" if ok else "NOT ALL PASSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
