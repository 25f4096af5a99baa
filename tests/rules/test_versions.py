"""The Kubernetes version rule: support dates on a pinned day, AKS OS SKUs, charts' kubeVersion, Kueue.

Every refusal names ``components/rules/versions.py`` as the policy and comes with its allowed twin;
the chart constraints are read from the real charts in ../shared/upstream/charts.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.loader import TODAY_ENV, parse_config, todays_date
from components.model import kubernetes, versions
from components.model.errors import ConfigError
from components.plan.writer import main
from components.rules.versions import os_sku_warnings, support_warnings
from e2e.upstream import CheckedPath
from tests.conftest import raw_stack, stack_path
from tests.rules.test_config_rules import Edit, _del, _set

TODAY = date(2026, 12, 1)
KEY = "gpuaas:platform.kubernetesVersion"


def _issues(stack: str, edit: Edit, today: date = TODAY) -> list[str]:
    raw = raw_stack(stack)
    edit(raw)
    try:
        parse_config(raw, today)
    except ConfigError as err:
        return [str(i) for i in err.issues]
    return []


def _all(*edits: Edit) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        for e in edits:
            e(raw)

    return edit


def _os(sku: str) -> Edit:
    """Every AKS pool (System and GPU) on ``sku``."""

    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["systemPool"]["osSku"] = sku
        for pool in raw["platform"]["gpuPools"]:
            pool["osSku"] = sku

    return edit


# (id, stack, bad edit, today, expected path, fragments of the reason, allowed twin)
CASES: list[tuple[str, str, Edit, date, str, tuple[str, ...], Edit]] = [
    (
        "aks-past-standard-support",
        "aks",
        _set("platform.kubernetesVersion", "1.34.10"),
        TODAY,
        KEY,
        ("Kubernetes 1.34 reached the end of its AKS standard support on 2026-11-30", kubernetes.AKS_CALENDAR, "1.35"),
        _set("platform.kubernetesVersion", "1.35.7"),
    ),
    (
        "onprem-past-end-of-life",
        "onprem",
        _set("platform.kubernetesVersion", "1.34.4"),
        TODAY,
        KEY,
        ("Kubernetes 1.34 reached the end of its life on 2026-10-28", kubernetes.UPSTREAM, "1.35 (until 2027-02-28)"),
        _set("platform.kubernetesVersion", "1.35.4"),
    ),
    (
        "onprem-undeclared",
        "onprem",
        _del("platform.kubernetesVersion"),
        TODAY,
        KEY,
        ("is required on-prem", "kubectl version"),
        _set("platform.kubernetesVersion", "1.37.2"),
    ),
    (
        "newer-than-the-table",
        "onprem",
        _set("platform.kubernetesVersion", "1.38.0"),
        TODAY,
        KEY,
        ("no support dates for Kubernetes 1.38", "ends at 1.37"),
        _set("platform.kubernetesVersion", "1.37.2"),
    ),
    (
        "older-than-the-table",
        "aks",
        _set("platform.kubernetesVersion", "1.31"),
        TODAY,
        KEY,
        ("older than 1.32", "2026-03-31"),
        _set("platform.kubernetesVersion", "1.36"),
    ),
    (
        "aks-before-its-ga",
        "aks",
        _set("platform.kubernetesVersion", "1.37.1"),
        date(2026, 10, 1),
        KEY,
        ("AKS has not made Kubernetes 1.37 generally available by 2026-10-01",),
        _set("platform.kubernetesVersion", "1.36.3"),
    ),
    (
        "aks-ubuntu2204-after-1.36",
        "aks",
        _set("platform.kubernetesVersion", "1.37.1"),
        TODAY,
        "gpuaas:platform.gpuPools[0].osSku",
        ("Ubuntu2204: AKS supports it on Kubernetes 1.25 to 1.36 only", kubernetes.AKS_OS_DOC, "use Ubuntu2404"),
        _all(_set("platform.kubernetesVersion", "1.37.1"), _os("Ubuntu2404")),
    ),
    (
        "aks-one-os-per-cluster",
        "aks",
        _set("platform.gpuPools[1].osSku", "Ubuntu2404"),
        TODAY,
        "gpuaas:platform.gpuPools",
        ("Ubuntu2204 and Ubuntu2404", "not compatible with multiple OS versions"),
        _os("Ubuntu2404"),
    ),
    (
        "chart-kube-version",
        "onprem",
        _set("platform.kubernetesVersion", "1.20.0"),
        TODAY,
        "gpuaas:versions.networkOperatorChart",
        ("chart network-operator declares kubeVersion '>= 1.21.0-0'",),
        _set("platform.kubernetesVersion", "1.37.2"),
    ),
    (
        "kueue-range",
        "onprem",
        _set("platform.kubernetesVersion", "1.28.9"),
        TODAY,
        KEY,
        ("Kueue v0.19.2 requires Kubernetes 1.29 or newer",),
        _set("platform.kubernetesVersion", "1.36.3"),
    ),
]


@pytest.mark.parametrize(
    ("stack", "edit", "today", "path", "fragments", "twin"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_version_rule_refuses_and_its_twin_passes(
    stack: str, edit: Edit, today: date, path: str, fragments: tuple[str, ...], twin: Edit
) -> None:
    """Policy components/rules/versions.py: the refusal names the key, the date and the source."""
    found = [i for i in _issues(stack, edit, today) if i.startswith(f"{path}:")]
    assert any(all(f in i for f in fragments) for i in found), found or _issues(stack, edit, today)
    assert _issues(stack, twin, today) == []


def test_support_ends_at_the_end_of_its_last_day() -> None:
    """AKS 1.34's standard support ends on 2026-11-30: still allowed (and warned about) that day, refused the next."""
    raw = raw_stack("aks")
    raw["platform"]["kubernetesVersion"] = "1.34.10"
    last_day = date(2026, 11, 30)
    (warning,) = support_warnings(parse_config(raw, last_day), last_day)
    assert "on 2026-11-30, in 0 days" in warning
    assert [i for i in _issues("aks", _set("platform.kubernetesVersion", "1.34.10")) if "2026-11-30" in i]


