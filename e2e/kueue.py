"""Kueue's own manager with its webhooks registered, as on a real cluster, on loopback.

On a cluster, Kueue's chart (v0.19.2) installs the manager's Deployment, two webhook
configurations (``kueue-mutating-webhook-configuration``, ``kueue-validating-webhook-configuration``:
Kueue's pod, Job, JobSet, Deployment, ... webhooks, each ``clientConfig.service:
kueue-webhook-service``), CRDs whose conversion webhook names the same Service, and the visibility
APIServices; the manager's cert rotator makes a CA, writes the serving certificate into the Secret
``kueue-webhook-server-cert`` (mounted into the pod) and injects the CA into all of them. Here the
chart is installed for real (by ``pulumi up``, or by Helm in :mod:`e2e.plan_apply`), and
:class:`KueueManager` runs the manager (tool set ``kueue``) as a child process on loopback with the
chart's own Configuration, cert rotator included, so that the API server calls Kueue's own
webhooks on every pod, Job and queue object, with their ``failurePolicy``, as it would in a cluster.

What the e2e changes — the complete list; our product's values stay as they are:

1. The Service ``kueue-webhook-service``: ``type: ExternalName``, ``externalName: localhost``. The
   API server resolves a webhook's Service to its cluster IP, which nothing routes here (no
   proxy), and an endpoint may not be a loopback address; a Service of type ExternalName it
   resolves to that name and the port the webhook names (k8s.io/apiserver pkg/util/proxy
   ``ResolveCluster``). TLS is checked as on a cluster: against the Service's DNS name
   (``kueue-webhook-service.kueue-system.svc``), with the CA Kueue's cert rotator injected.
2. Every webhook's and every Kueue CRD conversion webhook's ``clientConfig.service.port``: the
   manager's loopback port (on a cluster the Service maps 443 to the pod's 9443).
3. The APIServices ``v1beta1.visibility.kueue.x-k8s.io`` and ``v1beta2.visibility.kueue.x-k8s.io``:
   deleted. The aggregator authenticates itself to an extension API server with a front-proxy
   client certificate this control plane does not have, so the visibility API cannot be served here;
   an APIService that never becomes available stalls discovery and namespace deletion.
4. The manager's Configuration is the chart's own (ConfigMap ``kueue-manager-config``, rendered
   from our values, ``internalCertManagement`` as the chart sets it) with: ``webhook`` on 127.0.0.1
   at a free port and a temporary ``certDir``; ``health`` on a loopback port; ``metrics`` off;
   ``leaderElection.leaderElect: false`` (one manager); ``featureGates.VisibilityOnDemand: false``
   (item 3); and whatever a test passes as ``overrides``.
5. The kubelet's part: the Secret the cert rotator fills is copied into ``certDir`` (the pod's
   volume), and on the simulated fleet the chart's manager pods, bound and deleted by KWOK, are
   Ready exactly while this manager answers ``/readyz`` with its webhooks registered
   (:func:`play_pods`; e2e/fleet.py keeps KWOK from marking them Ready), so Helm's and Pulumi's
   wait for the Deployment means what it means on a cluster.

The manager signs in as the chart's ServiceAccount ``kueue-controller-manager`` with a token the
API server issues: the chart's RBAC, nothing more.
"""

from __future__ import annotations

import copy
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from components.queueing import queues
from e2e import toolchain
from e2e.kube import ApiError, Kube, Obj
from e2e.kueue_process import KueueProcess
from e2e.processes import Poller

#: Names the chart gives its objects (``kueue.fullname`` of release ``kueue``).
FULLNAME: Final = queues.RELEASE
WEBHOOK_CONFIGS: Final = (
    ("MutatingWebhookConfiguration", f"{FULLNAME}-mutating-webhook-configuration"),
    ("ValidatingWebhookConfiguration", f"{FULLNAME}-validating-webhook-configuration"),
)
VISIBILITY_APISERVICES: Final = ("v1beta1.visibility.kueue.x-k8s.io", "v1beta2.visibility.kueue.x-k8s.io")
CONFIGMAP: Final = f"{FULLNAME}-manager-config"
WEBHOOK_SERVICE: Final = f"{FULLNAME}-webhook-service"
CONFIG_KEY: Final = "controller_manager_config.yaml"
SERVICE_ACCOUNT: Final = f"{FULLNAME}-controller-manager"
KUEUE_GROUP: Final = "kueue.x-k8s.io"
#: The chart's manager pods (templates/_helpers.tpl ``kueue.selectorLabels``).
MANAGER_POD_LABELS: Final = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}
ADMISSION: Final = "admissionregistration.k8s.io/v1"
CRD_API: Final = "apiextensions.k8s.io/v1"


