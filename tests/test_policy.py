"""The policy pack's validate functions, called directly with hand-built pulumi-policy objects.

``PolicyPack(...)`` starts a gRPC server and never returns, so it lives only in
``policy/__main__.py``; here each policy's ``validate`` gets ``StackValidationArgs`` or
``ResourceValidationArgs`` built as the SDK's analyzer builds them (props in camelCase, wrapped in
the unknown-checking proxy). The last tests run the whole pack over the real offline runs.
"""

from __future__ import annotations

import copy
import json
import select
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from components.model import resources as res
from components.model.types import SEMVER_TAG
from components.plan.offline import ROOT, Record, run_program
from components.tenancy import admission, networks
from components.tenancy import labels as team_labels
from policy import policies as pol
from tests.conftest import fixture_config

NS = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
LIMITS = "kubernetes:core/v1:LimitRange"
POD = "kubernetes:core/v1:Pod"
JOB = "kubernetes:batch/v1:Job"
CRONJOB = "kubernetes:batch/v1:CronJob"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
STATEFULSET = "kubernetes:apps/v1:StatefulSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
OPERATOR_NS = "nvidia-network-operator"
SRIOV_VISION = res.sriov_resource(0x0001)  # nvidia.com/sriov8001
SRIOV_LANGUAGE = res.sriov_resource(0x0002)

Violation = tuple[str, str | None]


# --- building the SDK's objects ------------------------------------------------------------------


def _opts(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=parent,
    )


def resource(resource_type: str, props: dict[str, Any], name: str | None = None) -> PolicyResource:
    """A PolicyResource as the analyzer builds it: props behind the unknown-checking proxy."""
    name = name or props.get("metadata", {}).get("name") or props.get("name") or "r"
    ns = props.get("metadata", {}).get("namespace", "")
    urn = f"urn:pulumi:test::gpuaas::{resource_type}::{ns}-{name}"
    return PolicyResource(
        resource_type, unknown_checking_proxy(copy.deepcopy(props)), urn, name, _opts(), None, None, [], {}
    )


def run_policy(policy: Policy, resources: Sequence[PolicyResource]) -> list[Violation]:
    """Violations of one policy over a stack: stack policies once, resource policies per resource."""
    found: list[Violation] = []

    def report(message: str, urn: str | None = None) -> None:
        found.append((message, urn))

    if isinstance(policy, StackValidationPolicy):
        policy.validate(StackValidationArgs(list(resources)), report)
    else:
        assert isinstance(policy, ResourceValidationPolicy)
        for r in resources:
            before = len(found)
            args = ResourceValidationArgs(r.resource_type, r.props, r.urn, r.name, r.opts, r.provider)
            policy.validate(args, report)
            # A resource policy's violations belong to the resource it validated.
            found[before:] = [(m, u or r.urn) for m, u in found[before:]]
    return found


def run_pack(resources: Sequence[PolicyResource]) -> dict[str, list[Violation]]:
    return {p.name: v for p in pol.POLICIES if (v := run_policy(p, resources))}


# --- manifests -----------------------------------------------------------------------------------