def test_every_problem_at_once_and_never_a_traceback() -> None:
    """An old version on-prem: its end of life, the chart it cannot run and Kueue's floor, together."""
    issues = _issues("onprem", _set("platform.kubernetesVersion", "1.20.0"))
    assert [i.split(":")[1] for i in issues] == ["platform.kubernetesVersion"] * 2 + ["versions.networkOperatorChart"]


def test_checked_in_defaults_run_today() -> None:
    """No default and no stack of the tests' is past (or near) its end on the day the table was reviewed."""
    for stack in ("onprem", "aks"):
        cfg = parse_config(raw_stack(stack), kubernetes.REVIEWED)
        assert support_warnings(cfg, kubernetes.REVIEWED) == []
    aks = raw_stack("aks")
    aks["platform"].pop("kubernetesVersion", None)
    assert parse_config(aks, kubernetes.REVIEWED).platform.kubernetes_version == versions.AKS_KUBERNETES
    dra = yaml.safe_load((Path(__file__).parents[1] / "stacks/onprem-dra.yaml").read_text())["config"]
    assert dra["gpuaas:platform"]["kubernetesVersion"] != "1.34.4"
    row = kubernetes.support(kubernetes.minor_of(versions.AKS_KUBERNETES) or (0, 0))
    assert row is not None and row.aks_end_of_support is not None
    assert (row.aks_end_of_support - kubernetes.REVIEWED).days > kubernetes.WARN_DAYS


@pytest.mark.parametrize(
    ("stack", "version", "today", "warned"),
    [
        ("onprem", "1.35.4", date(2027, 1, 15), "reaches its end of life on 2027-02-28, in 44 days"),
        ("onprem", "1.35.4", date(2026, 12, 29), None),  # 61 days before
        ("aks", "1.35.7", date(2027, 2, 1), "reaches its AKS standard support on 2027-03-31, in 58 days"),
        ("aks", "1.35.7", date(2027, 1, 15), None),  # upstream's 1.35 ends sooner; AKS supports it longer
    ],
)
def test_a_version_near_its_end_warns_on_the_console(stack: str, version: str, today: date, warned: str | None) -> None:
    raw = raw_stack(stack)
    raw["platform"]["kubernetesVersion"] = version
    found = support_warnings(parse_config(raw, today), today)
    if warned is None:
        assert found == []
    else:
        (line,) = found
        assert line.startswith(f"{KEY}: {version}: ") and warned in line, line