def _port_of(client: Mapping[str, Any]) -> int | None:
    service = client.get("service") or {}
    return int(service["port"]) if "port" in service else None


class KueueManager(KueueProcess, Poller):
    """Kueue's manager against the API server of ``kube``, with the chart's webhooks pointed at it (see the module).

    Start it before the chart is installed (it waits for the chart's objects) or after; use it as a
    context manager. :meth:`wait_ready` returns once the manager is ready and the API server
    calls it.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        *,
        workdir: Path | None = None,
        bin_dir: Path | None = None,
        overrides: Mapping[str, Any] | None = None,
        every: float = 0.3,
    ) -> None:
        KueueProcess.__init__(self, workdir or Path(tempfile.mkdtemp(prefix="gpuaas-kueue-")))
        Poller.__init__(self, "kueue-manager", every)
        self.kube, self.namespace = kube, namespace
        self.bin_dir = bin_dir or toolchain.build(toolchain.TOOLSETS["kueue"])
        self.overrides = dict(overrides or {})
        #: What the e2e changed in the API server, one line each (for the test log).
        self.patched: list[str] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------------------
    def tick(self) -> None:
        try:
            with self._lock:
                self.register()
                if self.proc is None and self._chart_installed():
                    self._start()
                if self.proc is not None:
                    self.mount_certs()
                play_pods(self.kube, self.namespace, self.serving())
        except (ApiError, OSError, KeyError, LookupError, subprocess.SubprocessError) as e:
            self.errors = [*self.errors[-20:], f"{type(e).__name__}: {e}"]

    def stop(self, timeout: float = 15.0) -> None:
        Poller.stop(self, timeout)
        self.terminate()

    # ---------------------------------------------------------------------------------------
    # 1-3: what the API server calls
    def register(self) -> None:
        """Point what the chart created at the manager (items 1-3 of the module docstring)."""
        kube = self.kube
        svc = kube.get("v1", "Service", WEBHOOK_SERVICE, self.namespace)
        if svc is not None and svc["spec"].get("type") != "ExternalName":
            spec = {k: v for k, v in svc["spec"].items() if k in ("ports", "sessionAffinity")}
            for port in spec.get("ports") or []:
                port.pop("nodePort", None)
            svc["spec"] = {**spec, "type": "ExternalName", "externalName": "localhost"}
            kube.replace({**svc, "apiVersion": "v1", "kind": "Service"})
            self.patched.append(f"Service {self.namespace}/{WEBHOOK_SERVICE}: type ExternalName, localhost")
        for kind, name in WEBHOOK_CONFIGS:
            if not kube.served(ADMISSION, kind):
                continue
            obj = kube.get(ADMISSION, kind, name)
            if obj is None:
                continue
            hooks = obj.get("webhooks") or []
            stale = [h for h in hooks if _port_of(h.get("clientConfig") or {}) != self.webhook_port]
            for hook in stale:
                hook["clientConfig"].setdefault("service", {})["port"] = self.webhook_port
            if stale:
                kube.replace({**obj, "apiVersion": ADMISSION, "kind": kind})
                self.patched.append(f"{kind} {name}: {len(stale)} webhooks to port {self.webhook_port}")
        for crd in kube.list(CRD_API, "CustomResourceDefinition"):
            if crd["spec"]["group"] != KUEUE_GROUP:
                continue
            client = ((crd["spec"].get("conversion") or {}).get("webhook") or {}).get("clientConfig")
            if client is None or _port_of(client) == self.webhook_port:
                continue
            client.setdefault("service", {})["port"] = self.webhook_port
            kube.replace({**crd, "apiVersion": CRD_API, "kind": "CustomResourceDefinition"})
            self.patched.append(
                f"CustomResourceDefinition {crd['metadata']['name']}: conversion to port {self.webhook_port}"
            )
        for name in VISIBILITY_APISERVICES:
            if kube.get("apiregistration.k8s.io/v1", "APIService", name) is not None:
                kube.delete("apiregistration.k8s.io/v1", "APIService", name)
                self.patched.append(f"APIService {name}: deleted")

    def registered(self) -> bool:
        """Every webhook of the chart calls this manager, with the CA Kueue's cert rotator injected."""
        svc = self.kube.get("v1", "Service", WEBHOOK_SERVICE, self.namespace) or {"spec": {}}
        if svc["spec"].get("type") != "ExternalName":
            return False
        for kind, name in WEBHOOK_CONFIGS:
            obj = self.kube.get(ADMISSION, kind, name)
            if obj is None:
                return False
            for hook in obj.get("webhooks") or []:
                client = hook.get("clientConfig") or {}
                if _port_of(client) != self.webhook_port or not client.get("caBundle"):
                    return False
        return True

    def mount_certs(self) -> bool:
        """Play the kubelet: the Secret the cert rotator filled, into ``certDir`` (item 5)."""
        return self.copy_certs(self.kube, self.namespace)

    # ---------------------------------------------------------------------------------------
    # 4: the manager
    def _chart_installed(self) -> bool:
        kube = self.kube
        if kube.get("v1", "ConfigMap", CONFIGMAP, self.namespace) is None:
            return False
        if kube.get("v1", "ServiceAccount", SERVICE_ACCOUNT, self.namespace) is None:
            return False
        crds = [c for c in kube.list(CRD_API, "CustomResourceDefinition") if c["spec"]["group"] == KUEUE_GROUP]
        return bool(crds) and all(_established(c) for c in crds)

    def configuration(self) -> dict[str, Any]:
        """The chart's rendered Configuration with the e2e's changes (item 4)."""
        cm = self.kube.get("v1", "ConfigMap", CONFIGMAP, self.namespace)
        assert cm is not None, f"no ConfigMap {self.namespace}/{CONFIGMAP}: the Kueue chart is not installed"
        conf: dict[str, Any] = yaml.safe_load(cm["data"][CONFIG_KEY])
        conf = copy.deepcopy(conf)
        conf.update(
            webhook={"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.certs)},
            health={"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            metrics={"bindAddress": "0"},
            leaderElection={"leaderElect": False},
            featureGates={**(conf.get("featureGates") or {}), "VisibilityOnDemand": False},
        )
        conf.update(self.overrides)
        return conf

    def _token(self) -> str:
        spec = {"expirationSeconds": 7200}
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{SERVICE_ACCOUNT}/token"
        return str(self.kube.request("POST", path, request)["status"]["token"])

    def _start(self) -> None:
        kubeconfig = self.workdir / "kueue.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "e2e",
                            "cluster": {
                                "server": f"https://{self.kube.host}:{self.kube.port}",
                                "certificate-authority": str(self.kube.ca_file),
                            },
                        }
                    ],
                    "users": [{"name": SERVICE_ACCOUNT, "user": {"token": self._token()}}],
                    "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": SERVICE_ACCOUNT}}],
                    "current-context": "e2e",
                }
            )
        )
        kubeconfig.chmod(0o600)
        self.launch(self.bin_dir, self.configuration(), kubeconfig)

    def serving(self) -> bool:
        """Ready, and the API server's configuration points at it."""
        return self.ready() and self.registered()

    def wait_ready(self, timeout: float = 240.0) -> None:
        """Until the manager serves and the API server calls it: a dry-run ResourceFlavor passes
        Kueue's own ``failurePolicy: Fail`` webhooks (the API server loads a changed webhook
        configuration a moment after it is stored)."""
        probe = {"apiVersion": queues.API, "kind": "ResourceFlavor", "metadata": {"name": "gpuaas-e2e-probe"}}

        def called() -> bool:
            if not self.serving():
                return False
            try:
                self.kube.create(probe, dry_run=True)
            except ApiError:
                return False
            return True

        try:
            self.kube.wait_for("Kueue's manager serving its webhooks", called, timeout, every=0.5)
        except (TimeoutError, RuntimeError) as e:
            raise AssertionError(f"{e}\nharness errors: {self.errors[-5:]}\n--- kueue log ---\n{self.tail()}") from e

    def restart(self) -> None:
        """Stop the manager and start it again (the same ports, CA and configuration)."""
        with self._lock:
            self.terminate()


