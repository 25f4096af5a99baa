"""Observability without a cluster: config rules, the monitoring objects against the upstream CRDs and
chart, the proofs' Job names the alert matches, and the showback command's refusal."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import pytest

from components import platform_args
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.model.observability import DCGM_FIELDS_BEYOND_DEFAULTS
from components.observability.component import REQUIRED_CRDS
from components.observability.monitors import KUEUE_RELEASE, kueue_scrape_objects, prometheus_rules
from components.observability.rules import PROOF_JOBS
from components.observability.showback import main
from components.operators.gpu_cluster import gpu_cluster
from components.operators.gpu_operator import dcgm_exporter_values
from components.queueing import queues
from tests import kueue_objects
from tests.conftest import STACKS, offline_run, raw_stack
from tests.schema_helpers import crd_errors

PROM_CRDS = Path("prometheus-operator-v0.93.0") / "crds"


def cfg_with(stack: str, **observability: Any) -> StackConfig:
    raw = raw_stack(stack)
    raw["observability"] = {**raw.get("observability", {}), "enabled": True, **observability}
    return parse_config(raw)


def issues(stack: str, **observability: Any) -> list[str]:
    with pytest.raises(ConfigError) as err:
        cfg_with(stack, **observability)
    return [str(i) for i in err.value.issues]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"prices": {"gpuModels": {"H100": 1.0}}}, 'gpuaas:observability.prices.gpuModels["H100"]: unknown GPU model'),
        ({"migWeights": {"3g.20gb": 0.5}}, "gpuaas:observability.migWeights[\"3g.20gb\"]: '3g.20gb' is no MIG profile"),
        ({"idle": {"window": "2m"}}, "gpuaas:observability.idle.window: 2m is shorter than 5m"),
        ({"idle": {"window": "1 hour"}}, "gpuaas:observability.idle.window: '1 hour' is not a duration"),
        ({"alertLabels": {"team": "x"}}, "gpuaas:observability.alertLabels[\"team\"]: 'team' is set by the alerts"),
        ({"evaluationInterval": "10m"}, "gpuaas:observability.evaluationInterval: 10m is longer than"),
        (
            {"idle": {"thresholdPercent": 0}},
            "gpuaas:observability.idle.thresholdPercent: Input should be greater than 0",
        ),
    ],
)
def test_bad_observability_config_is_refused_naming_the_key(change: dict[str, Any], expected: str) -> None:
    assert any(i.startswith(expected) for i in issues("onprem", **change)), issues("onprem", **change)


def test_the_allowed_twins_pass() -> None:
    cfg = cfg_with(
        "onprem",
        prices={"gpuModels": {"H100-80GB": 1.0}},
        migWeights={"1g.10gb": 0.125},
        idle={"window": "10m"},
        alertLabels={"pager": "gpu"},
        evaluationInterval="5m",
    )
    assert cfg.observability.mig_weights == {"1g.10gb": 0.125}


@pytest.mark.parametrize("stack", STACKS)
def test_monitoring_objects_validate_against_the_prometheus_operator_crds(stack: str, upstream: Path) -> None:
    cfg = cfg_with(stack)
    args = platform_args.observability(cfg)
    objs = [*prometheus_rules(cfg.observability, args.team_groups, args.groups).values()]
    if cfg.queues.elastic:
        scrape = kueue_scrape_objects(cfg.observability, cfg.queues.namespace)
        objs += [o for o in scrape.values() if o["kind"] == "ServiceMonitor"]
    crd = {"PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml"}
    crd["ServiceMonitor"] = "monitoring.coreos.com_servicemonitors.yaml"
    for obj in objs:
        assert crd_errors(obj, upstream / PROM_CRDS / crd[obj["kind"]]) == [], obj["metadata"]["name"]


def test_crd_validation_catches_a_wrong_field(upstream: Path) -> None:
    args = platform_args.observability(cfg_with("onprem"))
    obj = next(iter(prometheus_rules(args.observability, args.team_groups, args.groups).values()))
    obj["spec"]["groups"][0]["rules"][0]["recordd"] = "x"
    assert crd_errors(obj, upstream / PROM_CRDS / "monitoring.coreos.com_prometheusrules.yaml")


def test_dcgm_exporter_values_follow_the_chart_and_the_crds(upstream: Path) -> None:
    cfg = cfg_with("onprem")
    values = dcgm_exporter_values(cfg.observability, dra=False)
    templates = upstream / "charts" / "gpu-operator-v26.7.0" / "templates"
    text = "".join(f.read_text() for f in templates.glob("*.yaml"))
    # config is commented out in values.yaml: the chart's templates read each key we set.
    for key in values["config"]:
        assert f".Values.dcgmExporter.config.{key}" in text, key
    assert "dcgm-metrics.csv" in (templates / "dcgm_exporter_config.yaml").read_text()
    # The ServiceMonitor settings are ClusterPolicy/GPUCluster fields (their CRDs), relabelings included.
    gc = gpu_cluster(cfg.versions, False, driver_enabled=False, dcgm_exporter=values)
    crd = upstream / "charts" / "gpu-operator-v26.7.0" / "crds" / "nvidia.com_gpuclusters.yaml"
    assert crd_errors(gc, crd) == []
    # Every counter is a dcgm-exporter field (default-counters.csv, commented-out ones included),
    # or a DCGM field the model names with its source.
    csv = (upstream / "dcgm-exporter-4.5.3-4.8.2" / "default-counters.csv").read_text()
    known = set(re.findall(r"^#?\s*(DCGM_\w+)\s*,", csv, re.M))
    fields = [line.split(",")[0] for line in values["config"]["data"].splitlines() if not line.startswith("#")]
    assert fields and set(fields) <= known | set(DCGM_FIELDS_BEYOND_DEFAULTS)
    assert not set(DCGM_FIELDS_BEYOND_DEFAULTS) & known, "listed as beyond the defaults, yet in them"
    assert {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_ROW_REMAP_PENDING"} <= set(
        fields
    )


def test_observability_off_leaves_dcgm_exporter_to_the_operator() -> None:
    raw = raw_stack("onprem")
    raw["observability"] = {"enabled": False}
    assert dcgm_exporter_values(parse_config(raw).observability, dra=False) == {}


def test_restated_names_match_their_owners() -> None:
    assert queues.RELEASE == KUEUE_RELEASE
    cfg = cfg_with("onprem")
    assert all(t.name == kueue_objects.cluster_queue(cfg, t)["metadata"]["name"] for t in cfg.teams)


def test_every_planned_proof_job_matches_the_failure_alert() -> None:
    jobs = [r.inputs["metadata"]["name"] for r in offline_run("onprem").records if r.type == "kubernetes:batch/v1:Job"]
    assert jobs and all(re.fullmatch(PROOF_JOBS, j) for j in jobs)
    assert not re.fullmatch(PROOF_JOBS, "train-llama")


def test_showback_refuses_an_unreachable_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    code = main(["--prometheus", f"http://127.0.0.1:{port}", "--from", "2026-12-01", "--to", "2026-12-02"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"showback: cannot reach Prometheus at http://127.0.0.1:{port}" in err


def test_showback_refuses_an_empty_period(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--prometheus", "http://127.0.0.1:1", "--from", "2026-12-02", "--to", "2026-12-01"]) == 1
    assert "must be after --from" in capsys.readouterr().err


@pytest.mark.parametrize("stack", STACKS)
def test_every_monitoring_object_waits_on_the_prometheus_crd_reads(stack: str) -> None:
    """The reads of the prometheus-operator CRDs come before every object of the observability
    step (directly or through what it depends on), so a missing CRD stops the run before any of
    them is sent (tests/e2e/test_observability_refuses_without_prometheus_crds.py: for real);
    and no monitoring custom resource of the plan lives outside that step."""
    run = offline_run(stack)
    by_urn = {r.urn: r for r in run.records}
    (component,) = run.of_type("gpuaas:index:Observability")
    crd_type = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
    reads = {f"{crd_type}::{component.name}-needs-{crd.split('.')[0]}-crd" for crd in REQUIRED_CRDS}

    def waits_on(urn: str, seen: frozenset[str] = frozenset()) -> set[str]:
        found: set[str] = set()
        for dep in by_urn[urn].dependencies:
            read = dep.rsplit("$", 1)[-1]
            if read in reads:
                found.add(read)
            elif dep in by_urn and dep not in seen:
                found |= waits_on(dep, seen | {urn})
        return found

    children = [r for r in run.records if r.parent == component.urn]
    kinds = {r.type.rsplit(":", 1)[1] for r in children}
    assert {"PrometheusRule", "ConfigMap"} <= kinds, kinds
    not_waiting = [r.name for r in children if waits_on(r.urn) != reads]
    assert not not_waiting, f"sent without waiting on both CRD reads: {not_waiting}"
    outside = [
        r.name
        for r in run.records
        if r.type.startswith("kubernetes:monitoring.coreos.com/") and r.parent != component.urn
    ]
    assert not outside, outside
