"""HAMi's rules, table-driven on the HAMi variant stack: each refusal beside the allowed twin it differs from.

A row is ``(id, refused edits, key, fragment of the reason, allowed edits)``; the allowed edits
start from the same stack and change only what the rule is about (``[]``: the stack as it is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.loader import parse_config
from components.model import hami
from components.model.errors import ConfigError
from tests.conftest import raw_stack
from tests.hami_cases import hami_raw

Raw = dict[str, Any]
Edit = Callable[[Raw], None]
#: The HAMi group of the variant stack and the teams with HAMi quota.
G = "platform.nodeGroups[1]"
INFERENCE, QA = 4, 5


def group(**fields: Any) -> Edit:
    return lambda raw: raw["platform"]["nodeGroups"][1].update(fields)


def hami_setting(**fields: Any) -> Edit:
    return lambda raw: raw["platform"]["nodeGroups"][1]["hami"].update(fields)


def version(v: str | None) -> Edit:
    def edit(raw: Raw) -> None:
        if v is None:
            raw["platform"].pop("kubernetesVersion", None)
        else:
            raw["platform"]["kubernetesVersion"] = v

    return edit


def second_hami_group(**settings: Any) -> Edit:
    """A second HAMi group (and a node for it), with ``settings`` beside the first group's."""

    def edit(raw: Raw) -> None:
        raw["platform"]["nodeGroups"].append(
            {"name": "h100-hami-b", "gpuModel": "H100-80GB", "hami": {"splitCount": 10, **settings}}
        )
        raw["platform"]["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-hami-b"})

    return edit


def quota(team: int, **fields: Any) -> Edit:
    return lambda raw: raw["teams"][team]["quota"]["hami"].update(fields)


def hard(raw: Raw) -> None:
    raw["queues"]["elastic"] = False


def lending(team: int, **fields: Any) -> Edit:
    return lambda raw: (
        raw["teams"][team].setdefault("queue", {}).setdefault("lendingLimit", {}).update({"hami": fields})
    )


def resource_model(model: str) -> Edit:
    return lambda raw: raw.setdefault("gpuOperator", {}).__setitem__("resourceModel", model)


