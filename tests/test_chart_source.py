"""Where the Helm releases take their charts from (``gpuaas:charts``, components/model/charts.py).

Default: each chart from its public home at its pinned version. A directory mirror: each release
opens ``<folder>/<chart>-<version>[.tgz]`` (the ``v`` of the version optional), and a folder that
lacks a chart stops the program before any resource. An OCI mirror: ``<registry>/<chart>``. Name,
namespace, version and values never depend on the source. And nothing in the environment changes
what the program sends: the e2e's old stand-in switch ``GPUAAS_E2E_STANDIN_CHARTS`` is gone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.loader import parse_config
from components.model import charts
from components.model.errors import ConfigError
from components.model.versions import Versions
from components.plan.offline import RecordingMonitor, Run, run_program
from components.plan.writer import HELM_RELEASE, manifest
from tests.conftest import fixture_config, offline_run, qualified, raw_stack

#: The annotation that skips pulumi-kubernetes' await of a workload.
SKIP_AWAIT = "pulumi.com/skipAwait"
NVIDIA = "https://helm.ngc.nvidia.com/nvidia"


def releases(run: Run) -> dict[str, dict[str, Any]]:
    return {r.name: dict(r.inputs) for r in run.records if r.type == HELM_RELEASE}


def skip_awaited(run: Run) -> dict[str, set[str]]:
    """kind -> names of the objects that carry pulumi.com/skipAwait."""
    out: dict[str, set[str]] = {}
    for r in run.records:
        if r.custom and r.type.startswith("kubernetes:") and r.type != HELM_RELEASE:
            obj = manifest(r)
            if SKIP_AWAIT in ((obj.get("metadata") or {}).get("annotations") or {}):
                out.setdefault(str(obj.get("kind")), set()).add(str(obj["metadata"]["name"]))
    return out


def with_charts(stack: str, section: dict[str, Any]) -> dict[str, Any]:
    raw = raw_stack(stack)
    raw["charts"] = section
    return qualified(raw)


def fake_mirror(root: Path, layout: dict[str, str]) -> Path:
    """A mirror folder: name -> "tgz" (an archive file) or "dir" (an unpacked chart)."""
    for name, kind in layout.items():
        if kind == "tgz":
            (root / name).write_bytes(b"\x1f\x8b not really a chart; Helm would open it, the plan does not")
        else:
            (root / name).mkdir()
            (root / name / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name.rsplit('-', 1)[0]}\n")
    return root


# --------------------------------------------------------------------------------------------
# the default


def test_by_default_every_chart_comes_from_its_public_home_at_its_pinned_version() -> None:
    rels = releases(offline_run("onprem"))
    v = Versions()
    assert {r["chart"]: (r["version"], (r.get("repositoryOpts") or {}).get("repo")) for r in rels.values()} == {
        "network-operator": ("v26.4.1", NVIDIA),
        "gpu-operator": ("v26.7.0", NVIDIA),
        "oci://registry.k8s.io/kueue/charts/kueue": ("0.19.2", None),
    }
    assert (v.network_operator_chart, v.gpu_operator_chart, v.kueue_chart) == ("v26.4.1", "v26.7.0", "0.19.2")


def test_no_workload_skips_its_await_but_the_verification_jobs() -> None:
    """Every DaemonSet, Deployment and Service is awaited as pulumi-kubernetes awaits it; only the
    proof Jobs are not (components/proofs/verification.py says why)."""
    for stack in ("onprem", "aks"):
        skipped = skip_awaited(offline_run(stack))
        assert set(skipped) <= {"Job"}, (stack, skipped)
    assert skip_awaited(offline_run("onprem"))["Job"]


def test_the_retired_standin_switch_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """#21 item 18: the e2e's test-only switch is gone, so setting it in a shell deploys the real charts."""
    monkeypatch.setenv("GPUAAS_E2E_STANDIN_CHARTS", str(tmp_path))
    run = run_program("onprem", config=fixture_config("onprem"))
    default = offline_run("onprem")
    # (registration order within a step is the event loop's: compare by URN parts)
    assert {(r.type, r.name): r.inputs for r in run.records} == {(r.type, r.name): r.inputs for r in default.records}


