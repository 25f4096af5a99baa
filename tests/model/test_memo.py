"""Per-config memos (issue #21, item 14): computed once per config, never shared across configs or callers."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from components.loader import parse_config
from components.model import capacity, elastic
from components.model.memo import per_config_copied
from tests.conftest import raw_stack


def test_a_memo_is_per_config_object_and_copies_out() -> None:
    calls: list[int] = []

    @per_config_copied(dict)
    def f(cfg: Any) -> dict[str, int]:
        calls.append(id(cfg))
        return {"n": len(cfg)}

    a, b = [1, 2], [1, 2, 3]
    assert f(a) == {"n": 2} and f(a) == {"n": 2} and len(calls) == 1
    f(a)["n"] = 99  # a caller's copy: the next caller still sees the value
    assert f(a) == {"n": 2}
    assert f(b) == {"n": 3} and len(calls) == 2  # another config, equal or not, is its own entry


def test_node_counts_follow_a_new_config() -> None:
    raw = raw_stack("onprem")
    before = capacity.node_counts(parse_config(raw))
    raw["platform"]["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-full"})
    after = capacity.node_counts(parse_config(raw))
    assert after["h100-full"] == before["h100-full"] + 1


def _naive_rows(cfg: Any, team: Any) -> list[tuple[str, str, Any, Decimal]]:
    """``team_rows`` as it was: every other team of the cohort summed per team (quadratic)."""
    ceiling = elastic.borrowable(cfg, team)
    lent: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for other in cfg.teams:
        if other.name != team.name and elastic.cohort(cfg, other) == elastic.cohort(cfg, team):
            for flavor, lines in elastic.team_lines(cfg, other).items():
                for res, line in lines.items():
                    lent[(flavor, res)] += elastic.lendable(line)
    out = []
    for flavor, lines in elastic.team_lines(cfg, team).items():
        for res, line in lines.items():
            can = min(ceiling[flavor][res], lent[(flavor, res)])
            if line.nominal or can:
                out.append((flavor, res, line, can))
    return out


def test_team_rows_are_what_the_quadratic_sum_gave() -> None:
    raw = raw_stack("onprem")
    raw["teams"][2]["queue"] = {"cohort": "other", "lendingLimit": {"gpus": 3}}
    raw["teams"][1]["queue"] = {"borrowingLimit": {"gpus": 2, "memory": "100Gi"}, "lendingLimit": {"gpus": 5}}
    raw["teams"].append({"name": "robotics", "groups": ["oidc:r"], "quota": {"cpu": "8"}, "queue": {"cohort": "other"}})
    cfg = parse_config(raw)
    for team in cfg.teams:
        assert elastic.team_rows(cfg, team) == _naive_rows(cfg, team), team.name