@pytest.mark.parametrize(
    ("version", "constraint", "holds"),
    [
        ("1.36.3", ">= 1.21.0-0", True),
        ("1.20.15", ">= 1.21.0-0", False),
        ("1.34.0", ">=1.34.0-0", True),
        ("1.33.9", ">=1.34.0-0", False),
        ("1.36.1", "~1.36", True),
        ("1.37.0", "~1.36", False),
        ("1.36.9", "1.36.x", True),
        ("1.36.1", ">=1.30 <1.37", True),
        ("1.37.1", ">=1.30, <1.37", False),
        ("1.20.0", "<1.21 || >=1.30", True),
        ("1.25.0", "<1.21 || >=1.30", False),
        ("1.37.2", "^1.29", True),
        ("1.36.0", "!=1.36.0", False),
    ],
)
def test_kube_version_constraints_read_as_helm_does(version: str, constraint: str, holds: bool) -> None:
    assert kubernetes.satisfies(version, constraint) is holds


def test_an_unreadable_constraint_is_an_error_not_a_pass() -> None:
    with pytest.raises(ValueError, match="not a semver comparator"):
        kubernetes.satisfies("1.36.0", ">= one.two")


def _charts_declaring_kube_version(upstream: CheckedPath) -> dict[tuple[str, str], str]:
    """Every Chart.yaml under the upstream folder's ``charts/`` (each read checked as upstream's)."""
    root = Path(upstream) / "charts"
    found: dict[tuple[str, str], str] = {}
    for chart in sorted(root.glob("**/Chart.yaml")):
        meta = yaml.safe_load((upstream / chart.relative_to(Path(upstream))).read_text())
        top = chart.parent.parent == root
        # A top-level chart by the release tag gpuaas pins (its folder, <name>-<tag>: the Chart.yaml of a
        # tag may say v1.0.0-devel); a subchart by its Chart.yaml version.
        version = chart.parent.name.rsplit("-", 1)[1] if top else str(meta["version"])
        if meta.get("kubeVersion"):
            found[(meta["name"], version)] = meta["kubeVersion"]
    return found


def test_the_chart_table_is_what_the_real_charts_declare(upstream: CheckedPath) -> None:
    """Every Chart.yaml in the upstream charts that declares kubeVersion, and nothing else."""
    assert _charts_declaring_kube_version(upstream) == kubernetes.CHART_KUBE_VERSIONS


def test_every_supported_minor_meets_every_real_chart_constraint(upstream: CheckedPath) -> None:
    """The charts we deploy install on every minor a stack may run; HAMi's DRA driver needs 1.34+."""
    real = _charts_declaring_kube_version(upstream)
    assert real, "the upstream charts declare kubeVersion constraints"
    for minor in kubernetes.supported(kubernetes.REVIEWED, aks=False):
        for (chart, version), constraint in real.items():
            assert kubernetes.satisfies(f"{minor.name}.0", constraint), (chart, version, constraint, minor.name)
    assert not kubernetes.satisfies("1.33.9", real[("hami-dra-driver", "0.1.0")])


def test_the_rule_reads_the_deployed_charts_versions() -> None:
    """A chart version the table does not know has no constraint to check; the pinned ones are known."""
    assert ("network-operator", versions.NETWORK_OPERATOR_CHART) in kubernetes.CHART_KUBE_VERSIONS
    assert ("gpu-operator", versions.GPU_OPERATOR_CHART) in kubernetes.CHART_KUBE_VERSIONS


