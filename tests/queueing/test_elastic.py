"""Elastic team quotas: the config rules (table-driven, each refusal beside its allowed twin), the
amounts per flavor, the ResourceQuota ceilings, the Kueue objects against the v0.19.2 CRDs, the
Helm values against the chart, and that elasticity off changes nothing."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import platform_args
from components.loader import parse_config
from components.model import elastic, grammar, resources
from components.model.errors import ConfigError
from components.plan.offline import run_program
from components.proofs import isolation
from components.queueing import admission, queues
from components.tenancy import quotas
from tests import kueue_objects
from tests.conftest import fixture_config, qualified, raw_stack
from tests.schema_helpers import assert_value_paths_exist, crd_errors, validate_against_crd

Edit = Callable[[dict[str, Any]], None]
KUEUE_CRDS = ("kueue", "v0.19.2", "crds")


def elastic_raw(stack: str) -> dict[str, Any]:
    raw = raw_stack(stack)
    raw.setdefault("queues", {})["elastic"] = True
    return raw


def _issues(raw: dict[str, Any]) -> list[str]:
    try:
        parse_config(raw)
    except ConfigError as e:
        return [i.path for i in e.issues]
    return []


def _team(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in raw["teams"] if t["name"] == name)


def _queue(name: str, **queue: Any) -> Edit:
    return lambda raw: _team(raw, name).setdefault("queue", {}).update(queue)


def _quota(name: str, **quota: Any) -> Edit:
    return lambda raw: _team(raw, name)["quota"].update(quota)


def _extra_group(raw: dict[str, Any]) -> None:
    """A second whole-GPU node group (one node, 8 GPUs) beside h100-full's 32."""
    p = raw["platform"]
    p["nodeGroups"].append({"name": "h100-extra", "gpuModel": "H100-80GB", "gpusPerNode": 8})
    p["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-extra"})


def _third_pool(raw: dict[str, Any]) -> None:
    raw["platform"]["gpuPools"].append({"name": "ndh100c", "maxCount": 1})


