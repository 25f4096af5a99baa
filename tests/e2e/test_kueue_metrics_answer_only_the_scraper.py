"""Kueue's metrics endpoint answers the plan's scraper, and only a token allowed ``get /metrics``.

Kueue v0.19.2 serves its metrics over HTTPS behind controller-runtime's authentication and
authorization filter (cmd/kueue/main.go: ``SecureServing: true``, ``FilterProvider:
filters.WithAuthenticationAndAuthorization``; the chart's ``metrics.bindAddress: :8443`` and its
metrics-auth-role for the TokenReviews and SubjectAccessReviews that filter sends). Here Kueue's own
manager runs so, on a loopback port, against the real API server (its TokenReview and
SubjectAccessReview answer), with the stack's ``metrics`` settings
(``enableClusterQueueResources``) and one of the stack's ClusterQueues. The plan's scraper objects
(components/observability/monitors.py ``kueue_scrape_objects``: ServiceAccount, token Secret,
ClusterRole for ``/metrics``, its binding) are applied as the plan has them, and the request is
the plan's ServiceMonitor endpoint (scheme, path, the bearer token from the Secret and key it
names, which kube-controller-manager's token controller fills). That token gets 200 and Kueue's
metrics; no token gets 401, and a token of a ServiceAccount without the binding 403.
"""

from __future__ import annotations

import base64
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components import platform_args
from components.observability.monitors import kueue_scrape_objects
from components.queueing import queues
from e2e import toolchain
from e2e.controlplane import ControlPlane
from e2e.kube import Kube
from e2e.plan_apply import install_crds
from tests import kueue_objects
from tests.e2e.conftest import need_upstream, start_plane
from tests.e2e.kueue_manager import CFG, KUEUE_API, Kueue, condition, kueue_crds

NS = CFG.queues.namespace
SCRAPE = kueue_scrape_objects(CFG.observability, CFG.queues.namespace)
TEAM = CFG.teams[0]
STRANGER = "not-a-metrics-reader"


@pytest.fixture(scope="module")
def kueue(pytestconfig: pytest.Config) -> Iterator[tuple[ControlPlane, Kueue]]:
    need_upstream()
    bin_dir = toolchain.build(toolchain.TOOLSETS["kueue"])
    cp = start_plane(pytestconfig, "Kueue's metrics endpoint")
    manager = Kueue(cp, Path(tempfile.mkdtemp(prefix="gpuaas-kueue-metrics-")), CFG, metrics=True)
    try:
        kube = cp.kube
        install_crds(kube, kueue_crds(manager.webhook_port))
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for flavor in queues.resource_flavors(platform_args.queues(CFG)).values():
            kube.apply(flavor)
        kube.apply(kueue_objects.cluster_queue(CFG, TEAM))
        for role in ("scraper", "scraper-token", "metrics-reader", "metrics-reader-binding"):
            kube.apply(SCRAPE[role])
        kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": STRANGER, "namespace": NS}})
        manager.start(bin_dir)
        try:
            kube.wait_for("the cert rotator's Secret", manager.mount_certs, timeout=60)
            kube.wait_for("Kueue /readyz", manager.ready, timeout=180)
            kube.wait_for(
                f"ClusterQueue {TEAM.name} seen by Kueue",
                lambda: condition(kube.get(KUEUE_API, "ClusterQueue", TEAM.name), "Active") is not None,
                timeout=120,
            )
        except (TimeoutError, RuntimeError) as e:
            raise AssertionError(f"{e}\n--- kueue log ---\n{manager.tail()}") from e
        yield cp, manager
    finally:
        manager.stop()
        cp.stop()


def endpoint() -> dict[str, Any]:
    (ep,) = SCRAPE["kueue-monitor"]["spec"]["endpoints"]
    return dict(ep)


def scrape(manager: Kueue, token: str | None) -> tuple[int, str]:
    """GET the endpoint as the ServiceMonitor says (TLS unverified: ``insecureSkipVerify``, as the
    serving certificate is the one Kueue makes itself)."""
    ep = endpoint()
    assert ep["tlsConfig"] == {"insecureSkipVerify": True}
    url = f"{ep['scheme']}://127.0.0.1:{manager.metrics_port}{ep['path']}"
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode(errors="replace")


def monitor_token(kube: Kube) -> str:
    """The token in the Secret and key the ServiceMonitor names (filled by the token controller)."""
    creds = endpoint()["authorization"]["credentials"]
    assert endpoint()["authorization"]["type"] == "Bearer"

    def filled() -> str | None:
        secret = kube.get("v1", "Secret", creds["name"], NS) or {}
        value = (secret.get("data") or {}).get(creds["key"])
        return base64.b64decode(value).decode() if value else None

    return str(kube.wait_for(f"the token controller fills {creds['name']}", filled, timeout=60))


def issued_token(kube: Kube, sa: str) -> str:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    return str(kube.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token", body)["status"]["token"])


def test_the_scrapers_token_reads_kueues_metrics(kueue: tuple[ControlPlane, Kueue]) -> None:
    cp, manager = kueue
    token = monitor_token(cp.kube)
    status, body = scrape(manager, token)
    assert status == 200, body[:500]
    assert "kueue_build_info{" in body
    # A ClusterQueue resource metric the rules read (enableClusterQueueResources, from the stack).
    quota = f'kueue_cluster_queue_nominal_quota{{cluster_queue="{TEAM.name}"'

    def reported() -> bool:
        return quota in scrape(manager, token)[1]

    cp.kube.wait_for(f"{quota} in the scrape", reported, timeout=60)


def test_no_token_or_a_token_without_the_binding_is_refused(kueue: tuple[ControlPlane, Kueue]) -> None:
    cp, manager = kueue
    status, body = scrape(manager, None)
    assert status == 401, body[:500]  # not authenticated
    stranger = issued_token(cp.kube, STRANGER)
    status, body = scrape(manager, stranger)
    assert status == 403, body[:500]  # authenticated, not allowed get /metrics
    assert "kueue_" not in body
    # The allowed twin: the same kind of issued token, of the scraper's ServiceAccount.
    status, body = scrape(manager, issued_token(cp.kube, SCRAPE["scraper"]["metadata"]["name"]))
    assert status == 200 and "kueue_build_info{" in body, body[:500]