# --------------------------------------------------------------------------------------------
# a directory mirror


def test_a_directory_mirror_gives_every_release_its_local_chart(tmp_path: Path) -> None:
    mirror = fake_mirror(
        tmp_path,
        {
            "network-operator-v26.4.1.tgz": "tgz",  # what `helm pull` writes
            "gpu-operator-v26.7.0": "dir",  # unpacked, as pinned
            "kueue-v0.19.2": "dir",  # unpacked, named after the git tag (pinned 0.19.2)
            "kueue-0.19.1.tgz": "tgz",  # another version: never taken
        },
    )
    run = run_program("onprem", config=with_charts("onprem", {"directory": str(mirror)}))
    got = releases(run)
    default = releases(offline_run("onprem"))
    assert {r["chart"] for r in got.values()} == {
        f"{mirror}/network-operator-v26.4.1.tgz",
        f"{mirror}/gpu-operator-v26.7.0",
        f"{mirror}/kueue-v0.19.2",
    }
    for name, inputs in got.items():
        assert not inputs.get("repositoryOpts"), name
        for key in ("name", "namespace", "version", "values", "timeout", "cleanupOnFail"):
            assert inputs[key] == default[name][key], (name, key)


def test_a_relative_directory_stays_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative to the project folder (the program's working directory), and sent as written, so
    every checkout sends the same release inputs."""
    (tmp_path / "vendor").mkdir()
    fake_mirror(
        tmp_path / "vendor",
        {"network-operator-v26.4.1.tgz": "tgz", "gpu-operator-v26.7.0.tgz": "tgz", "kueue-0.19.2.tgz": "tgz"},
    )
    monkeypatch.chdir(tmp_path)
    got = releases(run_program("onprem", config=with_charts("onprem", {"directory": "vendor"})))
    assert sorted(r["chart"] for r in got.values()) == [
        "vendor/gpu-operator-v26.7.0.tgz",
        "vendor/kueue-0.19.2.tgz",
        "vendor/network-operator-v26.4.1.tgz",
    ]


def test_a_directory_mirror_without_a_chart_stops_before_any_resource(tmp_path: Path) -> None:
    mirror = fake_mirror(tmp_path, {"network-operator-v26.4.1.tgz": "tgz", "gpu-operator-v26.7.0": "tgz"})
    (mirror / "kueue-0.19.2").mkdir()  # a folder without Chart.yaml is no chart
    monitor = RecordingMonitor(None)
    with pytest.raises(pulumi.RunError) as err:
        run_program("onprem", config=with_charts("onprem", {"directory": str(mirror)}), monitor=monitor)
    text = str(err.value)
    assert (
        f"gpuaas:charts.directory: {str(mirror)!r} holds no chart kueue at 0.19.2 (gpuaas:versions.kueueChart)" in text
    )
    for looked in ("kueue-0.19.2.tgz", "kueue-0.19.2,", "kueue-v0.19.2.tgz", "kueue-v0.19.2 "):
        assert f"{mirror}/{looked}" in text, looked
    assert "helm pull oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2" in text
    # The operators' charts are there (gpu-operator as a file named like an archive's folder is no chart).
    assert "no chart network-operator" not in text
    assert "no chart gpu-operator at v26.7.0" in text
    assert monitor.records == [], "nothing registered"
    # The AKS stack installs no Kueue: a folder with the two operators' charts is enough there.
    (mirror / "gpu-operator-v26.7.0").unlink()
    fake_mirror(mirror, {"gpu-operator-v26.7.0": "dir"})
    aks = releases(run_program("aks", config=with_charts("aks", {"directory": str(mirror)})))
    assert len(aks) == 2


# --------------------------------------------------------------------------------------------
# an OCI mirror


def test_an_oci_mirror_gives_every_release_its_chart_under_the_registry_path() -> None:
    registry = "oci://harbor.example.com:8443/gpuaas/charts"
    got = releases(run_program("onprem", config=with_charts("onprem", {"registry": registry})))
    assert {r["chart"]: r["version"] for r in got.values()} == {
        f"{registry}/network-operator": "v26.4.1",
        f"{registry}/gpu-operator": "v26.7.0",
        f"{registry}/kueue": "0.19.2",
    }
    assert not any(r.get("repositoryOpts") for r in got.values())


# --------------------------------------------------------------------------------------------
# what the config may say


def issues_of(section: dict[str, Any], versions: dict[str, Any] | None = None) -> list[str]:
    raw = raw_stack("onprem")
    raw["charts"] = section
    if versions is not None:
        raw["versions"] = versions
    try:
        parse_config(raw)
    except ConfigError as err:
        return [str(i) for i in err.issues]
    return []


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        (
            {"registry": "https://harbor.example.com/charts"},
            "gpuaas:charts.registry: 'https://harbor.example.com/charts' is not an OCI chart registry path",
        ),
        ({"registry": "oci://user:secret@harbor.example.com/charts"}, "is not an OCI chart registry path"),
        ({"registry": "oci://harbor.example.com/charts/"}, "no credentials, tag or trailing slash"),
        ({"registry": "oci://harbor.example.com/Charts"}, "lowercase path components"),
        ({"registry": "oci://harbor.example.com/charts:v1"}, "is not an OCI chart registry path"),
        ({"directory": ""}, "gpuaas:charts.directory: '' is not a chart folder: it is empty"),
        ({"directory": "~/charts"}, "Helm does not expand ~"),
        ({"directory": "oci://harbor.example.com/charts"}, "an OCI registry goes in charts.registry"),
        ({"directory": " /srv/charts"}, "starts or ends with white space"),
        ({"directory": "/srv/" + "x" * 4096}, "longer than PATH_MAX (4096 bytes)"),
        ({"mirror": "/srv/charts"}, "gpuaas:charts.mirror"),
    ],
)
def test_a_bad_chart_source_is_refused_naming_its_key(section: dict[str, Any], problem: str) -> None:
    found = issues_of(section)
    assert any(problem in i for i in found), found


@pytest.mark.parametrize(
    "section",
    [
        {},
        {"registry": "oci://harbor.example.com/gpuaas-charts"},
        {"registry": "oci://localhost:5000"},
        {"registry": "oci://[fd00::1]:5000/charts"},
        {"directory": "/srv/helm-charts"},
        {"directory": "../shared/upstream/charts"},
        {"directory": "vendor/charts"},
    ],
)
def test_a_good_chart_source_is_accepted(section: dict[str, Any]) -> None:
    assert issues_of(section) == []


def test_one_mirror_at_most_and_no_repository_beside_it() -> None:
    both = issues_of({"directory": "/srv/charts", "registry": "oci://harbor.example.com/charts"})
    assert any(i.startswith("gpuaas:charts: both directory ('/srv/charts') and registry") for i in both), both
    beside = issues_of(
        {"registry": "oci://harbor.example.com/charts"},
        {"helmRepository": "https://mirror.example.com/nvidia", "kueueChartRef": "oci://mirror.example.com/kueue"},
    )
    assert sorted(i.split(":", 2)[1] for i in beside) == ["versions.helmRepository", "versions.kueueChartRef"], beside
    assert all("is ignored while gpuaas:charts.registry is set" in i for i in beside), beside
    # The allowed twins: a repository of one's own without a mirror; a mirror with the defaults.
    assert issues_of({}, {"helmRepository": "https://mirror.example.com/nvidia"}) == []
    assert issues_of({"directory": "/srv/charts"}, {"helmRepository": NVIDIA}) == []


def test_stack_charts_are_the_plans_releases() -> None:
    """The one list of charts (which the mirror check reads) is what the platform installs."""
    for stack in ("onprem", "aks"):
        run = offline_run(stack)
        cfg = parse_config(raw_stack(stack))
        want = charts.stack_charts(cfg.versions, cfg.queues.elastic)
        assert sorted((c.public, c.version) for c in want) == sorted(
            (str(r["chart"]), str(r["version"])) for r in releases(run).values()
        ), stack
    raw = copy.deepcopy(raw_stack("onprem"))
    raw["queues"]["elastic"] = False
    off = parse_config(raw)
    assert [c.name for c in charts.stack_charts(off.versions, off.queues.elastic)] == [
        "network-operator",
        "gpu-operator",
    ]