def _shared_team(**queue: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw["teams"].append({"name": "shared", "quota": {"gpus": 8}, **({"queue": queue} if queue else {})})

    return edit


def _set_queues(**keys: Any) -> Edit:
    return lambda raw: raw["queues"].update(keys)


# (case, stack, edits refused, path, edits allowed): every refusal has its allowed twin.
CASES: list[tuple[str, str, list[Edit], str, list[Edit]]] = [
    (
        "lending more GPUs than guaranteed",
        "onprem",
        [_queue("language", lendingLimit={"gpus": 13})],
        "gpuaas:teams[1].queue.lendingLimit.gpus",
        [_queue("language", lendingLimit={"gpus": 12})],
    ),
    (
        "lending more CPU than guaranteed",
        "onprem",
        [_queue("speech", lendingLimit={"cpu": "65"})],
        "gpuaas:teams[2].queue.lendingLimit.cpu",
        [_queue("speech", lendingLimit={"cpu": "64000m"})],
    ),
    (
        "lending more MIG instances than guaranteed",
        "onprem",
        [_queue("research", lendingLimit={"mig": {"1g.10gb": 13}})],
        'gpuaas:teams[3].queue.lendingLimit.mig["1g.10gb"]',
        [_queue("research", lendingLimit={"mig": {"1g.10gb": 12}})],
    ),
    (
        "guaranteed GPUs above the node group's capacity",
        "onprem",
        [_quota("speech", gpus=9)],
        "gpuaas:teams[*].quota.gpus",
        [_quota("speech", gpus=8)],
    ),
    (
        "per node group, even where the fleet as a whole has enough",
        "onprem",
        [_extra_group, _quota("vision", gpus=16)],
        "gpuaas:teams[*].quota.gpus",
        [_extra_group, _quota("vision", gpus=16), _queue("speech", nodeGroups=["h100-extra"])],
    ),
    (
        "a node group that does not exist",
        "onprem",
        [_queue("vision", nodeGroups=["h100-fulll"])],
        "gpuaas:teams[0].queue.nodeGroups[0]",
        [_queue("vision", nodeGroups=["h100-full"])],
    ),
    (
        "a team's node groups that lack its guaranteed kind",
        "onprem",
        [_queue("vision", nodeGroups=["h100-mig"])],
        "gpuaas:teams[0].quota.gpus",
        [_queue("vision", nodeGroups=["h100-mig", "h100-full"])],
    ),
    (
        "borrowing a MIG profile no node group offers (a typo)",
        "onprem",
        [_queue("vision", borrowingLimit={"mig": {"1g.10g": 2}})],
        'gpuaas:teams[0].queue.borrowingLimit.mig["1g.10g"]',
        [_queue("vision", borrowingLimit={"mig": {"1g.10gb": 2}})],
    ),
    (
        "a CPU quota that is not a quantity",
        "onprem",
        [_quota("speech", cpu="lots")],
        "gpuaas:teams[2].quota.cpu",
        [_quota("speech", cpu="2500m")],
    ),
    (
        "a node group named like the cpu/memory flavor",
        "onprem",
        [lambda raw: raw["platform"]["nodeGroups"].append({"name": elastic.ANY_NODE, "gpuModel": "H100-80GB"})],
        "gpuaas:platform.nodeGroups[3].name",
        [lambda raw: raw["platform"]["nodeGroups"].append({"name": "h100-spare", "gpuModel": "H100-80GB"})],
    ),
    (
        "oversubscribed guarantees",
        "onprem",
        [lambda raw: raw.update(quotaPolicy={"allowOversubscription": True})],
        "gpuaas:quotaPolicy.allowOversubscription",
        [lambda raw: raw.update(quotaPolicy={"allowOversubscription": False})],
    ),
    (
        "preempting while borrowing without reclaim",
        "onprem",
        [_set_queues(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": "LowerPriority"})],
        "gpuaas:queues.preemption.borrowWithinCohort",
        [_set_queues(preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": "LowerPriority"})],
    ),
    (
        "a duplicate priority class",
        "onprem",
        [_set_queues(priorityClasses=[{"name": "a", "value": 1}, {"name": "a", "value": 2}])],
        "gpuaas:queues.priorityClasses[1].name",
        [_set_queues(priorityClasses=[{"name": "a", "value": 1}, {"name": "b", "value": 2}])],
    ),
    (
        "AKS: borrowing in another team's partition (pool)",
        "aks",
        [_queue("training", nodeGroups=["ndh100b"])],
        "gpuaas:teams[0].queue.nodeGroups[0]",
        [_queue("training", nodeGroups=["ndh100a"])],
    ),
    (
        "AKS: a team without partition in a team's pool",
        "aks",
        [_third_pool, _shared_team(nodeGroups=["ndh100a"])],
        "gpuaas:teams[2].queue.nodeGroups[0]",
        [_third_pool, _shared_team(nodeGroups=["ndh100c"])],
    ),
    (
        "AKS: a team without partition when every pool is a partition",
        "aks",
        [_shared_team()],
        "gpuaas:teams[2].quota.gpus",
        [_third_pool, _shared_team()],
    ),
]


@pytest.mark.parametrize(("case", "stack", "bad", "path", "good"), CASES, ids=[c[0] for c in CASES])
def test_elastic_rules_name_the_key(case: str, stack: str, bad: list[Edit], path: str, good: list[Edit]) -> None:
    refused, allowed = elastic_raw(stack), elastic_raw(stack)
    for edit in bad:
        edit(refused)
    for edit in good:
        edit(allowed)
    assert path in _issues(refused), case
    assert _issues(allowed) == [], case


def test_every_problem_is_reported_at_once() -> None:
    raw = elastic_raw("onprem")
    for edit in (
        _queue("language", lendingLimit={"gpus": 13}),
        _quota("speech", gpus=9),
        _queue("inference", nodeGroups=["nope", "h100-shared"]),
    ):
        edit(raw)
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    paths = [i.path for i in err.value.issues]
    assert {
        "gpuaas:teams[1].queue.lendingLimit.gpus",
        "gpuaas:teams[*].quota.gpus",
        "gpuaas:teams[4].queue.nodeGroups[0]",
    } <= set(paths)
    text = str(err.value)
    assert "it has 32" in text and "above the team's quota of 12" in text


# --------------------------------------------------------------------------------------------
# Amounts


def test_quantities_follow_kubernetes() -> None:
    assert elastic.parse_quantity("500m") == Decimal("0.5")
    assert elastic.parse_quantity("1536Gi") == 1536 * 2**30
    assert elastic.parse_quantity("2k") == 2000
    assert elastic.format_quantity(elastic.parse_quantity("1536Gi") + 2**40, "memory") == "2560Gi"
    assert elastic.format_quantity(Decimal("2.5"), "cpu") == "2500m"
    assert elastic.format_quantity(Decimal(2**40), "memory") == "1Ti"
    for bad in ("", "1.5.2", "10 Gi", "1Gb"):
        with pytest.raises(ValueError):
            elastic.parse_quantity(bad)
    # One grammar everywhere (issue #21, item 13): what the config accepts, the elastic code reads.
    assert elastic.parse_quantity is grammar.parse_quantity
    assert elastic.parse_quantity("1e3") == 1000 and elastic.parse_quantity("500u") == Decimal("0.0005")
    assert elastic.format_quantity(Decimal("0.0005"), "cpu") == "500u"


def test_onprem_queue_lines() -> None:
    cfg = parse_config(raw_stack("onprem"))
    assert cfg.queues.elastic, "the tests' onprem stack turns elasticity on"
    vision, language, research = (next(t for t in cfg.teams if t.name == n) for n in ("vision", "language", "research"))
    lines = elastic.team_lines(cfg, vision)
    assert list(lines) == ["h100-mig", "h100-shared", "h100-full", elastic.ANY_NODE]
    assert lines["h100-full"][resources.GPU] == elastic.Line(Decimal(12), Decimal(8), None)
    assert lines["h100-mig"]["nvidia.com/mig-1g.10gb"] == elastic.Line(Decimal(0), None, None)
    part = lines[elastic.ANY_NODE][resources.sriov_resource(0x0001)]
    assert part == elastic.Line(Decimal(16), Decimal(0), Decimal(0))
    assert [r for r in lines[elastic.ANY_NODE] if "sriov" in r] == ["nvidia.com/sriov8001"]
    assert elastic.team_lines(cfg, language)["h100-full"][resources.GPU].lending_limit == 8
    assert elastic.home_flavors(cfg, research) == {
        "nvidia.com/mig-1g.10gb": "h100-mig",
        "nvidia.com/mig-4g.40gb": "h100-mig",
    }


def test_quota_ceiling_is_nominal_plus_borrowing_at_most_the_flavor() -> None:
    cfg = parse_config(raw_stack("onprem"))
    by = {t.name: quotas.quota_hard(cfg, t) for t in cfg.teams}
    # vision: 12 guaranteed + borrowingLimit 8; CPU/memory 192 + 128, 1536Gi + 1Ti.
    assert by["vision"]["requests.nvidia.com/gpu"] == "20"
    assert by["vision"]["requests.cpu"] == "320"
    assert by["vision"]["requests.memory"] == "2560Gi"
    # language: no borrowing limit: at most the 32 GPUs of h100-full; CPU borrows nothing.
    assert by["language"]["requests.nvidia.com/gpu"] == "32"
    assert by["language"]["requests.cpu"] == "192"
    # research borrows MIG up to the flavor (24 instances), whole GPUs up to h100-full's 32.
    assert by["research"]["requests.nvidia.com/mig-1g.10gb"] == "24"
    assert by["research"]["requests.nvidia.com/gpu"] == "32"
    # the partition resource keeps its plain quota (another team's is the partition policy's business)
    assert by["vision"]["requests.nvidia.com/sriov8001"] == "16"


def test_quota_ceiling_never_below_what_kueue_can_admit() -> None:
    """Kueue does not read ResourceQuota (Kueue #696): hard ≥ nominal + borrowable for every line."""
    for stack in ("onprem", "aks"):
        cfg = parse_config(elastic_raw(stack))
        for t in cfg.teams:
            hard = quotas.quota_hard(cfg, t)
            for flavor, res, line, can in elastic.team_rows(cfg, t):
                key = f"requests.{res}"
                admitted = line.nominal + can
                assert elastic.parse_quantity(hard[key]) >= admitted, (stack, t.name, flavor, res)


def test_aks_queues_stay_in_their_partition() -> None:
    cfg = parse_config(elastic_raw("aks"))
    assert {t.name: elastic.team_flavors(cfg, t) for t in cfg.teams} == {
        "training": ["ndh100a"],
        "finetune": ["ndh100b"],
    }
    hard = quotas.quota_hard(cfg, cfg.teams[1])
    assert hard["requests.nvidia.com/gpu"] == "16", "finetune's pool has 16 GPUs and nobody else's"


# --------------------------------------------------------------------------------------------
# Off changes nothing; on changes exactly the expected records


def test_elastic_off_plans_no_kueue_and_hard_quotas() -> None:
    raw = raw_stack("onprem")
    del raw["queues"]
    for t in raw["teams"]:
        t.pop("queue", None)
    off = run_program("onprem", config=qualified(raw))
    on = run_program("onprem", config=fixture_config("onprem"))
    assert not [r for r in off.records if "kueue" in r.type.lower() or r.name.startswith("gpuaas-queues")]
    assert not [r for r in off.records if "queue-name" in json.dumps(r.inputs)]
    cfg = parse_config(raw)
    for t in cfg.teams:
        hard = quotas.quota_hard(cfg, t)
        assert hard["requests.cpu"] == t.quota.cpu
        if t.quota.gpus:
            assert hard["requests.nvidia.com/gpu"] == str(t.quota.gpus)
    before = {r.name: r for r in off.records}
    after = {r.name: r for r in on.records}
    assert set(before) <= set(after)
    added = set(after) - set(before)
    # Kueue, and observability's scrape of it (components/observability/monitors.py)
    assert added and all(n.startswith(("gpuaas-queues", "gpuaas-observability")) for n in added)
    assert {n for n in added if n.startswith("gpuaas-observability")} == {
        f"gpuaas-observability-{role}"
        for role in (
            "rules-queues",
            "scraper",
            "scraper-token",
            "metrics-reader",
            "metrics-reader-binding",
            "kueue-monitor",
        )
    }
    changed = {
        n for n in before if json.dumps(before[n].inputs, sort_keys=True) != json.dumps(after[n].inputs, sort_keys=True)
    }
    quota_names = {f"gpuaas-teams-{t.name}-quota" for t in cfg.teams}
    verify_jobs = {
        "gpuaas-verification-vision-ib-server",
        "gpuaas-verification-vision-ib-client",
        "gpuaas-verification-vision-nccl",
    }
    # the isolation probe's Jobs, each end through its own team's queue
    probes = {
        f"gpuaas-verification-isolation-{p.id}-{role}"
        for p in isolation.isolation_probes(parse_config(raw_stack("onprem")))
        for role in ("client", "server")
    }
    assert probes
    # the alerts (queue starving, Kueue absent) and the dashboards' borrowing panels come with Kueue;
    # the team role gains the queued kinds and read of its queue (components/tenancy/teams.py queue_rules)
    observed = {f"gpuaas-observability-{r}" for r in ("rules-alerts", "dashboard-platform", "dashboard-team")}
    assert changed == quota_names | verify_jobs | probes | observed | {"gpuaas-teams-member-role"}


# --------------------------------------------------------------------------------------------
# Objects against the Kueue CRDs


def _crd(upstream: Path, kind: str) -> Path:
    plural = {
        "ResourceFlavor": "resourceflavors",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
        "WorkloadPriorityClass": "workloadpriorityclasses",
    }[kind]
    # A missing file fails here (e2e/upstream.py names the folder and its variable), never a skip.
    return upstream.joinpath(*KUEUE_CRDS, f"kueue.x-k8s.io_{plural}.yaml")


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_kueue_objects_match_the_crds(upstream: Path, stack: str) -> None:
    cfg = parse_config(elastic_raw(stack))
    objects = queues.queue_objects(platform_args.queues(cfg))
    kinds = {o["kind"] for o in objects.values()}
    assert {"ResourceFlavor", "ClusterQueue", "LocalQueue"} <= kinds
    for obj in objects.values():
        validate_against_crd(obj, _crd(upstream, obj["kind"]))


def test_crd_check_refuses_unknown_and_wrong_fields(upstream: Path) -> None:
    cfg = parse_config(raw_stack("onprem"))
    cq = kueue_objects.cluster_queue(cfg, cfg.teams[0])
    assert crd_errors(cq, _crd(upstream, "ClusterQueue")) == []
    bad = copy.deepcopy(cq)
    bad["spec"]["cohort"] = "gpuaas"  # the v1beta1 spelling; v1beta2 says cohortName
    bad["spec"]["preemption"]["reclaimWithinCohort"] = "Sometimes"
    errors = crd_errors(bad, _crd(upstream, "ClusterQueue"))
    assert any("cohort" in e for e in errors) and any("Sometimes" in e for e in errors)


def test_cluster_queue_groups_follow_kueue_rules() -> None:
    """Every flavor lists its group's coveredResources in order; a resource and a flavor are in one group."""
    for stack in ("onprem", "aks"):
        cfg = parse_config(elastic_raw(stack))
        for t in cfg.teams:
            groups = kueue_objects.cluster_queue(cfg, t)["spec"]["resourceGroups"]
            covered = [r for g in groups for r in g["coveredResources"]]
            flavors = [f["name"] for g in groups for f in g["flavors"]]
            assert len(covered) == len(set(covered)) and len(flavors) == len(set(flavors))
            for g in groups:
                for f in g["flavors"]:
                    assert [r["name"] for r in f["resources"]] == g["coveredResources"]
                    for r in f["resources"]:
                        if "lendingLimit" in r:
                            assert Decimal(elastic.parse_quantity(r["lendingLimit"])) <= elastic.parse_quantity(
                                r["nominalQuota"]
                            )


def test_mig_layouts_sharing_a_profile_join_one_group() -> None:
    raw = elastic_raw("onprem")
    raw["platform"]["nodeGroups"].append({"name": "h100-mig2", "gpuModel": "H100-80GB", "mig": {"layout": "7x1g.10gb"}})
    raw["platform"]["nodes"].append({"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-mig2"})
    cfg = parse_config(raw)
    groups = kueue_objects.cluster_queue(cfg, cfg.teams[0])["spec"]["resourceGroups"]
    mig = next(g for g in groups if "nvidia.com/mig-1g.10gb" in g["coveredResources"])
    assert [f["name"] for f in mig["flavors"]] == ["h100-mig", "h100-mig2"]
    assert mig["coveredResources"] == ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-4g.40gb"]
    second = mig["flavors"][1]["resources"]
    assert [r["nominalQuota"] for r in second] == ["0", "0"]


def test_flavors_carry_node_labels_and_pool_tolerations() -> None:
    onprem = queues.resource_flavors(platform_args.queues(parse_config(raw_stack("onprem"))))
    assert onprem["h100-full"]["spec"] == {"nodeLabels": {resources.NODE_GROUP_LABEL: "h100-full"}}
    assert onprem[elastic.ANY_NODE]["spec"] == {}
    aks = queues.resource_flavors(platform_args.queues(parse_config(elastic_raw("aks"))))
    assert aks["ndh100a"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]


def test_local_queue_names_the_teams_cluster_queue_and_cq_only_its_namespace() -> None:
    cfg = parse_config(raw_stack("onprem"))
    t = cfg.teams[1]
    lq, cq = kueue_objects.local_queue(cfg, t), kueue_objects.cluster_queue(cfg, t)
    assert lq["metadata"] == {"name": "language", "namespace": t.ns, "labels": dict(resources.PART_OF)}
    assert lq["spec"]["clusterQueue"] == cq["metadata"]["name"]
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": t.ns}}


# --------------------------------------------------------------------------------------------
# The release


def queues_version() -> str:
    return parse_config(raw_stack("onprem")).versions.kueue_chart


def test_helm_values_exist_in_the_chart(upstream: Path) -> None:
    """Against the whole Kueue chart in the upstream folder (a unit test: no tool, no Go module)."""
    chart = upstream / f"charts/kueue-v{queues_version().lstrip('v')}"
    cfg = parse_config(raw_stack("onprem"))
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["version"] == cfg.versions.kueue_chart
    values = queues.helm_values(platform_args.queues(cfg))
    assert_value_paths_exist(values, chart / "values.yaml")
    # our Configuration keeps every top-level key of the chart's own, and adds only ours
    chart_cfg = yaml.safe_load(
        yaml.safe_load((chart / "values.yaml").read_text())["managerConfig"]["controllerManagerConfigYaml"]
    )
    ours = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert set(chart_cfg) <= set(ours)
    assert set(ours) - set(chart_cfg) == {
        "namespace",
        "manageJobsWithoutQueueName",
        "managedJobsNamespaceSelector",
        "waitForPodsReady",
        "resources",  # excludeResourcePrefixes: what no queue accounts (issue 35, item 6)
    }


def test_kueue_configuration_from_config() -> None:
    raw = raw_stack("onprem")
    raw["queues"].update(manageJobsWithoutQueueName=True, integrations=["batch/job", "pod"])
    conf = queues.kueue_configuration(platform_args.queues(parse_config(raw)))
    assert conf["manageJobsWithoutQueueName"] is True
    assert conf["integrations"] == {"frameworks": ["batch/job", "pod"]}
    assert conf["managedJobsNamespaceSelector"]["matchExpressions"] == [{"key": "gpuaas.io/team", "operator": "Exists"}]
    default = queues.kueue_configuration(platform_args.queues(parse_config(raw_stack("onprem"))))
    assert default["manageJobsWithoutQueueName"] is False
    assert "kubeflow.org/pytorchjob" in default["integrations"]["frameworks"]


def test_release_is_pinned_in_its_own_namespace(run_of: Any) -> None:
    run = run_of("onprem")
    rel = run.named("gpuaas-queues-kueue")
    assert rel.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert rel.inputs["version"] == "0.19.2" and rel.inputs["namespace"] == "kueue-system"
    assert "repositoryOpts" not in rel.inputs or not rel.inputs["repositoryOpts"]
    ns = run.named("gpuaas-queues-namespace")
    assert ns.urn in rel.dependencies
    cq = run.named("gpuaas-queues-vision-cluster-queue")
    lq = run.named("gpuaas-queues-vision-local-queue")
    assert cq.urn in lq.dependencies and run.named("gpuaas-teams-vision-namespace").urn in lq.dependencies
    assert run.named("gpuaas-queues-flavor-h100-full").urn in cq.dependencies
    policy = run.named("gpuaas-queues-jobs-queue-policy")
    assert policy.inputs["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["jobs"]
    wpc = run.named("gpuaas-queues-priority-production")
    assert wpc.type == "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass" and wpc.inputs["value"] == 1000


def test_admission_objects_per_integration() -> None:
    raw = raw_stack("onprem")
    raw["queues"]["integrations"] = ["batch/job"]
    roles = set(admission.queue_admission_objects(parse_config(raw).queues))
    always = {"pods", "jobs", "deployments", "statefulsets", *admission.APPS_KINDS, "owners"}
    guards = {f"{plural}-queue-{kind}" for plural in always for kind in ("policy", "binding")}
    assert roles == guards | {"jobs-suspend-policy", "jobs-suspend-binding"}
    full = set(admission.queue_admission_objects(parse_config(raw_stack("onprem")).queues))
    assert {"jobsets-queue-policy", "pytorchjobs-queue-policy", "mpijobs-queue-policy"} <= full
    raw["queues"]["elastic"] = False
    assert admission.queue_admission_objects(parse_config(raw).queues) == {}