@pytest.mark.parametrize(
    ("feature", "version", "on"),
    [
        ("DRAConsumableCapacity", "1.35.4", False),
        ("DRAConsumableCapacity", "1.36.0", True),
        ("DRAPartitionableDevices", "1.35", False),
        ("DRAPartitionableDevices", "1.37.2", True),
        ("DynamicResourceAllocation", "1.33.9", False),
        ("DynamicResourceAllocation", "1.34.0", True),
        ("MutatingAdmissionPolicy", "1.35.4", False),
        ("MutatingAdmissionPolicy", "1.36.3", True),
    ],
)
def test_feature_facts_for_other_areas(feature: str, version: str, on: bool) -> None:
    assert kubernetes.has_feature(feature, version) is on
    assert kubernetes.feature_since("DynamicResourceAllocation") == versions.DRA_MIN_KUBERNETES
    assert kubernetes.FEATURES["DRAConsumableCapacity"].stage((1, 35)) == "Alpha"
    assert kubernetes.FEATURES["DRAConsumableCapacity"].stage((1, 37)) == "Beta"
    with pytest.raises(KeyError):
        kubernetes.feature_since("NoSuchGate")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_plan_never_depends_on_the_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two dates, one 44 days before 1.35's end of life: the same plan bytes; only the console differs."""
    stack = tmp_path / "Pulumi.onprem.yaml"
    text = (stack_path("onprem")).read_text()
    stack.write_text(text.replace('kubernetesVersion: "1.37.2"', 'kubernetesVersion: "1.35.4"'))
    trees = []
    for day in ("2026-12-01", "2027-01-15"):
        monkeypatch.setenv(TODAY_ENV, day)
        caplog.clear()
        out = tmp_path / day
        assert main(["onprem", "--stack-file", str(stack), "--out", str(out), "--quiet"]) == 0
        trees.append(_tree(out))
        warned = [r.getMessage() for r in caplog.records if "reaches its end of life" in r.getMessage()]
        assert warned == ([] if day == "2026-12-01" else [warned[0]]), warned
    assert trees[0] == trees[1]
    assert "in 44 days" in warned[0]
    # Past the end of life the same stack is still planned (issue 35, item 10: only the deploy is
    # refused), saying so on the console; the plan's bytes still do not depend on the date.
    monkeypatch.setenv(TODAY_ENV, "2027-03-01")
    caplog.clear()
    assert main(["onprem", "--stack-file", str(stack), "--out", str(tmp_path / "late"), "--quiet"]) == 0
    assert any("PLAN ONLY, `pulumi up` refuses this stack" in r.getMessage() for r in caplog.records)
    assert _tree(tmp_path / "late") == trees[0]


def test_a_bad_date_override_is_a_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TODAY_ENV, "tomorrow")
    with pytest.raises(pulumi.RunError, match=r"GPUAAS_TODAY: 'tomorrow' is not a date; write YYYY-MM-DD"):
        todays_date()
    monkeypatch.setenv(TODAY_ENV, "2027-01-15")
    assert todays_date() == date(2027, 1, 15)
    monkeypatch.delenv(TODAY_ENV)
    assert todays_date() == date.today()


# --------------------------------------------------------------------------------------------
# Issue 35, item 8: the OS SKU that will not run the next minor, said one minor ahead


def _os_warnings(version: str, sku: str | None = None) -> list[str]:
    raw = raw_stack("aks")
    _set("platform.kubernetesVersion", version)(raw)
    if sku is not None:
        _os(sku)(raw)
    return os_sku_warnings(parse_config(raw, TODAY))


def test_ubuntu2204_on_its_last_minor_warns_each_pool_naming_the_migration() -> None:
    warned = _os_warnings("1.36.3", "Ubuntu2204")
    assert [w.split(":", 2)[1] for w in warned] == [
        "platform.systemPool.osSku",
        "platform.gpuPools[0].osSku",
        "platform.gpuPools[1].osSku",
    ]
    system, gpu, _ = warned
    for w in warned:
        assert "runs Kubernetes 1.25 to 1.36 only" in w and "the next minor, 1.37, needs Ubuntu2404 first" in w
    # The system pool is inline in the protected ManagedCluster: a new System pool, drain, remove.
    assert "not changed in place" in system and "--mode System --os-sku Ubuntu2404" in system
    assert "drain 'system'" in system and "remove it" in system
    assert "drain 'ndh100a'" in gpu and "remove it" in gpu


@pytest.mark.parametrize(
    ("version", "sku"),
    [("1.36.3", "Ubuntu2404"), ("1.35.7", "Ubuntu2204"), ("1.37.2", "Ubuntu2404")],
)
def test_an_os_that_runs_the_next_minor_too_is_not_warned(version: str, sku: str) -> None:
    assert _os_warnings(version, sku) == []


def test_the_default_stays_and_the_sample_stacks_say_their_os_sku() -> None:
    """No default moves an existing stack: pools still default to Ubuntu2204; the samples write it out."""
    bare = raw_stack("aks")
    del bare["platform"]["systemPool"]["osSku"]
    assert parse_config(bare, TODAY).aks.system_pool.os_sku == "Ubuntu2204"  # type: ignore[union-attr]
    for f in (stack_path("aks"), stack_path("aks-elastic")):
        platform = yaml.safe_load(f.read_text())["config"]["gpuaas:platform"]
        pools = [platform["systemPool"], *platform["gpuPools"]]
        assert all("osSku" in p for p in pools), f
