"""The DRA model with elastic quotas (item 5): what a team may claim is one answer everywhere.

The DRA variant stack (tests/stacks/onprem-dra.yaml) with ``queues.elastic: true``. Its fleet:
h100-full 4 nodes x 8 GPUs = 32 whole GPUs; h100-mig 1 node x 8 GPUs x (1 x 4g.40gb + 3 x
1g.10gb) = 8 x 4g.40gb and 24 x 1g.10gb; h100-small 1 node x 8 GPUs x 7 x 1g.10gb = 56 x 1g.10gb.
So every team's queue may borrow up to 32 GPUs, 80 x 1g.10gb and 8 x 4g.40gb unless a
``borrowingLimit`` says less, and the namespace labels the claims policy reads, the ResourceQuota
and the claim templates must all say the same (before this, the labels said "nominal only").
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import pytest

from components.dra import claims
from components.loader import gpuaas_section, parse_config
from components.model import dra
from components.model.config import StackConfig
from components.plan.offline import ROOT, stack_config
from components.plan.writer import write_plan
from components.tenancy import quotas
from tests import kueue_objects, tenancy_objects
from tests.dra.test_dra import CHECKS, CLAIMS, claim, exactly

DRA_STACK: Final = ROOT / "tests" / "stacks" / "onprem-dra.yaml"
GPU: Final = dra.GPU_CLASS
SMALL: Final = dra.mig_class("1g.10gb")
BIG: Final = dra.mig_class("4g.40gb")
#: The fleet's numbers (module docstring), written out rather than computed by the code under test.
EVERY_CLASS: Final = {GPU: 32, SMALL: 80, BIG: 8}


def raw(**vision_queue: Any) -> dict[str, Any]:
    out = copy.deepcopy(gpuaas_section(stack_config("onprem", DRA_STACK)))
    out["queues"] = {"elastic": True}
    if vision_queue:
        out["teams"][0]["queue"] = vision_queue
    return out


def cfg_of(**vision_queue: Any) -> StackConfig:
    return parse_config(raw(**vision_queue))


def labelled(cfg: StackConfig, team: str) -> set[str]:
    t = next(t for t in cfg.teams if t.name == team)
    labels = tenancy_objects.namespace(cfg, t)["metadata"]["labels"]
    return {
        k.removeprefix(dra.CLASS_LABEL_PREFIX)
        for k, v in labels.items()
        if k.startswith(dra.CLASS_LABEL_PREFIX) and v == "true"
    }


def quota_devices(cfg: StackConfig, team: str) -> dict[str, int]:
    t = next(t for t in cfg.teams if t.name == team)
    hard = quotas.quota_hard(cfg, t)
    return {c: int(hard[dra.device_quota_key(c)]) for c in (GPU, SMALL, BIG) if int(hard[dra.device_quota_key(c)])}


def queue_can_hold(cfg: StackConfig, team: str) -> dict[str, int]:
    """Per class, what the team's ClusterQueue lets it hold: nominal + borrowing limit (or the flavor's
    capacity when it has none), summed over flavors — read off the rendered ClusterQueue."""
    t = next(t for t in cfg.teams if t.name == team)
    cq = kueue_objects.cluster_queue(cfg, t)
    capacity = {("h100-full", "nvidia.com/gpu"): 32, ("h100-mig", "nvidia.com/mig-1g.10gb"): 24,
                ("h100-small", "nvidia.com/mig-1g.10gb"): 56, ("h100-mig", "nvidia.com/mig-4g.40gb"): 8}  # fmt: skip
    out: dict[str, int] = {}
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                cls = dra.device_class_for(r["name"])
                if cls is None:
                    continue
                cap = capacity.get((flavor["name"], r["name"]), 0)
                nominal = int(r["nominalQuota"])
                most = nominal + (int(r["borrowingLimit"]) if "borrowingLimit" in r else cap - nominal)
                out[cls] = out.get(cls, 0) + min(most, cap)
    return {c: n for c, n in out.items() if n}


@pytest.mark.parametrize("team", ["vision", "language", "speech", "research", "inference", "platform-qa"])
def test_labels_quota_and_queue_agree(team: str) -> None:
    cfg = cfg_of()
    assert quota_devices(cfg, team) == EVERY_CLASS
    assert queue_can_hold(cfg, team) == EVERY_CLASS
    assert labelled(cfg, team) == set(EVERY_CLASS)


def test_the_reviews_case_vision_may_claim_the_mig_devices_it_may_borrow() -> None:
    """vision's quota allowed 80 mig-1g.10gb devices while the claims policy refused every MIG class."""
    cfg = cfg_of()
    vision = next(t for t in cfg.teams if t.name == "vision")
    labels = tenancy_objects.namespace(cfg, vision)["metadata"]["labels"]
    assert labels[f"{dra.CLASS_LABEL_PREFIX}{SMALL}"] == "true"
    assert [
        n
        for n, ok in zip(CHECKS, CLAIMS.evaluate(claim(exactly(SMALL)), labels, "resourceclaims"), strict=True)
        if not ok
    ] == []
    assert sorted(claims.claim_templates(cfg, vision)) == ["gpuaas-gpu", "gpuaas-mig-1g.10gb", "gpuaas-mig-4g.40gb"]


def test_a_class_the_queue_may_not_borrow_is_neither_labelled_nor_quotaed() -> None:
    cfg = cfg_of(borrowingLimit={"mig": {"1g.10gb": 0, "4g.40gb": 2}})
    assert labelled(cfg, "vision") == {GPU, BIG}
    assert quota_devices(cfg, "vision") == {GPU: 32, BIG: 2}
    assert queue_can_hold(cfg, "vision") == {GPU: 32, BIG: 2}
    vision = next(t for t in cfg.teams if t.name == "vision")
    labels = tenancy_objects.namespace(cfg, vision)["metadata"]["labels"]
    assert [
        n
        for n, ok in zip(CHECKS, CLAIMS.evaluate(claim(exactly(SMALL)), labels, "resourceclaims"), strict=True)
        if not ok
    ] == ["device-class"]
    assert "gpuaas-mig-1g.10gb" not in claims.claim_templates(cfg, vision)
    # the other teams keep theirs: one team's limit is its own
    assert labelled(cfg, "language") == set(EVERY_CLASS)


def test_without_elastic_quotas_the_labels_stay_the_quota() -> None:
    plain = parse_config(gpuaas_section(stack_config("onprem", DRA_STACK)))
    assert labelled(plain, "vision") == {GPU}
    assert labelled(plain, "research") == {SMALL, BIG}
    assert quota_devices(plain, "research") == {SMALL: 12, BIG: 4}


def test_the_summary_says_guaranteed_and_at_most(tmp_path: Path) -> None:
    stack_file = tmp_path / "dra-elastic.yaml"
    import yaml

    doc = yaml.safe_load(DRA_STACK.read_text())
    doc["config"]["gpuaas:queues"] = {"elastic": True}
    stack_file.write_text(yaml.safe_dump(doc))
    _run, summary = write_plan("onprem", tmp_path / "plan", stack_file=stack_file)
    line = next(ln for ln in summary.splitlines() if ln.startswith("research ") and "gpuaas-" in ln)
    assert "gpuaas-mig-1g.10gb (mig-1g.10gb.gpuaas.io) 12 guaranteed, up to 80" in line, line
    assert "gpuaas-mig-4g.40gb (mig-4g.40gb.gpuaas.io) 4 guaranteed, up to 8" in line, line
    assert "gpuaas-gpu (gpu.nvidia.com) 0 guaranteed, up to 32" in line, line
    assert "elastic: guaranteed, and at most with what the team may borrow" in summary