CASES: list[tuple[str, list[Edit], str, str, list[Edit]]] = [
    (
        "hami-with-mig",
        [group(mig={"layout": "all-1g.10gb"})],
        f"gpuaas:{G}.mig.layout",
        "a node is either HAMi's or MIG's",
        [group(mig={"layout": "all-disabled"})],
    ),
    (
        "hami-with-mig-profiles",
        [group(mig={"profiles": {"1g.10gb": 7}})],
        f"gpuaas:{G}.mig.profiles",
        "HAMi #2564",
        [],
    ),
    (
        "hami-with-time-slicing",
        [group(timeSlicing={"replicas": 2})],
        f"gpuaas:{G}.timeSlicing",
        "HAMi's device plugin replaces NVIDIA's",
        [],
    ),
    (
        "hami-with-dra-model",
        [resource_model("dra")],
        f"gpuaas:{G}.hami",
        "HAMi advises against its device-plugin mode and a DRA model in one cluster",
        [resource_model("devicePlugin")],
    ),
    (
        "dra-driver-beside-device-plugin",
        [second_hami_group(driver="dra")],
        "gpuaas:platform.nodeGroups[3].hami.driver",
        "while another HAMi node group uses HAMi's device plugin",
        [second_hami_group(driver="devicePlugin")],
    ),
    (
        "dra-driver-below-1.36",
        [hami_setting(driver="dra"), version("1.35.4")],
        f"gpuaas:{G}.hami.driver",
        "DRAConsumableCapacity (KEP-5075), alpha and off before 1.36",
        [hami_setting(driver="devicePlugin"), version("1.35.4")],
    ),
    (
        "dra-driver-without-version",
        [hami_setting(driver="dra"), version(None)],
        f"gpuaas:{G}.hami.driver",
        "dra needs the cluster's Kubernetes version",
        [hami_setting(driver="dra"), version("1.36.0")],  # refused too, but as a preview (below)
    ),
    (
        "no-declared-version",
        [version(None)],
        "gpuaas:platform.kubernetesVersion",
        "is required with a HAMi node group",
        [version("1.35.4")],
    ),
    (
        "version-without-patch",
        [version("1.37")],
        "gpuaas:platform.kubernetesVersion",
        "declare the patch too",
        [version("1.37.2")],
    ),
    (
        "split-count-differs",
        [second_hami_group(splitCount=4)],
        "gpuaas:platform.nodeGroups[3].hami.splitCount",
        "HAMi's chart sets it once for the cluster",
        [second_hami_group(splitCount=10)],
    ),
    (
        "core-policy-differs",
        [second_hami_group(corePolicy="force")],
        "gpuaas:platform.nodeGroups[3].hami.corePolicy",
        "use one value",
        [second_hami_group(corePolicy="default")],
    ),
    (
        "memory-scaling-differs",
        [second_hami_group(memoryScaling=0.9)],
        "gpuaas:platform.nodeGroups[3].hami.memoryScaling",
        "use one value",
        [second_hami_group(memoryScaling=1.0)],
    ),
    (
        "oversubscription",
        [hami_setting(memoryScaling=1.5)],
        f"gpuaas:{G}.hami.memoryScaling",
        "experimental memory oversubscription",
        [hami_setting(memoryScaling=0.9)],
    ),
    (
        "no-slices",
        [hami_setting(splitCount=0)],
        f"gpuaas:{G}.hami.splitCount",
        "1 to 110 slices",
        [hami_setting(splitCount=6)],  # 48 slices on the node: what the teams are guaranteed
    ),
    (
        "more-slices-than-pods",
        [hami_setting(splitCount=111)],
        f"gpuaas:{G}.hami.splitCount",
        "a node runs at most 110 pods",
        [hami_setting(splitCount=110)],
    ),
    (
        "slices-without-memory",
        [quota(INFERENCE, memory="0")],
        f"gpuaas:teams[{INFERENCE}].quota.hami.memory",
        "a quota of none admits no slice",
        [quota(INFERENCE, memory="1Gi")],
    ),
    (
        "memory-without-slices",
        [quota(QA, gpus=0, cores=0)],
        f"gpuaas:teams[{QA}].quota.hami.gpus",
        "give a slice count",
        [quota(QA, gpus=1, cores=0)],
    ),
    (
        "memory-not-whole-mib",
        [quota(INFERENCE, memory="1500Ki")],
        f"gpuaas:teams[{INFERENCE}].quota.hami.memory",
        "not a whole number of MiB",
        [quota(INFERENCE, memory="1024Ki")],
    ),
    (
        "more-cores-than-slices-hold",
        [quota(QA, cores=801), quota(INFERENCE, cores=0)],
        f"gpuaas:teams[{QA}].quota.hami.cores",
        "8 slices hold at most 800",
        [quota(QA, cores=800), quota(INFERENCE, cores=0)],
    ),
    (
        "slices-beyond-the-fleet",
        [hard, quota(INFERENCE, gpus=73)],
        "gpuaas:teams[*].quota.hami.gpus",
        "the fleet has 80",
        [hard, quota(INFERENCE, gpus=72)],
    ),
    (
        "memory-beyond-the-fleet",
        [hard, quota(INFERENCE, memory="561Gi")],
        "gpuaas:teams[*].quota.hami.memory",
        "nvidia.com/vgpu-memory",
        [hard, quota(INFERENCE, memory="560Gi")],
    ),
    (
        "guaranteed-beyond-the-group",
        [quota(INFERENCE, gpus=73)],
        "gpuaas:teams[*].quota.hami.gpus",
        "in node group 'h100-hami'",
        [quota(INFERENCE, gpus=72)],
    ),
    (
        "lends-more-than-it-has",
        [lending(INFERENCE, gpus=41)],
        f"gpuaas:teams[{INFERENCE}].queue.lendingLimit.hami.gpus",
        "above the team's quota of 40 nvidia.com/vgpu",
        [lending(INFERENCE, gpus=40)],
    ),
    (
        "lends-more-memory-than-it-has",
        [lending(INFERENCE, memory="401Gi")],
        f"gpuaas:teams[{INFERENCE}].queue.lendingLimit.hami.memory",
        "above the team's quota of 409600 nvidia.com/vgpu-memory",
        [lending(INFERENCE, memory="400Gi")],
    ),
]


