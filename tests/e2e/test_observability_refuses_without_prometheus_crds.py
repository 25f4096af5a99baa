"""Without the Prometheus stack's CRDs, `pulumi preview` and `up` stop, and no monitoring object is installed.

The real engine (e2e/engine.py: the Pulumi CLI, our language host, pulumi-resource-kubernetes) runs
the repository's observability component (components/observability/component.py) on the onprem
stack's config against a bare control plane: the Prometheus stack's namespace and Kueue's are
there (the stack expects the first and creates the second elsewhere in the program), the
prometheus-operator CRDs are not. The component reads those CRDs first and every monitoring object
waits on the reads (tests/observability/test_observability.py checks that wiring in the whole
program's plan); here the reads fail for real and the API server is left without a single dashboard
ConfigMap, scraper ServiceAccount, token, ClusterRole or binding. Beside it, the allowed case: the
CRDs installed from upstream (prometheus-operator v0.93.0), the same `up` succeeds and every object
is there. Only the component runs (a two-line program), so this takes seconds, not the whole stack.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from components import platform_args
from components.loader import gpuaas_section, parse_config
from components.model.config import StackConfig
from components.observability.component import REQUIRED_CRDS
from components.observability.dashboards import dashboard_configmaps
from components.observability.monitors import kueue_scrape_objects, prometheus_rules
from e2e.controlplane import ControlPlane
from e2e.engine import Stack, repo_stack_config
from e2e.plan_apply import crd_index, install_crds
from tests.conftest import stack_path
from tests.e2e.conftest import need_upstream, start_plane

BASE = repo_stack_config("onprem", stack_path("onprem"))["config"]
CFG: StackConfig = parse_config(gpuaas_section(BASE))
CRD_API = "apiextensions.k8s.io/v1"
ARGS = platform_args.observability(CFG)
SCRAPE = kueue_scrape_objects(CFG.observability, CFG.queues.namespace)

PROGRAM = """
# test_observability_refuses_without_prometheus_crds: only the observability step, on the stack's config.
from components import platform_args
from components.loader import load_config, todays_date
from components.observability.component import Observability
Observability("gpuaas-observability", platform_args.observability(load_config(todays_date())))
"""


@pytest.fixture(scope="module")
def engine(pytestconfig: pytest.Config) -> Iterator[tuple[ControlPlane, Stack]]:
    need_upstream()
    cp = start_plane(pytestconfig, "observability without the Prometheus CRDs")
    stack = Stack(cp.write_kubeconfig(cp.workdir / "engine.kubeconfig"))
    try:
        main = stack.project / "__main__.py"
        main.unlink()
        main.write_text(PROGRAM)
        stack.init(BASE)
        for ns in sorted({CFG.observability.prometheus.namespace, CFG.queues.namespace}):
            cp.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        yield cp, stack
    finally:
        shutil.rmtree(stack.workdir, ignore_errors=True)
        cp.stop()


def built_in_objects() -> list[dict[str, Any]]:
    """The component's objects of built-in kinds (a custom resource cannot be stored without its CRD)."""
    objs = [*dashboard_configmaps(CFG.observability, queues=True).values(), *SCRAPE.values()]
    return [o for o in objs if not o["apiVersion"].startswith("monitoring.coreos.com/")]


def stored(cp: ControlPlane, obj: dict[str, Any]) -> dict[str, Any] | None:
    meta = obj["metadata"]
    return cp.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


def test_without_the_crds_preview_and_up_stop_and_nothing_is_installed(engine: tuple[ControlPlane, Stack]) -> None:
    cp, stack = engine
    for crd in REQUIRED_CRDS:
        assert cp.kube.get(CRD_API, "CustomResourceDefinition", crd) is None, crd
    preview = stack.preview(check=False)
    assert preview.rc != 0, preview.out[-3000:]
    up = stack.up(check=False)
    assert up.rc != 0, up.out[-3000:]
    for res in (preview, up):
        # Each refusal is the provider's, naming the missing CRD; the engine shows the read
        # (the component's logical name) it failed.
        for crd in REQUIRED_CRDS:
            assert f"resource '{crd}' does not exist" in res.out, res.out[-3000:]
            assert f"gpuaas-observability-needs-{crd.split('.')[0]}-crd" in res.out, res.out[-3000:]
    assert len(built_in_objects()) == 6  # 2 dashboards, scraper, token, ClusterRole, binding
    present = [f"{o['kind']} {o['metadata']['name']}" for o in built_in_objects() if stored(cp, o) is not None]
    assert not present, f"installed although the CRDs are absent: {present}"
    created = [r["urn"] for r in stack.resources() if r["type"].startswith("kubernetes:") and not r.get("external")]
    assert [u for u in created if "providers" not in u] == []


def test_with_the_crds_the_same_up_installs_every_monitoring_object(engine: tuple[ControlPlane, Stack]) -> None:
    cp, stack = engine
    index = crd_index()
    install_crds(cp.kube, [index[("monitoring.coreos.com", kind)] for kind in ("ServiceMonitor", "PrometheusRule")])
    stack.up()
    objs = [*built_in_objects(), *prometheus_rules(CFG.observability, ARGS.team_groups, ARGS.groups).values()]
    objs.append(SCRAPE["kueue-monitor"])
    missing = [f"{o['kind']} {o['metadata']['name']}" for o in objs if stored(cp, o) is None]
    assert not missing, missing
    # The token controller (kube-controller-manager) filled the scraper's token Secret.
    secret = SCRAPE["scraper-token"]
    cp.kube.wait_for("the scraper's token", lambda: ((stored(cp, secret) or {}).get("data") or {}).get("token"), 60)