def _established(crd: Obj) -> bool:
    conds = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)


# --------------------------------------------------------------------------------------------
# 5: the chart's manager pods


def play_pods(kube: Kube, namespace: str, ready: bool) -> None:
    """Report the chart's manager pods bound to a (KWOK) node Running, and Ready iff ``ready``."""
    selector = ",".join(f"{k}={v}" for k, v in MANAGER_POD_LABELS.items())
    for pod in kube.list("v1", "Pod", namespace, selector=selector):
        if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        current = next((c["status"] for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        want = "True" if ready else "False"
        if status.get("phase") == "Running" and current == want:
            continue
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": t, "status": s, "lastTransitionTime": now}
            for t, s in (("Initialized", "True"), ("PodScheduled", "True"), ("ContainersReady", want), ("Ready", want))
        ]
        containers = [
            {
                "name": c["name"],
                "image": c["image"],
                "ready": ready,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        kube.patch(
            "v1",
            "Pod",
            pod["metadata"]["name"],
            namespace,
            {"status": {"phase": "Running", "conditions": conditions, "containerStatuses": containers}},
            sub="status",
        )


# --------------------------------------------------------------------------------------------
# 6: uninstalling the chart


#: The chart's aggregated ClusterRoles (templates/rbac/batch_{admin,user}_role.yaml).
AGGREGATED_ROLES: Final = (f"{FULLNAME}-batch-admin-role", f"{FULLNAME}-batch-user-role")


def clear_after_uninstall(kube: Kube, namespace: str) -> list[str]:
    """What an operator clears so that ``helm uninstall --wait`` of Kueue's chart can finish (the
    README's "Removing the platform"); returns what it did, for the test's log.

    1. kube-controller-manager's clusterrole-aggregation controller *applies* an aggregated
       ClusterRole's rules (server-side apply, ``Force``; k8s.io/kubernetes v1.37.2
       pkg/controller/clusterroleaggregation ``applyClusterRoles``) whenever one of its source
       roles changes: when Helm deletes the chart's roles together, the aggregate it deleted a
       moment before is created again, without its ``aggregationRule``, and Helm's wait for its
       deletion never ends. Such a re-created role (no aggregationRule) is deleted; the chart's
       own, which has one, is left to Helm.
    2. Kueue's objects keep finalizers (``kueue.x-k8s.io/resource-in-use``) that only its manager
       removes, and Helm deletes the manager's ServiceAccount with the CRDs: an object left then
       holds its CRD Terminating for ever. Once the ServiceAccount is gone, the finalizers of
       Kueue objects whose CRD is being deleted are removed.
    """
    done: list[str] = []
    for name in AGGREGATED_ROLES:
        role = kube.get("rbac.authorization.k8s.io/v1", "ClusterRole", name)
        if role is not None and "aggregationRule" not in role:
            kube.delete("rbac.authorization.k8s.io/v1", "ClusterRole", name)
            done.append(f"ClusterRole {name} (re-created by the aggregation controller): deleted")
    if kube.get("v1", "ServiceAccount", SERVICE_ACCOUNT, namespace) is not None:
        return done
    for crd in kube.list(CRD_API, "CustomResourceDefinition"):
        if crd["spec"]["group"] != KUEUE_GROUP or not crd["metadata"].get("deletionTimestamp"):
            continue
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        api, kind = f"{KUEUE_GROUP}/{version}", crd["spec"]["names"]["kind"]
        for obj in kube.list(api, kind):
            if obj["metadata"].get("finalizers"):
                meta = obj["metadata"]
                kube.patch(api, kind, meta["name"], meta.get("namespace"), {"metadata": {"finalizers": None}})
                done.append(f"{kind} {meta.get('namespace') or ''}/{meta['name']}: finalizers removed")
    return done
