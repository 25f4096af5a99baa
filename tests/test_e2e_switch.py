"""The test-only switch of the e2e engine run (components/k8s.py, GPUAAS_E2E_STANDIN_CHARTS).

Unset — every real run — it changes nothing: charts come from their pinned repositories and
every workload is awaited as pulumi-kubernetes awaits it. Set, Helm releases install the local
stand-in chart of the same name and only the kinds a kubelet makes ready skip their await.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.k8s import E2E_STANDIN_CHARTS_ENV, KUBELET_AWAITED, SKIP_AWAIT
from components.plan.offline import Run, run_program
from components.plan.writer import HELM_RELEASE, manifest
from tests.conftest import offline_run


def releases(run: Run) -> dict[str, dict[str, object]]:
    return {r.name: r.inputs for r in run.records if r.type == HELM_RELEASE}


def skip_awaited(run: Run) -> dict[str, set[str]]:
    """kind -> names of the objects that carry pulumi.com/skipAwait."""
    out: dict[str, set[str]] = {}
    for r in run.records:
        if r.custom and r.type.startswith("kubernetes:") and r.type != HELM_RELEASE:
            obj = manifest(r)
            if SKIP_AWAIT in ((obj.get("metadata") or {}).get("annotations") or {}):
                out.setdefault(str(obj.get("kind")), set()).add(str(obj["metadata"]["name"]))
    return out


def test_unset_the_charts_come_from_their_repositories(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(E2E_STANDIN_CHARTS_ENV, raising=False)
    run = offline_run("onprem")
    rels = releases(run)
    assert rels
    for inputs in rels.values():
        chart = str(inputs["chart"])
        assert not chart.startswith("/")
        if chart.startswith("oci://"):  # Kueue's chart: an OCI reference, which Helm pulls itself
            assert not inputs.get("repositoryOpts")
        else:
            assert str(inputs["repositoryOpts"]["repo"]).startswith("https://")  # type: ignore[index]
    # Only the verification Jobs skip their await in the real default (verification.py says why).
    assert set(skip_awaited(run)) == {"Job"}


def test_set_releases_install_the_standins_and_only_kubelet_workloads_skip_await(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(E2E_STANDIN_CHARTS_ENV, raising=False)
    default = releases(offline_run("onprem"))  # the session's cached default run, made unset
    monkeypatch.setenv(E2E_STANDIN_CHARTS_ENV, str(tmp_path))
    run = run_program("onprem")
    for name, inputs in releases(run).items():
        # The stand-in is named like the chart (an OCI reference's last part).
        assert inputs["chart"] == str(tmp_path / str(default[name]["chart"]).rsplit("/", 1)[-1])
        assert "repositoryOpts" not in inputs or not inputs["repositoryOpts"]
        # Name, namespace, version and values stay the real ones.
        for key in ("name", "namespace", "version", "values"):
            assert inputs[key] == default[name][key], (name, key)
    skipped = skip_awaited(run)
    assert set(skipped) <= KUBELET_AWAITED
    assert {"DaemonSet", "Service", "Job"} <= set(skipped)
    assert "Namespace" not in skipped and "NicClusterPolicy" not in skipped