def namespace(name: str, team: str | None = None) -> PolicyResource:
    labels = {team_labels.TEAM_LABEL: team} if team else {}
    return resource(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def quota(ns: str) -> PolicyResource:
    meta = {"name": "gpuaas-team-quota", "namespace": ns}
    return resource(QUOTA, {"kind": "ResourceQuota", "metadata": meta, "spec": {"hard": {"requests.cpu": "8"}}})


def limits(ns: str) -> PolicyResource:
    meta = {"name": "gpuaas-team-defaults", "namespace": ns}
    return resource(LIMITS, {"kind": "LimitRange", "metadata": meta, "spec": {"limits": []}})


def nad(ns: str | None, name: str, resource_name: str) -> PolicyResource:
    meta: dict[str, Any] = {"name": name, "annotations": {networks.RESOURCE_NAME_ANNOTATION: resource_name}}
    if ns is not None:
        meta["namespace"] = ns
    props = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": meta}
    return resource(pol.NAD_TYPE, props)


def pod_spec(
    requests: dict[str, str] | None = None,
    limits_: dict[str, str] | None = None,
    privileged: bool = False,
    init: bool = False,
    **pod_fields: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox:1.37"}
    if requests is not None or limits_ is not None:
        container["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits_)) if v is not None}
    if privileged:
        container["securityContext"] = {"privileged": True}
    spec: dict[str, Any] = {"containers": [{"name": "sidecar", "image": "busybox:1.37"}], **pod_fields}
    if init:
        spec["initContainers"] = [container]
    else:
        spec["containers"].append(container)
    return spec


def workload(
    resource_type: str, ns: str, name: str, spec: dict[str, Any], networks: str | None = None
) -> PolicyResource:
    """A workload of ``resource_type`` whose pod template is ``spec`` (+ the networks annotation)."""
    template_meta: dict[str, Any] = {"annotations": {pol.NETWORKS_ANNOTATION: networks}} if networks else {}
    template = {"metadata": template_meta, "spec": spec}
    meta = {"name": name, "namespace": ns}
    kind = resource_type.rsplit(":", 1)[1]
    if kind == "Pod":
        props: dict[str, Any] = {"kind": kind, "metadata": {**meta, **template_meta}, "spec": spec}
    elif kind == "CronJob":
        props = {"kind": kind, "metadata": meta, "spec": {"jobTemplate": {"spec": {"template": template}}}}
    else:
        props = {"kind": kind, "metadata": meta, "spec": {"template": template}}
    return resource(resource_type, props)


def networks_json(*refs: tuple[str | None, str]) -> str:
    return json.dumps([{"name": n, **({"namespace": ns} if ns else {}), "interface": "net1"} for ns, n in refs])


def release(version: Any, resource_type: str = RELEASE) -> PolicyResource:
    props = {"name": "network-operator", "chart": "network-operator", "namespace": OPERATOR_NS}
    if version is not None:
        props["version"] = version
    return resource(resource_type, props)


def partition_guard(actions: list[str] | None = None) -> list[PolicyResource]:
    """The partition admission policy and its binding, as components/tenancy/admission.py renders them."""
    meta = {"name": pol.PARTITION_POLICY}
    binding = {"policyName": pol.PARTITION_POLICY, "validationActions": actions or ["Deny"]}
    return [
        resource(pol.VAP_TYPE, {"kind": "ValidatingAdmissionPolicy", "metadata": meta, "spec": {}}),
        resource(pol.VAP_BINDING_TYPE, {"kind": "ValidatingAdmissionPolicyBinding", "metadata": meta, "spec": binding}),
    ]


def platform(*extra: PolicyResource) -> list[PolicyResource]:
    """A compliant two-team stack: what the components produce, in miniature, plus ``extra``."""
    return [
        namespace(OPERATOR_NS),
        namespace("vision", team="vision"),
        namespace("language", team="language"),
        quota("vision"),
        limits("vision"),
        quota("language"),
        limits("language"),
        nad("vision", "ib-vision", SRIOV_VISION),
        nad("language", "ib-language", SRIOV_LANGUAGE),
        workload(DAEMONSET, OPERATOR_NS, "ib-node-config", pod_spec(privileged=True, hostPID=True, hostNetwork=True)),
        workload(
            JOB,
            "vision",
            "verify-ib-server",
            pod_spec(requests={SRIOV_VISION: "1", "cpu": "2"}, limits_={SRIOV_VISION: "1"}),
            networks=networks_json(("vision", "ib-vision")),
        ),
        release("v26.4.1"),
        *partition_guard(),
        *extra,
    ]


def violations_of(policy: Policy, *extra: PolicyResource, base: list[PolicyResource] | None = None) -> list[str]:
    return [m for m, _ in run_policy(policy, (platform() if base is None else base) + list(extra))]


# --- the pack ------------------------------------------------------------------------------------


def test_compliant_platform_has_no_violations() -> None:
    assert run_pack(platform()) == {}


def test_pack_lists_every_policy_once_and_is_mandatory() -> None:
    names = [p.name for p in pol.POLICIES]
    assert len(names) == len(set(names)) == 7
    assert pol.ENFORCEMENT.value == "mandatory"
    text = (Path(pol.__file__).parent / "__main__.py").read_text()
    assert text.count("PolicyPack(") == 1 and "def " not in text


def test_constants_match_the_components() -> None:
    assert pol.PARTITION_POLICY == admission.PARTITION_POLICY
    assert pol.TEAM_LABEL == team_labels.TEAM_LABEL
    assert pol.RESOURCE_NAME_ANNOTATION == networks.RESOURCE_NAME_ANNOTATION
    assert res.sriov_resource(0x0001).startswith(pol.SRIOV_PREFIX)
    assert res.sriov_resource(0x7FFF).startswith(pol.SRIOV_PREFIX)


# --- team namespaces: quota and limits -----------------------------------------------------------


def _without(kind_type: str, ns: str) -> list[PolicyResource]:
    return [r for r in platform() if not (r.resource_type == kind_type and r.props["metadata"].get("namespace") == ns)]


@pytest.mark.parametrize(("missing_type", "kind"), [(QUOTA, "ResourceQuota"), (LIMITS, "LimitRange")])
def test_team_namespace_without_guard_is_reported(missing_type: str, kind: str) -> None:
    found = run_policy(pol.team_namespace_guards, _without(missing_type, "language"))
    assert len(found) == 1
    message, urn = found[0]
    assert f"team namespace 'language' (team 'language') has no {kind}" in message
    assert urn == namespace("language", "language").urn


def test_guard_in_another_namespace_does_not_count() -> None:
    base = [*_without(QUOTA, "language"), quota(OPERATOR_NS)]
    assert len(violations_of(pol.team_namespace_guards, base=base)) == 1


def test_namespace_without_team_label_needs_no_guards() -> None:
    assert violations_of(pol.team_namespace_guards, namespace("monitoring")) == []


# --- team workloads: partition resources ---------------------------------------------------------


@pytest.mark.parametrize("kind_type", [POD, JOB, CRONJOB, DEPLOYMENT, DAEMONSET, STATEFULSET])
def test_workload_requesting_another_teams_partition_is_reported(kind_type: str) -> None:
    w = workload(kind_type, "vision", "steal", pod_spec(requests={SRIOV_LANGUAGE: "1"}))
    found = run_policy(pol.team_partitions, [*platform(), w])
    assert len(found) == 1
    message, urn = found[0]
    assert urn == w.urn
    assert f"vision/steal of team 'vision' requests {SRIOV_LANGUAGE}" in message
    assert "['language']" in message


@pytest.mark.parametrize(
    "spec",
    [
        pod_spec(limits_={SRIOV_LANGUAGE: "1"}),  # extended resources may be given as limits only
        pod_spec(requests={SRIOV_LANGUAGE: "1"}, init=True),
        {"containers": [], "resources": {"limits": {SRIOV_LANGUAGE: "1"}}},  # pod-level resources
    ],
    ids=["limits-only", "init-container", "pod-level"],
)
def test_every_place_a_resource_can_be_asked_for_is_checked(spec: dict[str, Any]) -> None:
    assert len(violations_of(pol.team_partitions, workload(JOB, "vision", "steal", spec))) == 1


def test_own_partition_unowned_resources_and_operator_namespaces_pass() -> None:
    own = workload(JOB, "language", "own", pod_spec(requests={SRIOV_LANGUAGE: "1", res.GPU: "8"}))
    unowned = workload(JOB, "vision", "other-pkey", pod_spec(requests={res.sriov_resource(0x0009): "1"}))
    operator = workload(DAEMONSET, OPERATOR_NS, "probe", pod_spec(requests={SRIOV_LANGUAGE: "1"}))
    assert violations_of(pol.team_partitions, own, unowned, operator) == []


def test_partition_resource_named_by_two_teams_is_reported() -> None:
    found = violations_of(pol.team_partitions, nad("language", "ib-vision-too", SRIOV_VISION))
    assert found == [
        f"partition resource {SRIOV_VISION} is named by the NADs of teams ['language', 'vision']: each IB "
        "partition's VF pool belongs to exactly one team"
    ]


@pytest.mark.parametrize("drop", [pol.VAP_TYPE, pol.VAP_BINDING_TYPE])
def test_partitions_without_their_admission_guard_are_reported(drop: str) -> None:
    base = [r for r in platform() if r.resource_type != drop]
    (message,) = violations_of(pol.partition_guard, base=base)
    assert f"{SRIOV_VISION}" in message and pol.PARTITION_POLICY in message


def test_a_guard_that_only_warns_does_not_count() -> None:
    base = [r for r in platform() if r.resource_type != pol.VAP_BINDING_TYPE] + partition_guard(["Warn"])[1:]
    assert len(violations_of(pol.partition_guard, base=base)) == 1


def test_no_partitions_need_no_guard() -> None:
    base = [r for r in platform() if r.resource_type not in (pol.NAD_TYPE, pol.VAP_TYPE, pol.VAP_BINDING_TYPE)]
    assert violations_of(pol.partition_guard, base=base) == []


def test_shared_non_partition_resource_is_usable_by_every_team_naming_it() -> None:
    shared = "rdma/hca_shared_devices_a"
    base = [*platform(), nad("vision", "rdma-vision", shared), nad("language", "rdma-language", shared)]
    user = workload(JOB, "language", "rdma", pod_spec(requests={shared: "1"}))
    assert violations_of(pol.team_partitions, user, base=base) == []


# --- team workloads: networks --------------------------------------------------------------------


@pytest.mark.parametrize(
    "networks",
    [
        networks_json(("language", "ib-language")),
        networks_json(("vision", "ib-vision"), ("language", "ib-language")),
        "language/ib-language",
        "ib-vision, language/ib-language@net2",
    ],
)
def test_workload_attaching_to_another_namespaces_nad_is_reported(networks: str) -> None:
    w = workload(POD, "vision", "peek", pod_spec(), networks=networks)
    found = run_policy(pol.team_networks, [*platform(), w])
    assert len(found) == 1
    assert found[0] == (
        "Pod vision/peek of team 'vision' attaches to NetworkAttachmentDefinition language/ib-language; a team's "
        "pods use only the NADs of their own namespace 'vision'",
        w.urn,
    )


@pytest.mark.parametrize(
    "networks",
    [networks_json((None, "ib-vision")), networks_json(("vision", "ib-vision")), "ib-vision", "vision/ib-vision@net1"],
)
def test_own_namespace_networks_pass(networks: str) -> None:
    assert violations_of(pol.team_networks, workload(DEPLOYMENT, "vision", "ok", pod_spec(), networks=networks)) == []


@pytest.mark.parametrize("networks", ['[{"name": "ib-vision"', '[{"interface": "net1"}]', "ib-vision,,", '{"a": 1}'])
def test_malformed_networks_annotation_is_reported(networks: str) -> None:
    [message] = violations_of(pol.team_networks, workload(JOB, "vision", "bad", pod_spec(), networks=networks))
    assert message.startswith(f"Job vision/bad: annotation {pol.NETWORKS_ANNOTATION} cannot be parsed")


def test_networks_of_operator_namespaces_are_not_team_business() -> None:
    w = workload(DAEMONSET, OPERATOR_NS, "x", pod_spec(), networks="language/ib-language")
    assert violations_of(pol.team_networks, w) == []


# --- privileged pods -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "setting"),
    [
        (pod_spec(privileged=True), "container 'main' securityContext.privileged: true"),
        (pod_spec(privileged=True, init=True), "container 'main' securityContext.privileged: true"),
        (pod_spec(hostNetwork=True), "hostNetwork: true"),
        (pod_spec(hostPID=True), "hostPID: true"),
        (pod_spec(hostIPC=True), "hostIPC: true"),
    ],
)
def test_privileged_pod_in_team_namespace_is_reported(spec: dict[str, Any], setting: str) -> None:
    w = workload(JOB, "vision", "root", spec)
    found = run_policy(pol.privileged_placement, [*platform(), w])
    assert found == [
        (
            f"Job vision/root is privileged ({setting}) in team namespace 'vision'; privileged pods run only in "
            f"operator namespaces ({OPERATOR_NS})",
            w.urn,
        )
    ]


@pytest.mark.parametrize("ns", ["default", "kube-system"])
def test_privileged_pod_in_a_namespace_the_stack_does_not_create_is_reported(ns: str) -> None:
    [message] = violations_of(pol.privileged_placement, workload(DAEMONSET, ns, "root", pod_spec(hostNetwork=True)))
    assert f"in namespace '{ns}', which this stack does not create as an operator namespace" in message


def test_unprivileged_pods_anywhere_and_privileged_ones_in_operator_namespaces_pass() -> None:
    explicit_false = pod_spec(hostNetwork=False)
    explicit_false["containers"][0]["securityContext"] = {"privileged": False}
    extra = [
        workload(JOB, "vision", "plain", explicit_false),
        workload(DEPLOYMENT, "default", "plain", pod_spec()),
        workload(POD, OPERATOR_NS, "root", pod_spec(privileged=True, hostIPC=True)),
    ]
    assert violations_of(pol.privileged_placement, *extra) == []


# --- Helm chart versions -------------------------------------------------------------------------

PINNED = ["v26.4.1", "26.4.1", "1.2.3-rc.1", "0.0.1+build.5"]
FLOATING = [
    "",
    "latest",
    "*",
    "1.2",
    "v1",
    "1.2.x",
    "^1.2.0",
    "~1.2.3",
    ">=1.0.0",
    "1.2.3 - 1.4.0",
    "1.2.3\n",
    " 1.2.3",
]


@pytest.mark.parametrize("version", PINNED)
def test_exact_chart_version_passes(version: str) -> None:
    assert run_policy(pol.helm_version, [release(version)]) == []


@pytest.mark.parametrize("version", [*FLOATING, None, 26.4])
def test_floating_or_missing_chart_version_is_reported(version: Any) -> None:
    r = release(version)
    assert run_policy(pol.helm_version, [r]) == [
        (
            f"Helm chart 'network-operator' has version {version!r}: pin an exact chart version like v26.4.1 "
            "(empty, ranges, wildcards and partial versions let the chart change under the same config)",
            r.urn,
        )
    ]


def test_helm_v4_chart_is_checked_too_and_other_types_are_not() -> None:
    assert len(run_policy(pol.helm_version, [release("^1.0.0", "kubernetes:helm.sh/v4:Chart")])) == 1
    assert run_policy(pol.helm_version, [release("^1.0.0", "kubernetes:core/v1:ConfigMap")]) == []


@pytest.mark.parametrize("version", PINNED + FLOATING)
def test_exact_version_agrees_with_the_config_model(version: str) -> None:
    # The config model refuses what the pack would report; a drift between the two fails here.
    assert bool(pol.EXACT_VERSION.fullmatch(version)) == bool(SEMVER_TAG.fullmatch(version))


def test_unknown_version_during_preview_is_left_to_the_sdk() -> None:
    # The analyzer turns UnknownValueError into "can't run policy during preview" (advisory).
    with pytest.raises(UnknownValueError):
        run_policy(pol.helm_version, [release(UNKNOWN_STRING_VALUE)])


# --- NADs in default -----------------------------------------------------------------------------


@pytest.mark.parametrize(("ns", "shown"), [("default", "namespace 'default'"), (None, "no metadata.namespace")])
def test_nad_in_default_namespace_is_reported(ns: str | None, shown: str) -> None:
    [(message, _)] = run_policy(pol.nad_namespace, [nad(ns, "ib-everyone", SRIOV_VISION)])
    assert message.startswith(f"NetworkAttachmentDefinition 'ib-everyone' has {shown}")


def test_nads_in_team_namespaces_and_other_defaults_pass() -> None:
    cm = resource("kubernetes:core/v1:ConfigMap", {"metadata": {"name": "x", "namespace": "default"}})
    assert run_policy(pol.nad_namespace, [*platform(), cm]) == []


# --- the real stacks -----------------------------------------------------------------------------


def policy_resources(records: Sequence[Record]) -> list[PolicyResource]:
    """Offline-run records as the analyzer's stack resources: props, parents and dependencies."""
    by_urn: dict[str, PolicyResource] = {}
    for r in records:
        by_urn[r.urn] = PolicyResource(
            r.type,
            unknown_checking_proxy(copy.deepcopy(r.inputs)),
            r.urn,
            r.name,
            _opts(r.parent or None),
            None,
            None,
            [],
            {},
        )
    for r in records:
        pr = by_urn[r.urn]
        pr.parent = by_urn.get(r.parent)
        pr.dependencies = [by_urn[d] for d in r.dependencies if d in by_urn]
    return list(by_urn.values())


@pytest.fixture(scope="module", params=["onprem", "aks"])
def stack_resources(request: pytest.FixtureRequest) -> list[PolicyResource]:
    return policy_resources(run_program(request.param, config=fixture_config(request.param)).records)


def test_checked_in_stacks_pass_every_policy(stack_resources: list[PolicyResource]) -> None:
    assert run_pack(stack_resources) == {}


def test_checked_in_stacks_exercise_the_policies(stack_resources: list[PolicyResource]) -> None:
    # Not vacuous: each stack has team namespaces with workloads, operator namespaces, and charts.
    ten = pol.tenancy(stack_resources)
    assert ten.team_of and ten.operator_namespaces
    assert any(w.namespace in ten.team_of for w in pol.workloads(stack_resources))
    assert any(pol.privileged_settings(w.pod_spec) for w in pol.workloads(stack_resources))
    assert any(r.resource_type in pol.HELM_TYPES for r in stack_resources)


def test_a_broken_real_stack_is_caught(stack_resources: list[PolicyResource]) -> None:
    # The same check with one team namespace's quota removed: the pack must notice.
    ten = pol.tenancy(stack_resources)
    victim = sorted(ten.team_of)[0]
    broken = [
        r for r in stack_resources if not (r.resource_type == QUOTA and r.props["metadata"].get("namespace") == victim)
    ]
    found = run_pack(broken)
    assert list(found) == ["team-namespace-quota-and-limits"]
    assert f"team namespace {victim!r}" in found["team-namespace-quota-and-limits"][0][0]


# --- the pack as the engine runs it --------------------------------------------------------------


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    """``policy/__main__.py`` as the CLI starts it: it prints its port and serves the Analyzer API
    on loopback until killed."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "policy" / "__main__.py")], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "the policy pack did not print its port within 30 s"
        port = int(proc.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(props)
    return s


def test_pack_serves_every_policy_as_mandatory(analyzer: Any) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=10)
    assert info.name == "gpuaas"
    assert [(p.name, p.enforcementLevel) for p in info.policies] == [
        (p.name, analyzer_pb2.MANDATORY) for p in pol.POLICIES
    ]


def test_pack_reports_through_the_engine_protocol(analyzer: Any) -> None:
    team_ns = {"metadata": {"name": "vision", "labels": {team_labels.TEAM_LABEL: "vision"}}}
    stack = analyzer.AnalyzeStack(
        analyzer_pb2.AnalyzeStackRequest(
            resources=[analyzer_pb2.AnalyzerResource(type=NS, properties=_struct(team_ns), urn="urn:ns", name="ns")]
        ),
        timeout=30,
    )
    assert [(d.policyName, d.urn, d.enforcementLevel) for d in stack.diagnostics] == [
        ("team-namespace-quota-and-limits", "urn:ns", analyzer_pb2.MANDATORY)
    ] * 2
    one = analyzer.Analyze(
        analyzer_pb2.AnalyzeRequest(type=RELEASE, properties=_struct({"version": "~1.2"}), urn="urn:r", name="r"),
        timeout=30,
    )
    assert [d.policyName for d in one.diagnostics] == ["helm-release-pinned-version"]


def test_real_stack_is_clean_through_the_engine_protocol(analyzer: Any) -> None:
    records = run_program("onprem", config=fixture_config("onprem")).records
    request = analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(
                type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name, parent=r.parent
            )
            for r in records
        ]
    )
    assert list(analyzer.AnalyzeStack(request, timeout=60).diagnostics) == []