def issues(raw: Raw) -> list[str]:
    try:
        parse_config(raw)
    except ConfigError as err:
        return [str(i) for i in err.issues]
    return []


def edited(edits: list[Edit]) -> Raw:
    raw = hami_raw()
    for e in edits:
        e(raw)
    return raw


@pytest.mark.parametrize(("refuse", "key", "why", "allow"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_refusal_names_its_key_and_its_twin_passes_that_rule(
    refuse: list[Edit], key: str, why: str, allow: list[Edit]
) -> None:
    found = issues(edited(refuse))
    assert any(i.startswith(key + " ") or i.startswith(key + ":") for i in found if why in i), (key, why, found)
    # The twin: nothing about this key with this reason (the dra-on-1.36 twin is refused as a preview).
    assert not [i for i in issues(edited(allow)) if why in i], issues(edited(allow))


def test_the_variant_stack_parses_and_has_a_hami_group() -> None:
    cfg = parse_config(hami_raw())
    assert [name for _w, name, _h, _m in hami.hami_groups(cfg)] == ["h100-hami"]
    assert hami.uses_hami(cfg)


def test_every_twin_but_the_dra_preview_parses_whole() -> None:
    for name, _refuse, _key, _why, allow in CASES:
        if name == "dra-driver-without-version":
            continue
        assert issues(edited(allow)) == [], name


def test_hami_dra_driver_from_1_36_is_a_preview_gpuaas_does_not_deploy() -> None:
    """At 1.36 the version refusal is gone; what remains says the driver is a preview (README)."""
    for v in ("1.36.0", "1.37.2"):
        found = issues(edited([hami_setting(driver="dra"), version(v)]))
        driver = [i for i in found if i.startswith(f"gpuaas:{G}.hami.driver")]
        assert len(driver) == 1 and "preview gpuaas does not deploy yet" in driver[0], found
        assert not [i for i in found if "DRAConsumableCapacity" in i], found
        # Its teams' HAMi quotas have no device plugin to run on then, and say so.
        assert f"gpuaas:teams[{INFERENCE}].quota.hami" in "\n".join(found)


def test_hami_quota_without_a_hami_group_is_refused() -> None:
    raw = raw_stack("onprem")
    raw["teams"][4]["quota"] = {"hami": {"gpus": 1, "memory": "1Gi"}, "rdma": 8}
    assert "gpuaas:teams[4].quota.hami" in "\n".join(issues(raw))
    raw["teams"][4]["quota"] = {"timeSlicedGpus": 1, "rdma": 8}
    assert issues(raw) == []


def test_an_aks_pool_may_be_a_hami_pool_and_may_not_set_hamis_labels() -> None:
    raw = raw_stack("aks")
    raw["platform"]["gpuPools"].append({"name": "ndhami", "vmSize": "Standard_ND96isr_H100_v5", "hami": {}})
    pool = raw["platform"]["gpuPools"][-1]
    assert any(i.startswith("gpuaas:platform.gpuPools[2].minCount") and "fixed size" in i for i in issues(raw))
    pool.update(minCount=2, maxCount=2)
    assert issues(raw) == [], "AKS declares its version (default 1.36.3) and taints its pools"
    pool["labels"] = {"gpu": "on"}
    assert any(i.startswith('gpuaas:platform.gpuPools[2].labels["gpu"]') for i in issues(raw)), issues(raw)
