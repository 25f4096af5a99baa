"""Showback: per team GPU-hours allocated, used, borrowed and lent over a period, and their cost where priced.

    python -m components.observability.showback --prometheus http://prometheus:9090 \\
        --from 2026-12-01T00:00:00Z --to 2026-12-02T00:00:00Z [--csv]

Reads the series the rules record (:mod:`components.observability.rules`) from the Prometheus
that evaluates them: each per-step series is summed over the period at the rules' evaluation
interval (``gpuaas:rules:evaluation_interval_seconds``) and turned into hours, so a team that held
nothing for part of the period is charged nothing for it. Cost is allocated GPU-hours per kind
times ``gpuaas:gpu_kind:price_per_hour`` (``observability.prices``); a team holding an unpriced
kind shows ``-``. Exit 0 with the table, 1 when Prometheus cannot be reached or answers an error.

What Prometheus answers is input from outside: each query's whole exchange has a deadline
(``--deadline``) and its body a size bound (:data:`MAX_BODY`); an answer not shaped as the API says
is one line naming it; label values are printed with their control characters written out, and a
CSV cell that a spreadsheet would run as a formula is quoted. Only http(s) URLs are read.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import http.client
import io
import json
import math
import re
import socket
import sys
import threading
import urllib.parse
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from components.observability import rules as r

COLUMNS = ("team", "gpu_hours_allocated", "gpu_hours_used", "gpu_hours_borrowed", "gpu_hours_lent", "cost")


class PrometheusError(Exception):
    pass


@dataclass(frozen=True)
class Row:
    team: str
    allocated: float
    used: float
    borrowed: float
    lent: float
    cost: float | None
    currency: str


def parse_time(text: str) -> datetime:
    """RFC 3339 (``2026-12-01T00:00:00Z``) or a date (``2026-12-01``, midnight UTC)."""
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time; allowed: 2026-12-01 or 2026-12-01T00:00:00Z"
        ) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


#: The whole exchange of one query (connect, send, headers, body) must end within this many seconds:
#: a per-read timeout alone lets a server that trickles a byte every few seconds hold it forever.
DEADLINE_S = 120.0
#: Longest a single read may wait (the time a silent server gets before it counts as unreachable).
READ_TIMEOUT_S = 30.0
#: Largest answer read. The rows are one sample per team (about 200 bytes each): 16 MiB holds tens of
#: thousands of teams; a body without end stops here, not at a MemoryError.
MAX_BODY = 16 * 1024 * 1024
#: C0 and C1 control characters and DEL: a label value holding ESC sequences would drive the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: What a spreadsheet reads as a formula at a cell's start (OWASP "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def clean(text: str) -> str:
    """``text`` with every control character written out (``\\x1b``), so it prints as itself."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: a leading formula character is quoted with ``'``
    (OWASP's CSV injection advice), control characters written out."""
    text = clean(text)
    return f"'{text}" if text.startswith(_FORMULA_START) else text


def check_url(url: str) -> str:
    """``url`` when it is an http(s) URL with a host; :class:`PrometheusError` otherwise.

    ``urlopen`` would also read ``file://``, ``ftp://`` and ``data:`` URLs: the tool then reads a
    local file as if Prometheus had answered it.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise PrometheusError(f"--prometheus {clean(url)!r} is not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrometheusError(
            f"--prometheus {clean(url)!r}: only http:// and https:// URLs with a host are allowed "
            "(e.g. http://prometheus.monitoring:9090)"
        )
    return url


def _exchange(url: str, body: bytes, deadline: float, max_body: int) -> tuple[int, bytes]:
    """POST ``body`` to ``url``; the status and the body, the whole exchange within ``deadline`` s.

    A timer shuts the socket down when the deadline passes, which ends any read blocked on it
    (headers included, which ``http.client`` reads line by line).
    """
    parts = urllib.parse.urlsplit(url)
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.hostname or "", parts.port, timeout=min(READ_TIMEOUT_S, deadline))
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    timer = threading.Timer(deadline, cut)
    timer.daemon = True
    timer.start()
    try:
        path = parts.path.rstrip("/") + "/api/v1/query"
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        data = bytearray()
        while len(data) <= max_body:
            chunk = resp.read1(65536)
            if not chunk or expired.is_set():
                break
            data += chunk
    except (OSError, http.client.HTTPException) as e:
        if expired.is_set():
            raise _late(url, deadline) from None
        raise PrometheusError(f"cannot reach Prometheus at {clean(url)}: {clean(str(e)) or type(e).__name__}") from None
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise _late(url, deadline)
    if len(data) > max_body:
        raise PrometheusError(f"Prometheus at {clean(url)} answered more than {max_body} bytes; stopped reading")
    return resp.status, bytes(data)


def _late(url: str, deadline: float) -> PrometheusError:
    return PrometheusError(f"Prometheus at {clean(url)} did not answer within {deadline:g} s; stopped waiting")


def query(
    url: str, expr: str, at: datetime, deadline: float = DEADLINE_S, max_body: int = MAX_BODY
) -> list[tuple[dict[str, str], float]]:
    """An instant query's samples (labels, value); :class:`PrometheusError` naming the URL and the reason.

    Everything in the answer is checked against the API's shape
    (https://prometheus.io/docs/prometheus/latest/querying/api/#instant-vector): an answer of another
    shape is a problem named in one line, never a traceback.
    """
    check_url(url)
    body = urllib.parse.urlencode({"query": expr, "time": f"{at.timestamp():.3f}"}).encode()
    status, raw = _exchange(url, body, deadline, max_body)
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if status != 200:
        reason = doc.get("error") if isinstance(doc, dict) else None
        reason = clean(str(reason)) if reason is not None else http.client.responses.get(status, "")
        raise PrometheusError(f"Prometheus at {clean(url)} refused the query ({status}): {reason}")
    if not isinstance(doc, dict):
        raise PrometheusError(f"Prometheus at {clean(url)} answered something that is not a JSON object")
    if doc.get("status") != "success":
        raise PrometheusError(f"Prometheus at {clean(url)} answered an error: {clean(str(doc.get('error')))}")
    data = doc.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list):
        raise PrometheusError(f"Prometheus at {clean(url)} answered success without data.result (a list of samples)")
    return [_sample(s, url) for s in result]


def _sample(s: Any, url: str) -> tuple[dict[str, str], float]:
    """One instant-vector sample: ``{"metric": {label: value}, "value": [time, "number"]}``."""
    metric = s.get("metric") if isinstance(s, dict) else None
    value = s.get("value") if isinstance(s, dict) else None
    if (
        not isinstance(metric, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items())
        or not isinstance(value, list)
        or len(value) != 2
        or not isinstance(value[1], str)
    ):
        raise PrometheusError(
            f'Prometheus at {clean(url)} answered a sample that is not {{metric: {{...}}, value: [time, "number"]}}: '
            f"{clean(json.dumps(s)[:200])}"
        )
    try:
        number = float(value[1])
    except ValueError:
        raise PrometheusError(
            f"Prometheus at {clean(url)} answered a sample whose value is not a number: {clean(value[1][:80])!r}"
        ) from None
    return metric, number


def _by_team(result: list[tuple[dict[str, str], float]]) -> dict[str, float]:
    return {metric.get("team", ""): value for metric, value in result}


def showback(url: str, start: datetime, end: datetime, say: Any = None, deadline: float = DEADLINE_S) -> list[Row]:
    """The table rows, sorted by team."""
    check_url(url)
    seconds = int((end - start).total_seconds())
    if seconds <= 0:
        raise PrometheusError(f"--to ({end.isoformat()}) must be after --from ({start.isoformat()})")
    window = f"{seconds}s"
    step = query(url, r.STEP, end, deadline)
    if not step:
        raise PrometheusError(
            f"Prometheus at {clean(url)} has no {r.STEP}: the gpuaas PrometheusRules are not loaded "
            "(observability.enabled)"
        )
    step_s = step[0][1]
    if not math.isfinite(step_s) or step_s <= 0:
        raise PrometheusError(f"Prometheus at {clean(url)} answered {r.STEP} = {step_s!r}; a step is positive seconds")
    hours_per_sample = step_s / 3600

    def hours(series: str) -> dict[str, float]:
        if say:
            say(f"showback: {series} over {window} ...")
        expr = f"sum by (team) (sum_over_time({series}[{window}])) * {hours_per_sample!r}"
        return _by_team(query(url, expr, end, deadline))

    allocated = hours(r.TEAM_ALLOCATED)
    used = hours(r.TEAM_USED)
    borrowed = hours(r.TEAM_BORROWED)
    lent = hours(r.TEAM_LENT)
    if say:
        say("showback: cost ...")
    priced = (
        f"sum by (team, currency) (sum_over_time({r.TEAM_KIND_ALLOCATED}[{window}]) * on (node_group, resource) "
        f"group_left (currency) {r.KIND_PRICE}) * {hours_per_sample!r}"
    )
    cost: dict[str, float] = defaultdict(float)
    currency = ""
    for metric, value in query(url, priced, end, deadline):
        cost[metric.get("team", "")] += value
        currency = metric.get("currency", currency)
    # Kinds a team held with no price: its cost is unknown, not lower.
    unpriced = f"sum by (team) (sum_over_time({r.TEAM_KIND_ALLOCATED}[{window}]) unless on (node_group, resource) {r.KIND_PRICE})"  # noqa: E501
    unknown = {metric.get("team", "") for metric, value in query(url, unpriced, end, deadline) if value > 0}
    teams = sorted(set(allocated) | set(used) | set(borrowed) | set(lent))
    return [
        Row(
            t,
            allocated.get(t, 0.0),
            used.get(t, 0.0),
            borrowed.get(t, 0.0),
            lent.get(t, 0.0),
            None if t in unknown else cost.get(t, 0.0),
            currency,
        )
        for t in teams
    ]


def _cells(row: Row) -> list[str]:
    """The row as printed text: label values (team, currency) come from Prometheus, so their control
    characters are written out (:func:`clean`)."""
    cost = "-" if row.cost is None else f"{row.cost:.2f} {clean(row.currency)}".strip()
    return [clean(row.team), *(f"{v:.2f}" for v in (row.allocated, row.used, row.borrowed, row.lent)), cost]


def render_table(rows: list[Row]) -> str:
    header = ["team", "allocated GPU-h", "used GPU-h", "borrowed GPU-h", "lent GPU-h", "cost"]
    body = [_cells(row) for row in rows]
    widths = [max(len(c) for c in col) for col in zip(header, *body, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), *(line(b) for b in body)]) + "\n"


def render_csv(rows: list[Row]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([*COLUMNS, "currency"])
    for row in rows:
        numbers = [f"{v:.2f}" for v in (row.allocated, row.used, row.borrowed, row.lent)]
        w.writerow(
            [
                csv_cell(row.team),
                *numbers,
                "" if row.cost is None else f"{row.cost:.2f}",
                csv_cell(row.currency) if row.cost is not None else "",
            ]
        )
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m components.observability.showback", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--prometheus", required=True, help="the Prometheus that evaluates the gpuaas rules (URL)")
    ap.add_argument(
        "--from", dest="start", required=True, type=parse_time, help="period start (2026-12-01 or RFC 3339)"
    )
    ap.add_argument("--to", dest="end", required=True, type=parse_time, help="period end (exclusive of --from)")
    ap.add_argument("--csv", action="store_true", help="CSV instead of a table")
    ap.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE_S,
        help=f"seconds each query's whole exchange may take (default {DEADLINE_S:g})",
    )
    args = ap.parse_args(argv)
    if not (math.isfinite(args.deadline) and args.deadline > 0):
        ap.error(f"--deadline {args.deadline!r}: a positive number of seconds")
    try:
        rows = showback(
            args.prometheus,
            args.start,
            args.end,
            say=lambda m: print(m, file=sys.stderr, flush=True),
            deadline=args.deadline,
        )
    except PrometheusError as e:
        print(f"showback: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(render_csv(rows) if args.csv else render_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
