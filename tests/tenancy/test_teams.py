"""Team objects, quotas, SR-IOV host side, OpenSM delivery and admission policies.

Rendered objects are validated against the upstream schemas: built-in kinds with
kubernetes-validate (strict), CRD kinds against the pinned CRDs in ../shared/upstream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from jsonschema import Draft4Validator

from components.fabric import guid_plan, opensm, sriov_host
from components.loader import gpuaas_section, parse_config
from components.model import resources
from components.model.capacity import capacity
from components.model.config import StackConfig
from components.plan.offline import run_program
from components.tenancy import labels as team_labels
from components.tenancy import network_admission, networks, quotas, teams
from tests import tenancy_objects
from tests.admission_cases import ALLOWED, REFUSED
from tests.conftest import fixture_config, qualified, raw_stack
from tests.reuse.harness import waits_for
from tests.schema_helpers import crd_schema, strict, validate_against_crd

K8S_VERSION = "1.33.0"
NAD_CRD = "multus/crds/network-attachment-definition.yaml"
IPPOOL_CRD = "network-operator/v26.4.1/manifests/state-nv-ipam-cni/005-nv-ipam.nvidia.com_ippools.yaml"
POLICY_CRD = "network-operator/v26.4.1/charts/sriov-network-operator/crds/" + (
    "sriovnetwork.openshift.io_sriovnetworknodepolicies.yaml"
)


def nv_ipam() -> StackConfig:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["ipam"] = "nv-ipam"
    return parse_config(raw)


def all_objects(cfg: StackConfig) -> list[dict[str, Any]]:
    objs = [o for t in cfg.teams for o in tenancy_objects.team_objects(cfg, t).values()]
    objs += [tenancy_objects.cluster_role(cfg), *tenancy_objects.admission_objects(cfg).values()]
    if cfg.onprem is not None:
        objs += [opensm.config_map(cfg), *guid_plan.guid_config_maps(cfg), sriov_host.daemonset(cfg)]
    return objs


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_builtin_kinds_validate_strictly(stack: str) -> None:
    cfg = parse_config(raw_stack(stack))
    checked = 0
    for obj in all_objects(cfg):
        if "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].startswith(
            ("rbac.authorization.k8s.io", "admissionregistration.k8s.io")
        ):
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        checked += 1
    assert checked >= 5 * len(cfg.teams)


def test_opensm_deployment_validates() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["opensm"].update({"deployInCluster": True, "node": "gpu-node-01"})
    cfg = parse_config(raw)
    dep = opensm.deployment(cfg)
    kubernetes_validate.validate(dep, K8S_VERSION, strict=True)
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "gpu-node-01"}
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/mellanox/opensm:5.23.0"
    assert dep["spec"]["template"]["spec"]["containers"][0]["securityContext"] == {"privileged": True}
    raw["teams"].pop()
    other = opensm.deployment(parse_config(raw))
    key = guid_plan.CONFIG_HASH_ANNOTATION
    assert (
        other["spec"]["template"]["metadata"]["annotations"][key]
        != dep["spec"]["template"]["metadata"]["annotations"][key]
    )


def test_nad_matches_upstream_crd_and_ib_sriov(upstream: Path, cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    schema = crd_schema(upstream / NAD_CRD, "k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")
    # The API server adds apiVersion/kind/metadata to every CRD's schema.
    schema["properties"] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        **schema["properties"],
    }
    for team in cfg.teams:
        nad = tenancy_objects.nad(cfg, team)
        assert nad is not None
        errors = list(Draft4Validator(strict(schema)).iter_errors(nad))
        assert not errors, errors
        assert nad["metadata"]["namespace"] == team.ns != "default"
        conf = json.loads(nad["spec"]["config"])
        assert conf == {
            "cniVersion": "0.3.1",
            "name": f"ib-{team.name}",
            "type": "ib-sriov",
            "pkey": f"0x{team.partition.pkey | 0x8000:04x}",
            "link_state": "enable",
            "ibKubernetesEnabled": False,
        }, "ipam: none — ib-sriov-cni runs no IPAM, so a pod needs no address"
        ann = nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]
        assert ann == resources.sriov_resource(team.partition.pkey)
    # the keys the upstream ib-sriov example uses are the ones we write
    example = (upstream / "ib-sriov-cni/v1.3.0/deployment/examples/ib-crd.yaml").read_text()
    for key in ("cniVersion", "pkey", "link_state", "ibKubernetesEnabled", "resourceName"):
        assert key in example


def test_nv_ipam_pool_per_team(upstream: Path) -> None:
    cfg = nv_ipam()
    pools = [tenancy_objects.ip_pool(cfg, t) for t in cfg.teams]
    for team, pool in zip(cfg.teams, pools, strict=True):
        assert pool is not None
        validate_against_crd(pool, upstream / IPPOOL_CRD)
        assert pool["metadata"]["namespace"] == cfg.network.namespace
        assert pool["spec"]["subnet"] == f"192.168.{team.partition.pkey}.0/24"
        assert pool["spec"]["perNodeBlockSize"] == 8
        conf = json.loads(tenancy_objects.nad(cfg, team)["spec"]["config"])
        assert conf["ipam"] == {"type": "nv-ipam", "poolName": pool["metadata"]["name"]}
        assert "capabilities" not in conf
    assert len({p["spec"]["subnet"] for p in pools}) == len(pools)


def test_static_ipam_has_no_pools(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    assert all(tenancy_objects.ip_pool(cfg, t) is None for t in cfg.teams)


def _static() -> StackConfig:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["ipam"] = "static"
    return parse_config(raw)


def test_static_ipam_nad_takes_pod_addresses_and_an_rdma_nad_needs_none() -> None:
    """static IPAM returns no address for a pod without ``ips``, and ib-sriov-cni then fails the
    sandbox ("IPAM plugin returned missing IP config"): those pods use the address-less twin."""
    cfg = _static()
    team = cfg.teams[0]
    conf = json.loads(tenancy_objects.nad(cfg, team)["spec"]["config"])
    assert conf["ipam"] == {"type": "static"} and conf["capabilities"] == {"ips": True}
    twin = tenancy_objects.rdma_nad(cfg, team)
    assert twin is not None and twin["metadata"]["name"] == "ib-vision-rdma"
    twin_conf = json.loads(twin["spec"]["config"])
    assert "ipam" not in twin_conf and "capabilities" not in twin_conf and twin_conf["name"] == "ib-vision-rdma"
    assert twin["metadata"]["annotations"] == tenancy_objects.nad(cfg, team)["metadata"]["annotations"], "same VF pool"
    assert "nad-rdma" in tenancy_objects.team_objects(cfg, team)
    assert networks.proof_network(cfg, team) == "ib-vision-rdma"


@pytest.mark.parametrize("mode", ["none", "nv-ipam"])
def test_other_modes_need_no_twin_and_the_proofs_use_the_team_nad(mode: str) -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["ipam"] = mode
    cfg = parse_config(raw)
    team = cfg.teams[0]
    assert tenancy_objects.rdma_nad(cfg, team) is None and "nad-rdma" not in tenancy_objects.team_objects(cfg, team)
    assert networks.proof_network(cfg, team) == "ib-vision"
    assert ("ipam" in json.loads(tenancy_objects.nad(cfg, team)["spec"]["config"])) == (mode == "nv-ipam")


def test_the_default_ipam_is_none() -> None:
    raw = raw_stack("onprem")
    del raw["platform"]["fabric"]["ipam"]
    assert parse_config(raw).onprem.fabric.ipam == "none"  # type: ignore[union-attr]


def test_sriov_operator_renderers(upstream: Path, cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    team = cfg.teams[2]
    policy = sriov_host.sriov_network_node_policy(cfg, team, ["ibp12s0", "ibp13s0"])
    validate_against_crd(policy, upstream / POLICY_CRD)
    assert policy["spec"]["nicSelector"]["pfNames"] == ["ibp12s0#2-2", "ibp13s0#2-2"]
    assert policy["spec"]["resourceName"] == "sriov8003"
    onprem = cfg.onprem
    table = {"mlx5_0": [0x0200000000001000, 0x0200000000001001]}
    doc = json.loads(sriov_host.operator_guid_file(table, {"mlx5_0": "0000:17:00.0"}))
    assert doc == [{"pciAddress": "0000:17:00.0", "guids": ["02:00:00:00:00:00:10:00", "02:00:00:00:00:00:10:01"]}]
    assert onprem is not None


def test_quota_names_every_extended_resource_but_foreign_partitions(cfg_of: Any) -> None:
    for stack in ("onprem", "aks"):
        cfg = cfg_of(stack)
        universe = quotas.extended_resources(cfg)
        assert {r for r in capacity(cfg) if not quotas.is_partition_resource(r)} <= universe
        assert not any(quotas.is_partition_resource(r) for r in universe)
        for team in cfg.teams:
            hard = quotas.quota_hard(cfg, team)
            own = quotas.own_partition_resource(team) if cfg.onprem is not None else None
            assert {k.removeprefix("requests.") for k in hard if "/" in k} == universe | ({own} if own else set())
            assert not any(k.startswith("limits.") for k in hard), "no limits in the quota: pods state requests only"


def test_own_partition_is_listed_even_without_an_rdma_quota(cfg_of: Any) -> None:
    """Zero VFs for a team whose quota says rdma 0: its own resource is named, with "0"."""
    raw = raw_stack("onprem")
    raw["teams"][0]["quota"]["rdma"] = 0
    cfg = parse_config(raw)
    assert quotas.quota_hard(cfg, cfg.teams[0])["requests.nvidia.com/sriov8001"] == "0"
    assert quotas.quota_hard(cfg_of("onprem"), cfg_of("onprem").teams[0])["requests.nvidia.com/sriov8001"] == "16"


def test_onprem_quota_values() -> None:
    raw = raw_stack("onprem")
    raw["queues"]["elastic"] = False  # hard quotas; the elastic ceilings: tests/queueing/test_elastic.py
    cfg = parse_config(raw)
    research = next(t for t in cfg.teams if t.name == "research")
    hard = quotas.quota_hard(cfg, research)
    assert hard["requests.nvidia.com/mig-4g.40gb"] == "4"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "12"
    assert hard["requests.nvidia.com/sriov8004"] == "8"
    assert hard["requests.nvidia.com/gpu"] == "0"
    assert hard["requests.nvidia.com/gpu.shared"] == "0"
    if cfg.network.rdma_shared_device_plugin != "none":
        assert hard["requests.rdma/hcashared"] == "0", "a partitioned team gets no shared PF RDMA"
    others = [f"requests.nvidia.com/sriov800{k}" for k in (1, 2, 3, 5, 6)]
    assert not any(k in hard for k in others), "foreign partitions are admission's (gpuaas-team-partition)"
    assert hard["requests.cpu"] == "64" and hard["requests.memory"] == "512Gi" and hard["pods"] == "200"
    assert "limits.memory" not in hard


def test_aks_quota_uses_rdma_shared_resource(cfg_of: Any) -> None:
    cfg = cfg_of("aks")
    hard = quotas.quota_hard(cfg, cfg.teams[0])
    assert hard["requests.rdma/hcashared"] == "32"
    assert hard["requests.nvidia.com/gpu"] == "32"
    assert not any("sriov" in k for k in hard)


def test_namespace_role_and_binding(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    team = cfg.teams[0]
    ns = tenancy_objects.namespace(cfg, team)
    labels = ns["metadata"]["labels"]
    assert labels[team_labels.TEAM_LABEL] == "vision"
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    priv = team.model_copy(update={"privileged": True})
    assert (
        tenancy_objects.namespace(cfg, priv)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    )
    role = tenancy_objects.cluster_role(cfg)
    assert role["kind"] == "ClusterRole" and "namespace" not in role["metadata"]
    binding = teams.role_binding(team)
    assert binding is not None and binding["metadata"]["namespace"] == team.ns
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": teams.ROLE}
    rules = role["rules"]
    nad_rule = next(r for r in rules if r["apiGroups"] == ["k8s.cni.cncf.io"])
    assert nad_rule == {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["get", "list", "watch"],
    }
    quota_rule = next(r for r in rules if "resourcequotas" in r["resources"])
    assert quota_rule["verbs"] == ["get", "list", "watch"]
    assert not any("create" in r["verbs"] and "network-attachment-definitions" in r["resources"] for r in rules)
    binding = teams.role_binding(team)
    assert binding is not None and binding["subjects"][0]["name"] == "oidc:team-vision"
    assert teams.role_binding(team.model_copy(update={"groups": []})) is None


def _verbs(resource: str, group: str = "", stack: str = "onprem", **queues: Any) -> set[str]:
    raw = raw_stack(stack)
    raw.setdefault("queues", {}).update(queues)
    rules = tenancy_objects.cluster_role(parse_config(raw))["rules"]
    return {v for r in rules if group in r["apiGroups"] and resource in r["resources"] for v in r["verbs"]}


WRITE = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
READ = {"get", "list", "watch"}


def test_team_role_gives_what_the_readme_promises_for_elastic_quotas() -> None:
    """Item 7: JobSets, PyTorchJobs, MPIJobs to run through the queue; LocalQueues and Workloads to
    see why a Job waits. Read only where read is enough, nothing without elastic quotas."""
    for resource, group in (
        ("jobsets", "jobset.x-k8s.io"),
        ("pytorchjobs", "kubeflow.org"),
        ("mpijobs", "kubeflow.org"),
    ):
        assert _verbs(resource, group) == WRITE, resource
        assert not _verbs(resource, group, stack="aks"), f"{resource}: the AKS stack has no elastic quotas"
    for resource in ("localqueues", "workloads"):
        assert _verbs(resource, "kueue.x-k8s.io") == READ, resource
        assert not _verbs(resource, "kueue.x-k8s.io", stack="aks")
    # nothing more: no other Kueue object, no other training kind, no integration that is off
    assert not _verbs("clusterqueues", "kueue.x-k8s.io") and not _verbs("resourceflavors", "kueue.x-k8s.io")
    assert not _verbs("tfjobs", "kubeflow.org") and not _verbs("workloads/status", "kueue.x-k8s.io")
    assert not _verbs("mpijobs", "kubeflow.org", integrations=["batch/job", "kubeflow.org/pytorchjob"])
    assert _verbs("pytorchjobs", "kubeflow.org", integrations=["batch/job", "kubeflow.org/pytorchjob"]) == WRITE


def test_team_role_never_edits_a_live_pod() -> None:
    """Pods are created and deleted, not patched: the networks annotation stays as admitted."""
    assert _verbs("pods") == {"get", "list", "watch", "create", "delete", "deletecollection"}
    assert not _verbs("pods/ephemeralcontainers") and not _verbs("pods/status") - {"get", "list", "watch"}
    assert {"create"} <= _verbs("pods/exec") and _verbs("pods/log") == {"get", "list", "watch"}
    # what the role still writes, for contrast: workloads and their config
    assert {"update", "patch"} <= _verbs("configmaps") and {"update", "patch"} <= _verbs("deployments", "apps")
    assert not _verbs("namespaces"), "namespace labels are what the admission policies trust"


def test_aks_scheduling_defaults(cfg_of: Any) -> None:
    cfg = cfg_of("aks")
    team = cfg.teams[0]
    cm = tenancy_objects.scheduling_config_map(cfg, team)
    assert cm is not None
    spec = json.loads(cm["data"]["pod-spec.json"])
    assert spec["nodeSelector"] == {"kubernetes.azure.com/agentpool": "ndh100a"}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert tenancy_objects.namespace(cfg, team)["metadata"]["labels"][team_labels.POOL_LABEL] == "ndh100a"
    assert tenancy_objects.nad(cfg, team) is None


def test_guid_plan_is_data(cfg_of: Any) -> None:
    cfg = cfg_of("onprem")
    cms = guid_plan.guid_config_maps(cfg)
    assert [cm["metadata"]["name"] for cm in cms] == [
        "gpuaas-vf-guids-h100-full-0",
        "gpuaas-vf-guids-h100-mig-0",
        "gpuaas-vf-guids-h100-shared-0",
    ]
    data = {k: v for cm in cms for k, v in cm["data"].items()}
    assert sorted(data) == sorted(n.name for n in cfg.onprem.nodes)
    line = data["gpu-node-05"].splitlines()[3]
    assert line == "mlx5_3 02:00:00:00:00:00:53:00 6"
    ds = sriov_host.daemonset(cfg)
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] and pod["hostPID"]
    assert pod["containers"][0]["securityContext"] == {"privileged": True}
    script = pod["containers"][0]["command"][2]
    for needle in ("sriov_numvfs", "node_guid", "port_guid", "Follow", "unbind", "bind", "state auto"):
        assert needle in script


# --------------------------------------------------------------------------------------------
# Admission: the CEL text and its Python mirror

NS = "vision"
NET = network_admission.NETWORKS_ANNOTATION


@pytest.mark.parametrize("value", ALLOWED)
def test_networks_allowed(value: str) -> None:
    assert network_admission.networks_violations({NET: value} if value else {}, NS) == []


@pytest.mark.parametrize(("value", "checks"), REFUSED)
def test_networks_refused(value: str, checks: set[str]) -> None:
    assert checks <= set(network_admission.networks_violations({NET: value}, NS))


def test_default_network_annotation_refused() -> None:
    assert network_admission.networks_violations({network_admission.DEFAULT_NETWORK_ANNOTATION: "speech/ib"}, NS) == [
        "no-default-network"
    ]


def test_cel_text_has_every_check() -> None:
    policy = network_admission.networks_policy()
    spec = policy["spec"]
    validations = [v["expression"] for v in spec["validations"]]
    assert len(validations) == len(network_admission.NETWORK_CHECKS)
    joined = "\n".join(validations)
    for regex in (
        network_admission.RE_ALPHABET,
        network_admission.RE_FORBIDDEN_KEY,
        network_admission.RE_STRING_TOKEN,
        network_admission.RE_ALLOWED_KEY,
        network_admission.RE_NAMESPACE_KEY,
        *network_admission.RE_OWN_NAMESPACE_VALUE,
    ):
        assert f"r'{regex}'" in joined
    assert "trim() in ['', request.namespace]" in joined
    assert f"r'{network_admission.RE_OWN_NAMESPACE_VALUE[0]}' + request.namespace + " in joined
    assert network_admission.DEFAULT_NETWORK_ANNOTATION in joined
    assert "cni-args" in network_admission.RE_FORBIDDEN_KEY and "infiniband-guid" in network_admission.RE_FORBIDDEN_KEY
    assert {v["name"] for v in spec["variables"]} == {"networks", "isJson"}
    assert spec["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["key"] == team_labels.TEAM_LABEL
    binding = network_admission.networks_binding()
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    for expr in validations:
        assert expr.count("(") == expr.count(")") and expr.count("'") % 2 == 0


NETWORK_GUARDS = {"networks-policy", "networks-binding", "networks-immutable-policy", "networks-immutable-binding"}


def test_partition_guard_on_prem_pool_guard_on_aks(cfg_of: Any) -> None:
    onprem = tenancy_objects.admission_objects(cfg_of("onprem"))
    assert set(onprem) == NETWORK_GUARDS | {"partition-policy", "partition-binding"}
    assert "matchResources" not in onprem["partition-binding"]["spec"], "every namespace, not only team ones"
    objs = tenancy_objects.admission_objects(cfg_of("aks"))
    assert set(objs) == NETWORK_GUARDS | {"pool-policy", "pool-binding"}
    assert "paramRef" not in objs["pool-binding"]["spec"] and "paramKind" not in objs["pool-policy"]["spec"]
    expr = objs["pool-policy"]["spec"]["validations"][0]["expression"]
    assert "nodeSelector" in expr and "nodeAffinity" in expr and "variables.pool" in expr
    assert "params" not in json.dumps(objs["pool-policy"]), "no parameter object a team could edit"


def test_namespaces_carry_what_admission_reads(cfg_of: Any) -> None:
    onprem, aks = cfg_of("onprem"), cfg_of("aks")
    labels = tenancy_objects.namespace(onprem, onprem.teams[0])["metadata"]["labels"]
    assert labels[team_labels.PARTITION_LABEL] == "sriov8001" and team_labels.POOL_LABEL not in labels
    assert "nvidia.com/" + labels[team_labels.PARTITION_LABEL] == quotas.own_partition_resource(onprem.teams[0])
    labels = tenancy_objects.namespace(aks, aks.teams[0])["metadata"]["labels"]
    assert labels[team_labels.POOL_LABEL] == "ndh100a" and team_labels.PARTITION_LABEL not in labels
    plain = onprem.teams[0].model_copy(update={"partition": None})
    assert team_labels.PARTITION_LABEL not in tenancy_objects.namespace(onprem, plain)["metadata"]["labels"]


def test_limit_range_sets_requests_not_limits() -> None:
    assert quotas.limit_range_limits() == [{"type": "Container", "defaultRequest": {"cpu": "1", "memory": "2Gi"}}]


def test_team_namespaces_are_protected_until_the_team_is_retired() -> None:
    """Dropping a team from config must not delete its workloads in passing (issue 7, day-2)."""
    raw = raw_stack("onprem")
    raw["teams"][1]["protect"] = False
    run = run_program("onprem", config=qualified(raw))
    protected = {r.name for r in run.records if r.protect}
    namespaces = {r.name for r in run.of_type("kubernetes:core/v1:Namespace") if r.name.startswith("gpuaas-teams-")}
    assert protected == namespaces - {"gpuaas-teams-language-namespace"}
    assert len(namespaces) == len(raw["teams"])
    quota = run.named("gpuaas-teams-vision-quota")
    assert not quota.protect, "only the namespace: everything inside is recreated from config"


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_every_team_has_a_quota_of_no_pods_at_system_priority(stack: str) -> None:
    """Review item 2: the scoped quota in every team namespace, and nothing else in its scope."""
    cfg = parse_config(raw_stack(stack))
    for team in cfg.teams:
        objs = tenancy_objects.team_objects(cfg, team)
        q = objs["no-critical-priority"]
        kubernetes_validate.validate(q, K8S_VERSION, strict=True)
        assert q["metadata"] == {
            "name": teams.NO_CRITICAL_QUOTA,
            "namespace": team.ns,
            "labels": dict(team_labels.PART_OF),
        }
        assert q["spec"]["hard"] == {"pods": "0"}
        (expr,) = q["spec"]["scopeSelector"]["matchExpressions"]
        assert expr == {
            "scopeName": "PriorityClass",
            "operator": "In",
            "values": ["system-cluster-critical", "system-node-critical"],
        }
        # The allowed side: the team's own quota has no scope, so every other priority is counted there.
        assert "scopeSelector" not in objs["quota"]["spec"] and "scopes" not in objs["quota"]["spec"]


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_team_quotas_and_role_bindings_wait_for_every_admission_guard(stack: str) -> None:
    """Review item 3: a quota (GPUs, RDMA) or RoleBinding (create pods) is applied only after the guards."""
    from components.plan.offline import run_program

    run = run_program(stack, config=fixture_config(stack))
    order = {r.urn: i for i, r in enumerate(run.records)}
    guards = [r for r in run.records if r.name.startswith("gpuaas-admission-")]
    assert {r.type for r in guards} == {
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    }
    cfg = parse_config(raw_stack(stack))
    assert len(guards) == len(tenancy_objects.admission_objects(cfg))
    for team in cfg.teams:
        for role in sorted(teams.GUARDED & set(tenancy_objects.team_objects(cfg, team))):
            r = run.named(f"gpuaas-teams-{team.name}-{role}")
            assert {g.urn for g in guards} <= waits_for(run.records, r), r.name
            assert all(order[g.urn] < order[r.urn] for g in guards), f"{r.name} registered before a guard"
        # The unguarded twin: the namespace waits for no guard (the guards need no namespace).
        ns = run.named(f"gpuaas-teams-{team.name}-namespace")
        assert not {g.urn for g in guards} & waits_for(run.records, ns)
    # Nor do the guards wait for a team namespace (they select namespaces by label).
    team_ns = {run.named(f"gpuaas-teams-{t.name}-namespace").urn for t in cfg.teams}
    assert not any(team_ns & waits_for(run.records, g) for g in guards)
    # One barrier (issue 37): a guarded object waits for the guards through the member role alone, not
    # one edge per guard; the role waits for every guard itself.
    member = run.named("gpuaas-teams-member-role")
    assert {g.urn for g in guards} <= set(member.dependencies)
    for team in cfg.teams:
        quota = run.named(f"gpuaas-teams-{team.name}-quota")
        assert member.urn in quota.dependencies and not {g.urn for g in guards} & set(quota.dependencies)


def _dra_elastic_run() -> Any:
    from components.plan.offline import stack_config

    config = stack_config("onprem", Path(__file__).resolve().parents[1] / "stacks" / "onprem-dra.yaml")
    config = {**config, "gpuaas:queues": {"elastic": True}}
    return run_program("onprem", config=config), parse_config(gpuaas_section(config))


def test_quotas_wait_for_the_queue_and_claim_guards_too() -> None:
    """Item 12: an elastic quota's ceiling (borrowed GPUs) only once the queue guards hold, a DRA
    quota's device entries only once the claim guards hold: proven from the recorded dependencies
    of the offline run (what `pulumi up` orders by), on the DRA variant with elastic quotas."""
    run, cfg = _dra_elastic_run()
    order = {r.urn: i for i, r in enumerate(run.records)}
    policy_types = (
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    )
    queue_guards = [r for r in run.records if r.name.startswith("gpuaas-queues-") and r.type in policy_types]
    dra_guards = [r for r in run.records if r.name.startswith("gpuaas-dra-") and r.type in policy_types]
    assert len(queue_guards) == 2 * 13 and len(dra_guards) == 2, (len(queue_guards), len(dra_guards))
    guards = queue_guards + dra_guards
    for team in cfg.teams:
        for role in ("quota", "rolebinding"):
            r = run.named(f"gpuaas-teams-{team.name}-{role}")
            missing = {g.name for g in guards if g.urn not in waits_for(run.records, r)}
            assert not missing, f"{r.name} does not wait for {sorted(missing)}"
            assert all(order[g.urn] < order[r.urn] for g in guards), f"{r.name} registered before a guard"
        # the claims RoleBinding (create ResourceClaims) waits for the claim guards as well
        claims_binding = run.named(f"gpuaas-dra-{team.name}-rolebinding")
        assert {g.urn for g in dra_guards} <= set(claims_binding.dependencies)
        # the allowed twin: the namespace waits for none of them, nor a claim template
        assert not {g.urn for g in guards} & waits_for(run.records, run.named(f"gpuaas-teams-{team.name}-namespace"))
    team_ns = {run.named(f"gpuaas-teams-{t.name}-namespace").urn for t in cfg.teams}
    assert not any(team_ns & waits_for(run.records, g) for g in guards), "the guards need no team namespace"
    # the LocalQueues still come after their namespaces
    for team in cfg.teams:
        lq = run.named(f"gpuaas-queues-{team.name}-local-queue")
        assert run.named(f"gpuaas-teams-{team.name}-namespace").urn in lq.dependencies
