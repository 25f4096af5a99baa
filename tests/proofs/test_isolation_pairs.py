"""The default isolation probes are kept or dropped by their two ends alone.

A reviewer of "add team X" must see X's probes and nothing else: a pairing that chooses one server
per client (the next partition by name) re-paired ``llm→vision`` into ``llm→speech`` when ``speech``
arrived, deleting and recreating three objects in two namespaces per moved pair.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.loader import parse_config
from components.model.config import StackConfig
from components.proofs import isolation
from tests.conftest import raw_stack

ONPREM = raw_stack("onprem")
#: DNS labels that sort anywhere among the sample teams' names (before, between, after).
NEW_NAMES = st.sampled_from(["aaa", "jazz", "llm", "query", "sales", "tabular", "zeta"])


def _probe_objects(cfg: StackConfig) -> dict[tuple[str, str], str]:
    """Each default probe, by (client, server), with its objects as the plan would send them."""
    return {
        (p.client.key, p.server.key): json.dumps(isolation.probe_manifests(cfg, p), sort_keys=True)
        for p in isolation.isolation_probes(cfg)
    }


def _onprem(keep: list[bool], verify: list[bool]) -> dict[str, Any]:
    raw = copy.deepcopy(ONPREM)
    raw["platform"]["fabric"]["vfsPerHca"] = 8  # room for one more partition's VF
    teams = [t for t, k in zip(raw["teams"], keep, strict=True) if k]
    for t, v in zip(teams, verify, strict=False):
        t["verify"] = v
    raw["teams"] = teams
    return raw


def _new_team(name: str, verify: bool, rdma: int, partition: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "groups": [f"oidc:{name}"], "partition": partition, "quota": {"rdma": rdma}} | (
        {"verify": True} if verify else {}
    )


def _only_theirs(before: dict[tuple[str, str], str], after: dict[tuple[str, str], str], new: str) -> None:
    others = {pair: objs for pair, objs in after.items() if new not in pair}
    assert others == before, "adding a team changed probes that do not involve it"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keep=st.lists(st.booleans(), min_size=6, max_size=6),
    verify=st.lists(st.booleans(), min_size=6, max_size=6),
    name=NEW_NAMES,
    new_verifies=st.booleans(),
    rdma=st.sampled_from([0, 4]),
    at=st.integers(min_value=0, max_value=6),
)
def test_inserting_an_onprem_team_anywhere_changes_only_its_own_probes(
    keep: list[bool], verify: list[bool], name: str, new_verifies: bool, rdma: int, at: int
) -> None:
    raw = _onprem(keep, verify)
    before = _probe_objects(parse_config(raw))
    raw["teams"].insert(
        min(at, len(raw["teams"])), _new_team(name, new_verifies, rdma, {"pkey": "0x0007", "vfIndex": 6})
    )
    after = _probe_objects(parse_config(raw))
    _only_theirs(before, after, name)
    # Its twin: the new team is probed when it can be (a verifying team in another partition exists,
    # and its quota admits the server pod), and probes the others when it verifies.
    clients = {t["name"] for t in raw["teams"] if t.get("verify") and t["name"] != name}
    if rdma and clients:
        assert {(c, name) for c in clients} <= set(after)
    if new_verifies and len(raw["teams"]) > 1:
        assert any(pair[0] == name for pair in after)


def test_removing_a_team_drops_only_its_probes() -> None:
    raw = copy.deepcopy(ONPREM)
    before = _probe_objects(parse_config(raw))
    raw["teams"] = [t for t in raw["teams"] if t["name"] != "research"]
    after = _probe_objects(parse_config(raw))
    assert after == {pair: objs for pair, objs in before.items() if "research" not in pair}
    assert len(after) == len(before) - 1
