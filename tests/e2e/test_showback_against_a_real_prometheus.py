"""The showback command against a real Prometheus (built from the same module) over synthetic TSDB blocks.

The blocks hold a synthetic day of the series the rules record (what
tests/e2e/test_rules_hold_on_synthetic_series.py proves the rules write from raw series), made
with ``promtool tsdb create-blocks-from openmetrics``. The expected table is computed by hand.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from components.observability import rules as r
from tests.conftest import ROOT
from tests.e2e.prometheus import prometheus, promtool

START = datetime(2026, 12, 1, tzinfo=UTC)
T0 = int(START.timestamp())
DAY = 1440


def family(name: str, series: list[tuple[str, float, int, int]]) -> list[str]:
    """OpenMetrics lines of one gauge: (labels, value, first minute, last minute), one sample a minute."""
    out = [f"# TYPE {name} gauge"]
    for labels, value, first, last in series:
        out += [f"{name}{{{labels}}} {value} {T0 + 60 * m}" for m in range(first, last + 1)]
    return out


def synthetic_day() -> str:
    mig = 'node_group="h100-mig",resource="nvidia_com_mig_{}",kube_resource="nvidia.com/mig-{}",profile="{}"'
    lines = [
        *family(r.STEP, [("", 60, 0, DAY)]),
        *family(
            r.TEAM_ALLOCATED,
            [
                ('team="vision",node_group="h100-full"', 4, 1, 360),
                ('team="research",node_group="h100-mig"', 0.875, 1, 720),
                ('team="inference",node_group="h100-shared"', 1, 1, DAY),
            ],
        ),
        *family(
            r.TEAM_USED,
            [
                ('team="vision",node_group="h100-full"', 2, 1, 360),
                ('team="research",node_group="h100-mig"', 0.625, 1, 720),
            ],
        ),
        *family(r.TEAM_BORROWED, [('team="vision",node_group="h100-full"', 4, 1, 720)]),
        *family(r.TEAM_LENT, [('team="language",node_group="h100-full"', 3, 1, 720)]),
        *family(
            r.TEAM_KIND_ALLOCATED,
            [
                ('team="vision",node_group="h100-full",resource="nvidia_com_gpu"', 4, 1, 360),
                ('team="research",node_group="h100-mig",resource="nvidia_com_mig_1g_10gb"', 3, 1, 720),
                ('team="research",node_group="h100-mig",resource="nvidia_com_mig_4g_40gb"', 1, 1, 720),
                ('team="inference",node_group="h100-shared",resource="nvidia_com_gpu_shared"', 2, 1, DAY),
            ],
        ),
        # Prices: a whole H100 2.50/h, a 1g.10gb 0.40/h, a 4g.40gb 0.5 x 2.50 = 1.25/h; shares unpriced.
        *family(
            r.KIND_PRICE,
            [
                ('node_group="h100-full",resource="nvidia_com_gpu",currency="USD"', 2.5, 0, DAY),
                (mig.format("1g_10gb", "1g.10gb", "1g.10gb") + ',currency="USD"', 0.4, 0, DAY),
                (mig.format("4g_40gb", "4g.40gb", "4g.40gb") + ',currency="USD"', 1.25, 0, DAY),
            ],
        ),
        "# EOF",
    ]
    return "\n".join(lines) + "\n"


# By hand: vision 4 GPUs x 6 h = 24 allocated, 2 x 6 = 12 used, 4 x 12 h = 48 borrowed, cost
# 4 x 2.50 x 6 = 60; research 0.875 x 12 = 10.5 allocated, 0.625 x 12 = 7.5 used, cost
# 3 x 0.40 x 12 + 1 x 1.25 x 12 = 29.40; inference 1 x 24 = 24 allocated, its shares unpriced;
# language lent 3 x 12 = 36 and held nothing.
EXPECTED_TABLE = """\
team       allocated GPU-h  used GPU-h  borrowed GPU-h  lent GPU-h       cost
inference            24.00        0.00            0.00        0.00          -
language              0.00        0.00            0.00       36.00   0.00 USD
research             10.50        7.50            0.00        0.00  29.40 USD
vision               24.00       12.00           48.00        0.00  60.00 USD
"""
EXPECTED_CSV = """\
team,gpu_hours_allocated,gpu_hours_used,gpu_hours_borrowed,gpu_hours_lent,cost,currency
inference,24.00,0.00,0.00,0.00,,
language,0.00,0.00,0.00,36.00,0.00,USD
research,10.50,7.50,0.00,0.00,29.40,USD
vision,24.00,12.00,48.00,0.00,60.00,USD
"""


def showback(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "components.observability.showback", "--prometheus", url]
    cmd += ["--from", "2026-12-01T00:00:00Z", "--to", "2026-12-02T00:00:00Z", *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_showback_prints_the_hand_computed_table(tmp_path: Path) -> None:
    (tmp_path / "day.om").write_text(synthetic_day())
    data = tmp_path / "data"
    res = promtool("tsdb", "create-blocks-from", "openmetrics", str(tmp_path / "day.om"), str(data))
    assert res.returncode == 0, res.stdout + res.stderr
    with prometheus(data) as url:
        table = showback(url)
        assert table.returncode == 0, table.stderr
        assert table.stdout == EXPECTED_TABLE
        assert "showback: gpuaas:team_node_group:gpu_equivalents_allocated over 86400s" in table.stderr
        as_csv = showback(url, "--csv")
        assert as_csv.returncode == 0, as_csv.stderr
        assert as_csv.stdout == EXPECTED_CSV
        # The same Prometheus, a period before the rules wrote anything: refused, naming why.
        early = subprocess.run(
            [
                sys.executable,
                "-m",
                "components.observability.showback",
                "--prometheus",
                url,
                "--from",
                "2026-11-01",
                "--to",
                "2026-11-02",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert early.returncode == 1
        assert "has no gpuaas:rules:evaluation_interval_seconds" in early.stderr
