"""The alerts without a Prometheus: what each reads, what it names, and where its facts come from.

What the alerts *do* on series is proved by the real promtool (tests/e2e/test_rules_hold_on_synthetic_series.py
with tests/e2e/fault_cases.py); here: the stable names (no rule or panel reads a raw dcgm-exporter
field), the fabric names against the plans and the upstream manifests, the operator states against
the upstream CRDs, the runbook base URL as a config key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.fabric import ib_node_config, multus_kubeconfig, opensm, sriov_host
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.model.observability import DCGM_COUNTERS, DCGM_FIELDS_BEYOND_DEFAULTS
from components.observability import alerts as a
from components.observability import dcgm, xid
from components.observability.dashboards import dashboards, panel_queries
from components.observability.groups import rule_file, rule_groups
from components.observability.operator_state import (
    CLUSTER_POLICY,
    NIC_CLUSTER_POLICY,
    STATE_METRIC,
    kube_state_metrics_values,
)
from components.observability.promql import Alert
from components.operators import nic_cluster_policy
from tests.conftest import ROOT, STACKS, offline_run
from tests.observability.configs import dra_observed, observed, sm_in_cluster


def cfg_with(stack: str, **observability: Any) -> StackConfig:
    return parse_config(observed(stack, **observability))


def alerts_of(cfg: StackConfig) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule_file(cfg)["groups"] for r in g["rules"] if "alert" in r}  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Stable names: rules and panels read the recorded series, never a raw dcgm-exporter field


def raw_dcgm(expr: str) -> set[str]:
    return set(re.findall(r"\bDCGM_\w+", expr))


@pytest.mark.parametrize("stack", STACKS)
def test_only_the_dcgm_group_reads_dcgm_exporter_fields(stack: str) -> None:
    cfg = cfg_with(stack)
    outside = {
        f"{g.name}/{getattr(r, 'record', None) or getattr(r, 'alert', '')}": raw_dcgm(r.expr)
        for g in rule_groups(cfg).values()
        if g.name != "gpuaas-dcgm"
        for r in g.rules
        if raw_dcgm(r.expr)
    }
    panels = {
        q
        for board in dashboards(cfg.observability, queues=cfg.queues.elastic).values()
        for q in panel_queries(board)
        if raw_dcgm(q)
    }
    assert outside == {} and panels == set()


def test_the_dcgm_group_reads_each_renamed_field_under_both_names() -> None:
    exprs = " ".join(r.expr for r in dcgm.dcgm_group(cfg_with("onprem")).rules)
    read = raw_dcgm(exprs)
    for rename in dcgm.RENAMES:
        if rename.old == "DCGM_FI_DRIVER_VERSION":  # a label, aggregated away by every stable series
            assert rename.old not in read and rename.new not in read
            continue
        assert {rename.old, rename.new} <= read, rename
    # What it reads under the old names is what gpuaas collects (model/observability.py).
    collected = {field for field, _kind, _help in DCGM_COUNTERS}
    old_names = read - {r.new for r in dcgm.RENAMES}
    assert old_names <= collected, old_names - collected


def test_renames_convert_into_the_new_unit() -> None:
    """The two unit changes of dcgm-exporter 4.9.0: percent → ratio and MiB → bytes."""
    group = dcgm.dcgm_group(cfg_with("onprem"))
    expr = {r.record: r.expr for r in group.rules if hasattr(r, "record")}
    assert expr[dcgm.GPU_UTIL].endswith("(DCGM_FI_DEV_GPU_UTIL) / 100")
    assert expr[dcgm.FB_USED].endswith("(DCGM_FI_DEV_FB_USED) * 1048576")
    assert "DCGM_FI_DEV_GPU_UTIL_RATIO) or" in expr[dcgm.GPU_UTIL]


def test_row_remap_pending_is_collected_with_its_source(upstream: Path) -> None:
    csv = (upstream / "dcgm-exporter-4.5.3-4.8.2" / "default-counters.csv").read_text()
    assert "DCGM_FI_DEV_ROW_REMAP_PENDING" not in csv  # why the model names its source
    assert "DCGM_FI_DEV_ROW_REMAP_PENDING" in {f for f, _k, _h in DCGM_COUNTERS}
    assert "396" in DCGM_FIELDS_BEYOND_DEFAULTS["DCGM_FI_DEV_ROW_REMAP_PENDING"]


# --------------------------------------------------------------------------------------------
# XIDs


def test_xid_classes_are_disjoint_and_cover_the_issue_examples() -> None:
    assert not set(xid.APPLICATION) & set(xid.NEEDS_RESET)
    assert {13, 31, 43, 45} <= set(xid.APPLICATION)
    assert {48, 79, 95} <= set(xid.NEEDS_RESET)


def test_the_xid_alerts_follow_the_change_and_resolve() -> None:
    rules = alerts_of(cfg_with("onprem"))
    for name in ("GpuaasGpuXidApplicationError", "GpuaasGpuXidHardwareError", "GpuaasGpuXidError"):
        expr = rules[name]["expr"]
        # the event series (a change of the last XID), held a bounded time; never the raw gauge
        assert f"max_over_time({dcgm.XID_EVENT}" in expr and f"[{a.XID_HOLD}]" in expr, name
        assert "for" not in rules[name], name
    assert rules["GpuaasGpuXidApplicationError"]["labels"]["severity"] == "warning"
    assert rules["GpuaasGpuXidHardwareError"]["labels"]["severity"] == "critical"


# --------------------------------------------------------------------------------------------
# The fabric: names against the plans and the upstream manifests, states against the CRDs


@pytest.mark.parametrize("stack", STACKS)
def test_every_fabric_daemonset_of_the_plan_is_watched(stack: str) -> None:
    cfg = cfg_with(stack)
    planned = {
        r.inputs["metadata"]["name"]
        for r in offline_run(stack).records
        if r.type == "kubernetes:apps/v1:DaemonSet" and r.inputs["metadata"].get("namespace") == cfg.network.namespace
    }
    assert planned and planned <= set(a.FABRIC_DAEMONSETS), planned - set(a.FABRIC_DAEMONSETS)
    expr = alerts_of(cfg)["GpuaasFabricDaemonSetUnavailable"]["expr"]
    assert f'namespace="{cfg.network.namespace}"' in expr


def test_restated_fabric_names_match_their_owners(upstream: Path) -> None:
    ours = {sriov_host.DAEMONSET, ib_node_config.NAME, multus_kubeconfig.NAME, nic_cluster_policy.IB_SRIOV_CNI}
    assert ours <= set(a.FABRIC_DAEMONSETS)
    assert a.OPENSM_DEPLOYMENT == opensm.DEPLOYMENT
    manifests = upstream / "src" / "network-operator-v26.4.1" / "manifests"
    for state, file in (
        ("state-sriov-device-plugin", "0030-sriov-dp-daemonset.yaml"),
        ("state-rdma-shared-device-plugin", "0060_rdma-shared-dev-plugin-ds.yaml"),
    ):
        text = (manifests / state / file).read_text()
        # A NicClusterPolicy's objects carry no name suffix (pkg/state/state_skel.go nameSuffix).
        name = re.search(r"^  name: ([\w-]+)\{\{ \.NameSuffix \}\}$", text, re.M)
        assert name and name.group(1) in a.FABRIC_DAEMONSETS, state


def test_opensm_alert_only_with_the_sm_in_the_cluster() -> None:
    assert "GpuaasOpenSmNotRunning" not in alerts_of(cfg_with("onprem"))
    rule = alerts_of(parse_config(sm_in_cluster()))["GpuaasOpenSmNotRunning"]
    assert f'deployment="{opensm.DEPLOYMENT}"' in rule["expr"] and "absent(" in rule["expr"]


def test_operator_states_are_the_crds_own(upstream: Path) -> None:
    for kind, crd in (
        (
            NIC_CLUSTER_POLICY,
            upstream / "charts" / "network-operator-v26.4.1" / "crds" / "mellanox.com_nicclusterpolicies.yaml",
        ),
        (CLUSTER_POLICY, upstream / "charts" / "gpu-operator-v26.7.0" / "crds" / "nvidia.com_clusterpolicies.yaml"),
    ):
        doc = yaml.safe_load(crd.read_text())
        version = next(v for v in doc["spec"]["versions"] if v["name"] == kind.version)
        state = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["state"]
        assert (doc["spec"]["group"], doc["spec"]["names"]["kind"], doc["spec"]["names"]["plural"]) == (
            kind.group,
            kind.kind,
            kind.plural,
        )
        assert set(kind.states) == set(state["enum"]), kind.kind
        assert "ready" in kind.states


def test_kube_state_metrics_config_is_shaped_as_its_docs_say(upstream: Path) -> None:
    """The StateSet form of kube-state-metrics v2.20.0's custom-resource-state docs, and the metric
    name it produces (``kube_customresource_`` + the metric's name)."""
    docs = upstream / "kube-state-metrics-v2.20.0" / "docs" / "metrics" / "extend" / "customresourcestate-metrics.md"
    text = docs.read_text()
    assert "kind: CustomResourceStateMetrics" in text and "type: StateSet" in text
    assert "kube_customresource_status_phase{" in text  # the docs' own StateSet example's name
    values = kube_state_metrics_values()
    resources = values["customResourceState"]["config"]["spec"]["resources"]
    assert {r["groupVersionKind"]["kind"] for r in resources} == {"NicClusterPolicy", "ClusterPolicy"}
    for r in resources:
        (metric,) = r["metrics"]
        assert "kube_customresource_" + metric["name"] == STATE_METRIC
        assert metric["each"]["stateSet"]["path"] == ["status", "state"]
    assert {rule["resources"][0] for rule in values["rbac"]["extraRules"]} == {"nicclusterpolicies", "clusterpolicies"}


def test_the_notes_show_the_kube_state_metrics_values_as_rendered() -> None:
    notes = (ROOT / "docs" / "notes" / "alerts.md").read_text()
    block = notes.split("### Operator readiness: kube-state-metrics values", 1)[1].split("```yaml\n", 1)[1]
    assert yaml.safe_load(block.split("```", 1)[0]) == kube_state_metrics_values()


def test_cluster_policy_readiness_only_where_there_is_one() -> None:
    """The DRA model replaces the ClusterPolicy with a GPUCluster: only the NicClusterPolicy is alerted."""
    plain = cfg_with("onprem")
    assert a.operator_kinds(plain) == ("NicClusterPolicy", "ClusterPolicy")
    dra = parse_config(dra_observed())
    assert a.operator_kinds(dra) == ("NicClusterPolicy",)
    assert 'customresource_kind=~"NicClusterPolicy"' in alerts_of(dra)["GpuaasOperatorNotReady"]["expr"]


# --------------------------------------------------------------------------------------------
# runbook_url: a config key, on every alert


@pytest.mark.parametrize("stack", STACKS)
def test_every_alert_carries_its_runbook_under_the_default_base(stack: str) -> None:
    for name, rule in alerts_of(cfg_with(stack)).items():
        assert rule["annotations"]["runbook_url"] == f"docs/runbooks/{name}.md"


def test_the_runbook_base_is_configurable() -> None:
    rules = alerts_of(cfg_with("aks", runbookBaseUrl="https://gpuaas.example.com/runbooks/"))
    assert {r["annotations"]["runbook_url"] for r in rules.values()} == {
        f"https://gpuaas.example.com/runbooks/{name}.md" for name in rules
    }


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        ("https://user:secret@gpuaas.example.com/runbooks", "carries credentials"),
        ("docs/run books", "is not a runbook base"),
        ("{{ $labels.node }}", "is not a runbook base"),
        ("javascript:alert(1)", "is not a runbook base"),
    ],
)
def test_a_bad_runbook_base_is_refused_naming_the_key(base: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(observed("onprem", runbookBaseUrl=base))
    assert [str(i) for i in err.value.issues] == [
        f"gpuaas:observability.runbookBaseUrl: {base!r} {reason}; allowed: "
        + (
            "a URL without user:password@ (it reaches every alert receiver)"
            if "@" in base
            else "an http(s) URL (https://host/path) or a relative path of letters, digits and . _ ~ % / + -"
        )
    ]


@pytest.mark.parametrize("base", ["https://runbooks.example.com:8443/gpuaas", "http://wiki/runbooks", "ops/runbooks"])
def test_the_allowed_twins_of_a_runbook_base(base: str) -> None:
    assert parse_config(observed("onprem", runbookBaseUrl=base)).observability.runbook_base_url == base


def test_alert_objects_render_the_runbook_of_their_own_name() -> None:
    alert = Alert("GpuaasX", "vector(1)", "0s", "warning", "s", "d")
    assert alert.render({}, "https://h/r")["annotations"]["runbook_url"] == "https://h/r/GpuaasX.md"
    assert alert.render({}, "https://h/r/")["annotations"]["runbook_url"] == "https://h/r/GpuaasX.md"
