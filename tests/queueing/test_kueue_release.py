"""Kueue's release as the stack renders it, against the v0.19.2 chart's own values and templates.

Items 6 and 9 of issue 21: Kueue runs highly available (its pod webhook is ``failurePolicy: Fail``
on every team namespace), gives back the quota of workloads whose pods never start
(``waitForPodsReady``), and on AKS its flavors carry the pool label the pool guard asks for.
The chart is read in place from the upstream fixtures folder (``charts/kueue-v0.19.2``, each file
checked against its blob id; a test that needs it fails where it is absent).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from components import platform_args
from components.loader import gpuaas_section, parse_config
from components.model.config import StackConfig
from components.plan.offline import ROOT, run_program, stack_config
from components.queueing import controllers, queues
from tests import kueue_objects
from tests.conftest import raw_stack
from tests.schema_helpers import assert_value_paths_exist

AKS_ELASTIC: Final = ROOT / "tests" / "stacks" / "aks-elastic.yaml"


@pytest.fixture
def chart(upstream: Path) -> Path:
    return upstream / "charts" / "kueue-v0.19.2"


def onprem(**queues_: Any) -> StackConfig:
    raw = raw_stack("onprem")
    raw["queues"].update(queues_)
    return parse_config(raw)


def aks_elastic() -> StackConfig:
    return parse_config(gpuaas_section(stack_config("aks", AKS_ELASTIC)))


def test_ha_values_are_the_charts_and_its_templates_read_them(chart: Path) -> None:
    values = queues.helm_values(platform_args.queues(onprem()))
    manager = values["controllerManager"]
    assert manager["replicas"] == 2
    assert manager["podDisruptionBudget"] == {"enabled": True, "minAvailable": 1}
    (spread,) = manager["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert_value_paths_exist(values, chart / "values.yaml")
    templates = chart / "templates" / "manager"
    assert "replicas: {{ .Values.controllerManager.replicas }}" in (templates / "manager.yaml").read_text()
    pdb = (templates / "manager-pdb.yaml").read_text()
    assert "if .Values.controllerManager.podDisruptionBudget.enabled" in pdb
    assert "minAvailable: {{ .Values.controllerManager.podDisruptionBudget.minAvailable }}" in pdb
    assert ".Values.controllerManager.topologySpreadConstraints" in (templates / "manager.yaml").read_text()


def test_the_spread_selects_the_charts_manager_pods(chart: Path) -> None:
    helpers = (chart / "templates" / "_helpers.tpl").read_text()
    block = helpers[helpers.index('define "kueue.selectorLabels"') :].split("{{- end }}", 1)[0]
    rendered = dict(line.strip().split(": ", 1) for line in block.splitlines()[1:] if ": " in line)
    # {{ include "kueue.name" . }} is the chart name, {{ .Release.Name }} our release
    rendered = {
        k: v.replace('{{ include "kueue.name" . }}', "kueue").replace("{{ .Release.Name }}", queues.RELEASE)
        for k, v in rendered.items()
    }
    assert rendered == queues.MANAGER_LABELS


def test_one_replica_gets_no_disruption_budget() -> None:
    """A PDB of minAvailable 1 over one pod would block every node drain: the twin of the HA case."""
    manager = queues.helm_values(platform_args.queues(onprem(replicas=1)))["controllerManager"]
    assert manager == {"replicas": 1, "manager": manager["manager"]}


def test_leader_election_stays_on_and_pods_ready_is_bounded() -> None:
    conf = queues.kueue_configuration(platform_args.queues(onprem()))
    assert conf["leaderElection"]["leaderElect"] is True
    assert conf["waitForPodsReady"] == {"timeout": "600s", "blockAdmission": False}
    assert (
        queues.kueue_configuration(platform_args.queues(onprem(podsReadyTimeoutSeconds=90)))["waitForPodsReady"][
            "timeout"
        ]
        == "90s"
    )


def test_the_pod_webhook_is_fail_closed_on_the_team_namespaces(chart: Path) -> None:
    """Why HA matters: with ``pod`` among the frameworks the chart registers mpod.kb.io Fail, on
    exactly the namespaces managedJobsNamespaceSelector names (the team namespaces)."""
    text = (chart / "templates" / "webhook" / "manifests.yaml").read_text()
    mpod = text[text.index("name: mpod.kb.io") :]
    mpod = mpod[: mpod.index("rules:")]
    assert 'if has "pod" $integrationsConfig.frameworks' in mpod and "failurePolicy: Fail" in mpod
    assert "managedJobsNamespaceSelector" in mpod
    conf = queues.kueue_configuration(platform_args.queues(onprem()))
    assert "pod" in conf["integrations"]["frameworks"]


def test_kueues_identity_is_the_charts_service_account(chart: Path) -> None:
    template = (chart / "templates" / "rbac" / "service_account.yaml").read_text()
    assert re.search(r"name: '\{\{ include \"kueue.fullname\" \. \}\}-controller-manager'", template)
    # fullname is the release name when it contains the chart name (templates/_helpers.tpl)
    assert controllers.kueue_identity(onprem().queues) == "system:serviceaccount:kueue-system:kueue-controller-manager"
    assert (
        controllers.kueue_identity(onprem(namespace="queues").queues)
        == "system:serviceaccount:queues:kueue-controller-manager"
    )


def test_aks_flavors_carry_the_pool_label_the_pool_guard_asks_for() -> None:
    """Item 6: Kueue writes a flavor's nodeLabels into the admitted Job's pod template; the AKS
    pool guard refuses a GPU pod that does not select kubernetes.azure.com/agentpool."""
    flavors = queues.resource_flavors(platform_args.queues(aks_elastic()))
    for pool in ("ndh100a", "ndh100b", "ndshared"):
        assert flavors[pool]["spec"]["nodeLabels"] == {
            "gpuaas.io/node-group": pool,
            "kubernetes.azure.com/agentpool": pool,
        }
    # on-prem nodes have no such label: their flavors select the node group only
    assert queues.resource_flavors(platform_args.queues(onprem()))["h100-full"]["spec"]["nodeLabels"] == {
        "gpuaas.io/node-group": "h100-full"
    }


def test_the_aks_elastic_variant_plans() -> None:
    run = run_program("aks", config=stack_config("aks", AKS_ELASTIC))
    kinds = {(r.inputs.get("kind"), (r.inputs.get("metadata") or {}).get("name")) for r in run.records}
    assert {("ClusterQueue", t) for t in ("training", "finetune", "interns")} <= kinds
    pool_policy = run.named("gpuaas-admission-pool-policy").inputs
    (unowned,) = [v for v in pool_policy["spec"]["variables"] if v["name"] == "unownedPools"]
    assert unowned["expression"] == "['ndshared']"
    cq = yaml.safe_load(yaml.safe_dump(run.named("gpuaas-queues-interns-cluster-queue").inputs))
    assert [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]] == ["ndshared", "gpuaas-any-node"]


# --------------------------------------------------------------------------------------------
# Issue 35, item 6: what the queues account, and what Kueue leaves out of a workload's requests


def _stacks() -> dict[str, StackConfig]:
    stacks = ROOT / "tests" / "stacks"
    return {
        "onprem": onprem(),
        "aks-elastic": aks_elastic(),
        "onprem-hami": parse_config(gpuaas_section(stack_config("onprem", stacks / "onprem-hami.yaml"))),
        "onprem-dra": parse_config(gpuaas_section(stack_config("onprem", stacks / "onprem-dra.yaml"))),
    }


def _kueue_drops(requests: set[str], prefixes: list[str]) -> set[str]:
    """What Kueue counts of a pod's requests: v0.19.2 pkg/workload ``dropExcludedResources``
    removes every resource whose name starts with one of the prefixes (``strings.HasPrefix``)."""
    return {r for r in requests if not any(r.startswith(p) for p in prefixes)}


def _covered(cfg: StackConfig) -> set[str]:
    return {r for t in cfg.teams for g in kueue_objects.resource_groups(cfg, t) for r in g["coveredResources"]}


@pytest.mark.parametrize("stack", ["onprem", "aks-elastic", "onprem-hami", "onprem-dra"])
def test_kueue_counts_what_the_queues_cover_and_leaves_out_scratch_space_and_huge_pages(stack: str) -> None:
    """A Job asking ``ephemeral-storage`` or ``hugepages-2Mi`` besides its GPUs: Kueue keeps only
    resources some ClusterQueue covers, so it can be admitted; every covered resource still counts."""
    cfg = _stacks()[stack]
    prefixes = queues.kueue_configuration(platform_args.queues(cfg))["resources"]["excludeResourcePrefixes"]
    covered = _covered(cfg)
    extra = {"ephemeral-storage", "hugepages-2Mi", "hugepages-1Gi"}
    assert _kueue_drops(covered | extra, prefixes) == covered


@pytest.mark.parametrize("stack", ["onprem", "aks-elastic", "onprem-hami", "onprem-dra"])
def test_a_device_the_platform_does_not_know_still_counts(stack: str) -> None:
    """The twin: an extended resource no queue covers is not dropped (Kueue holds it: no quota)."""
    cfg = _stacks()[stack]
    prefixes = queues.kueue_configuration(platform_args.queues(cfg))["resources"]["excludeResourcePrefixes"]
    assert _kueue_drops({"example.com/fpga", "nvidia.com/gpu"}, prefixes) == {"example.com/fpga", "nvidia.com/gpu"}
