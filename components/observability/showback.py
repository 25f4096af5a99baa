"""Showback: per team GPU-hours allocated, used, borrowed and lent over a period, and their cost where priced.

    python -m components.observability.showback --prometheus http://prometheus:9090 \\
        --from 2026-12-01T00:00:00Z --to 2026-12-02T00:00:00Z [--csv]

Reads the series the rules record (:mod:`components.observability.rules`) from the Prometheus
that evaluates them: each per-step series is summed over the period at the rules' evaluation
interval (``gpuaas:rules:evaluation_interval_seconds``) and turned into hours, so a team that held
nothing for part of the period is charged nothing for it. Cost is allocated GPU-hours per kind
times ``gpuaas:gpu_kind:price_per_hour`` (``observability.prices``); a team holding an unpriced
kind shows ``-``. Exit 0 with the table, 1 when Prometheus cannot be reached or answers an error.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
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


def query(url: str, expr: str, at: datetime, timeout: float = 30) -> list[dict[str, Any]]:
    """An instant query; raises :class:`PrometheusError` naming the URL and the reason."""
    body = urllib.parse.urlencode({"query": expr, "time": f"{at.timestamp():.3f}"}).encode()
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query", data=body, timeout=timeout) as resp:
            doc = json.load(resp)
    except urllib.error.HTTPError as e:
        try:
            reason = json.load(e).get("error", e.reason)
        except ValueError:
            reason = e.reason
        raise PrometheusError(f"Prometheus at {url} refused the query ({e.code}): {reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PrometheusError(f"cannot reach Prometheus at {url}: {reason}") from None
    except ValueError:
        raise PrometheusError(f"Prometheus at {url} answered something that is not JSON") from None
    if doc.get("status") != "success":
        raise PrometheusError(f"Prometheus at {url} answered an error: {doc.get('error')}")
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def _by_team(result: list[dict[str, Any]]) -> dict[str, float]:
    return {s["metric"].get("team", ""): float(s["value"][1]) for s in result}


def showback(url: str, start: datetime, end: datetime, say: Any = None) -> list[Row]:
    """The table rows, sorted by team."""
    seconds = int((end - start).total_seconds())
    if seconds <= 0:
        raise PrometheusError(f"--to ({end.isoformat()}) must be after --from ({start.isoformat()})")
    window = f"{seconds}s"
    step = query(url, r.STEP, end)
    if not step:
        raise PrometheusError(
            f"Prometheus at {url} has no {r.STEP}: the gpuaas PrometheusRules are not loaded (observability.enabled)"
        )
    hours_per_sample = float(step[0]["value"][1]) / 3600

    def hours(series: str) -> dict[str, float]:
        if say:
            say(f"showback: {series} over {window} ...")
        expr = f"sum by (team) (sum_over_time({series}[{window}])) * {hours_per_sample!r}"
        return _by_team(query(url, expr, end))

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
    for s in query(url, priced, end):
        cost[s["metric"].get("team", "")] += float(s["value"][1])
        currency = s["metric"].get("currency", currency)
    # Kinds a team held with no price: its cost is unknown, not lower.
    unpriced = f"sum by (team) (sum_over_time({r.TEAM_KIND_ALLOCATED}[{window}]) unless on (node_group, resource) {r.KIND_PRICE})"  # noqa: E501
    unknown = {s["metric"].get("team", "") for s in query(url, unpriced, end) if float(s["value"][1]) > 0}
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
    cost = "-" if row.cost is None else f"{row.cost:.2f} {row.currency}".strip()
    return [row.team, *(f"{v:.2f}" for v in (row.allocated, row.used, row.borrowed, row.lent)), cost]


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
        cells = _cells(row)
        w.writerow(
            [*cells[:5], "" if row.cost is None else f"{row.cost:.2f}", row.currency if row.cost is not None else ""]
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
    args = ap.parse_args(argv)
    try:
        rows = showback(args.prometheus, args.start, args.end, say=lambda m: print(m, file=sys.stderr, flush=True))
    except PrometheusError as e:
        print(f"showback: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(render_csv(rows) if args.csv else render_table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
