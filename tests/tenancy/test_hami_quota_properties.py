"""One team quota, matching renderings: the ResourceQuota, the Kueue queue and HAMi count the same slices.

For any ``quota.hami`` a team may hold, the ResourceQuota (both enforcers' keys) and the team's
ClusterQueue nominal quota render the same numbers; and for any pod, what Kueue counts through the
rendered transformations (Kueue v0.19.2 ``applyResourceTransformations``, re-implemented here from
its source) is what HAMi's quota counts (pkg/device/quota.go: memory and cores of each container
times its slices) — exactly for one GPU container, never less for several.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components import platform_args
from components.loader import parse_config
from components.model import hami, resources
from components.queueing.queues import kueue_configuration
from components.tenancy.quotas import quota_hard
from tests import kueue_objects
from tests.hami_cases import hami_raw

INFERENCE = 4
MIB = 2**20


def _cfg(gpus: int, memory_gib: int, cores: int, elastic: bool) -> Any:
    raw = hami_raw()
    raw["queues"]["elastic"] = elastic
    raw["teams"][INFERENCE]["quota"]["hami"] = {"gpus": gpus, "memory": f"{memory_gib}Gi", "cores": cores}
    raw["teams"][5]["quota"].pop("hami")  # inference alone holds slices: any amount up to the group fits
    return parse_config(raw)


quotas = st.integers(1, 80).flatmap(
    lambda g: st.tuples(st.just(g), st.integers(1, 640), st.integers(0, min(g * 100, 800)))
)


@settings(max_examples=25, deadline=None)
@given(quotas)
def test_the_resource_quota_has_the_same_numbers_for_both_enforcers(q: tuple[int, int, int]) -> None:
    gpus, memory_gib, cores = q
    cfg = _cfg(gpus, memory_gib, cores, elastic=False)
    hard = quota_hard(cfg, cfg.teams[INFERENCE])
    mem = str(memory_gib * 1024)
    assert hard[f"requests.{resources.HAMI_GPU}"] == str(gpus)
    assert hard[f"requests.{resources.HAMI_MEMORY}"] == hard[f"limits.{resources.HAMI_MEMORY}"] == mem
    assert hard[f"requests.{resources.HAMI_CORES}"] == hard[f"limits.{resources.HAMI_CORES}"] == str(cores)
    assert hard[f"requests.{resources.HAMI_MEMORY_PERCENTAGE}"] == "0"
    assert f"limits.{resources.HAMI_GPU}" not in hard  # HAMi does not read it; the count is requests.*


@settings(max_examples=25, deadline=None)
@given(quotas)
def test_the_team_queue_guarantees_what_the_quota_says(q: tuple[int, int, int]) -> None:
    gpus, memory_gib, cores = q
    cfg = _cfg(gpus, memory_gib, cores, elastic=True)
    team = cfg.teams[INFERENCE]
    nominal: dict[str, Decimal] = {}
    for group in kueue_objects.cluster_queue(cfg, team)["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] in resources.HAMI_RESOURCES:
                    nominal[r["name"]] = nominal.get(r["name"], Decimal(0)) + Decimal(r["nominalQuota"])
    want = {resources.HAMI_GPU: gpus, resources.HAMI_MEMORY: memory_gib * 1024, resources.HAMI_CORES: cores}
    assert {r: nominal.get(r, Decimal(0)) for r in want} == {r: Decimal(v) for r, v in want.items()}
    # The ResourceQuota lets through all Kueue can admit: at least the guarantee, for both enforcers.
    hard = quota_hard(cfg, team)
    for r, v in want.items():
        assert int(hard[f"requests.{r}"]) >= v
        if r != resources.HAMI_GPU:
            assert hard[f"limits.{r}"] == hard[f"requests.{r}"]


def kueue_count(pod_limits: list[dict[str, int]], transformations: list[dict[str, Any]]) -> dict[str, Decimal]:
    """What Kueue v0.19.2 counts for one pod (pkg/workload/workload.go): the pod's requests summed
    over its containers, then each transformation's input replaced by input x multiplyBy x output."""
    total: dict[str, Decimal] = {}
    for c in pod_limits:
        for r, v in c.items():
            total[r] = total.get(r, Decimal(0)) + v
    by_input = {t["input"]: t for t in transformations}
    retained: dict[str, Decimal] = {}
    generated: dict[str, Decimal] = {}
    for r, v in total.items():
        t = by_input.get(r)
        if t is None:
            retained[r] = v
            continue
        base = v * total[t["multiplyBy"]] if t.get("multiplyBy") in total else v
        for out, factor in t["outputs"].items():
            generated[out] = generated.get(out, Decimal(0)) + base * Decimal(factor)
        if t.get("strategy", "Retain") == "Retain":
            retained[r] = v
    return {r: retained.get(r, Decimal(0)) + generated.get(r, Decimal(0)) for r in {*retained, *generated}}


def hami_count(pod_limits: list[dict[str, int]]) -> dict[str, int]:
    """HAMi's own count (pkg/device/quota.go ``countPodDevices``): per device of each container."""
    out = {resources.HAMI_MEMORY: 0, resources.HAMI_CORES: 0}
    for c in pod_limits:
        n = c.get(resources.HAMI_GPU, 0)
        out[resources.HAMI_MEMORY] += n * c.get(resources.HAMI_MEMORY, 0)
        out[resources.HAMI_CORES] += n * c.get(resources.HAMI_CORES, 0)
    return out


containers = st.lists(
    st.fixed_dictionaries(
        {
            resources.HAMI_GPU: st.integers(1, 8),
            resources.HAMI_MEMORY: st.integers(1, 81920),
            resources.HAMI_CORES: st.integers(0, 100),
        }
    ),
    min_size=1,
    max_size=4,
)


TRANSFORMATIONS = kueue_configuration(platform_args.queues(_cfg(8, 80, 100, elastic=True)))["resources"][
    "transformations"
]


@settings(max_examples=200, deadline=None)
@given(containers)
def test_kueue_counts_what_hami_counts_and_never_less(pod: list[dict[str, int]]) -> None:
    transformations = TRANSFORMATIONS
    kueue, own = kueue_count(pod, transformations), hami_count(pod)
    for r in hami.PER_SLICE:
        if len(pod) == 1:
            assert kueue[r] == own[r]
        assert kueue[r] >= own[r]
    assert kueue[resources.HAMI_GPU] == sum(c[resources.HAMI_GPU] for c in pod)
