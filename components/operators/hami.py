"""HAMi (node groups with ``hami``): its namespace, the pinned Helm release, and the RBAC 2.10.0 lacks.

What the chart is told is derived by :func:`hami_values`; every key path is one of HAMi 2.10.0's
``charts/hami/values.yaml`` (../shared/upstream/charts/hami-2.10.0), and the tests render the real
chart with these values and check what comes out. Where gpuaas departs from the chart's defaults:

* **Resource names** (``resourceName``, ``resourceMem``, ...): ``nvidia.com/vgpu*``, so a slice is
  never counted as a whole GPU (:mod:`components.model.resources`).
* **kube-scheduler image**: the registry Kubernetes publishes (``registry.k8s.io/kube-scheduler``) at
  the cluster's declared version, not the chart's mirror (``registry.cn-hangzhou.aliyuncs.com``)
  at whatever version Helm was told the cluster runs.
* **Certificate job image**: ``registry.k8s.io/ingress-nginx/kube-webhook-certgen`` instead of a
  personal Docker Hub copy (``docker.io/liangjw/kube-webhook-certgen``), for both of the chart's
  image keys (``patch.imageNew`` from Kubernetes 1.22, ``patch.image`` before).
* **Services** ClusterIP, not NodePort (31998, 31993, 31992 on every node): the webhook is called
  by the API server through the Service, the monitors are scraped inside the cluster.
* **Webhook** scoped to the namespaces of teams with HAMi quota (``gpuaas.io/hami: "true"``, a label
  teams cannot write), ``failurePolicy: Ignore`` as the chart has it: HAMi's webhook does not sit
  in front of every pod of the cluster (its multi-replica failover is broken, HAMi #1954: one
  replica), and when it is down, gpuaas's own admission policy refuses the HAMi pods it did not
  point at HAMi's scheduler (components/tenancy/hami_admission.py) — an outage fails closed for
  those pods only.
* **Device plugin** only on HAMi nodes (``gpuaas.io/hami: "true"`` beside HAMi's own ``gpu: "on"``,
  both set on every node of a HAMi group), tolerating their pools' taints; after the GPU Operator's
  toolkit (``gpuOperatorToolkitReady``) with its ``nvidia`` RuntimeClass, and the driver root where
  the Operator brings the driver
  (hami.md "With the NVIDIA GPU Operator"). The Operator's own device plugin and MIG Manager stay
  off on those nodes through their ``nvidia.com/gpu.deploy.*=false`` labels
  (components/clusters/onprem_nodes.py).
* **RBAC**: HAMi 2.10.0 binds its scheduler to ``system:kube-scheduler`` only; from Kubernetes 1.34
  kube-scheduler lists and watches ``resource.k8s.io`` objects whatever HAMi does, and where that
  bootstrap role lacks them (clusters upgraded without its reconciliation) the scheduler never
  becomes ready (HAMi #1917 added the rules for 1.34; 2.10.0 dropped them). gpuaas grants the read
  rules kube-scheduler's own role has (:func:`dra_read_role`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import k8s as kube
from components.k8s import Manifest
from components.model import charts, hami, resources
from components.model.config import StackConfig
from components.operators.gpu_operator import driver_enabled

CHART: Final = "hami"
#: The RuntimeClass the GPU Operator's toolkit creates (its ``operator.runtimeClass`` default).
RUNTIME_CLASS: Final = "nvidia"
#: Where the GPU Operator's driver container puts the driver on the host (hami.md).
OPERATOR_DRIVER_ROOT: Final = "/run/nvidia/driver"
#: From this minor kube-scheduler starts its DRA informers (DynamicResourceAllocation GA).
DRA_INFORMERS_FROM: Final = (1, 34)
#: The read rules of kube-scheduler's own ClusterRole on ``resource.k8s.io`` (kubernetes v1.34-v1.37
#: plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, "Needed for dynamic resource
#: allocation"; ``devicetaintrules`` behind DRADeviceTaints/DRADeviceTaintRules).
DRA_READ_RESOURCES: Final = ("deviceclasses", "devicetaintrules", "resourceclaims", "resourceslices")
DRA_READ_ROLE: Final = "gpuaas-hami-scheduler-dra-read"
HELM_TIMEOUT_SECONDS: Final = 600


def image(repository: str, tag: str) -> dict[str, str]:
    """The chart's ``{registry, repository, tag}`` for ``repository`` (``docker.io/projecthami/hami``).

    The first segment is a registry when it looks like a host (a dot, a port or ``localhost``),
    as container runtimes read an image reference (distribution/reference ``splitDockerDomain``).
    """
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return {"registry": first, "repository": rest, "tag": tag}
    return {"registry": "", "repository": repository, "tag": tag}


def kubernetes_version(cfg: StackConfig) -> tuple[int, int, int]:
    """The declared version as numbers; the rules made it ``MAJOR.MINOR.PATCH`` for a HAMi stack."""
    text = cfg.platform.kubernetes_version
    assert text is not None, "rules: a HAMi stack declares platform.kubernetesVersion"
    major, minor, patch = (int(n) for n in text.split("."))
    return major, minor, patch


def scheduler_tag(cfg: StackConfig) -> str:
    """``v1.34.4``: kube-scheduler at the cluster's declared version (registry.k8s.io tags so)."""
    return "v" + ".".join(str(n) for n in kubernetes_version(cfg))


def tolerations(cfg: StackConfig) -> list[dict[str, str]]:
    """Tolerations of the HAMi GPU pools' taints (AKS), each once, in pool order; on-prem none."""
    if cfg.aks is None:
        return []
    names = {name for _w, name, _h, _m in hami.hami_groups(cfg)}
    out: list[dict[str, str]] = []
    for pool in cfg.aks.gpu_pools:
        if pool.name in names:
            for t in pool.taints:
                tol = kube.taint_toleration(t)
                if tol not in out:
                    out.append(tol)
    return out


def hami_values(cfg: StackConfig) -> dict[str, Any]:
    """Helm values of the HAMi chart (see the module docstring for every departure from its defaults)."""
    s = hami.settings(cfg)
    assert s is not None, "hami_values of a stack without HAMi"
    v = cfg.versions
    own = image(v.hami_image, v.hami)
    certgen = image(v.webhook_certgen_image, v.webhook_certgen)
    device_plugin: dict[str, Any] = {
        "image": dict(own),
        "monitor": {"image": dict(own)},
        "deviceSplitCount": s.split_count,
        "deviceMemoryScaling": s.memory_scaling,
        "runtimeClassName": RUNTIME_CLASS,
        "gpuOperatorToolkitReady": {"enabled": True},
        # Helm merges maps, so the chart's ``gpu: "on"`` stays (deleting it takes a null, which the
        # Python SDK strips before it reaches the provider: pulumi-kubernetes #3178, #4293); HAMi
        # nodes carry both labels (components/clusters/onprem_nodes.py), and only they carry ours.
        "nvidiaNodeSelector": dict(resources.HAMI_NODE_LABELS),
        "service": {"type": "ClusterIP"},
    }
    if driver_enabled(cfg):
        device_plugin["nvidiaDriverRoot"] = OPERATOR_DRIVER_ROOT
    if tols := tolerations(cfg):
        device_plugin["tolerations"] = tols
    return {
        "resourceName": resources.HAMI_GPU,
        "resourceMem": resources.HAMI_MEMORY,
        "resourceMemPercentage": resources.HAMI_MEMORY_PERCENTAGE,
        "resourceCores": resources.HAMI_CORES,
        "resourcePriority": resources.HAMI_PRIORITY,
        "schedulerName": hami.SCHEDULER_NAME,
        "scheduler": {
            # One replica: HAMi's failover between replicas is broken (HAMi #1954).
            "leaderElect": True,
            "replicas": 1,
            "kubeScheduler": {
                "image": image(v.kube_scheduler_image, scheduler_tag(cfg)),
            },
            "extender": {"image": dict(own)},
            "admissionWebhook": {
                "failurePolicy": "Ignore",
                "namespaceSelector": {"matchLabels": {resources.HAMI_LABEL: "true"}},
            },
            "patch": {"image": dict(certgen), "imageNew": dict(certgen)},
            "service": {"type": "ClusterIP"},
        },
        "devicePlugin": device_plugin,
        "devices": {"nvidia": {"gpuCorePolicy": s.core_policy}},
    }


def namespace(cfg: StackConfig) -> Manifest:
    """HAMi's namespace, Pod Security ``privileged`` (its device plugin is a privileged host agent
    with ``hostPID``), and out of HAMi's webhook's sight."""
    del cfg
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": hami.NAMESPACE,
            "labels": {
                **resources.PART_OF,
                **resources.pod_security_labels("privileged"),
                hami.WEBHOOK_IGNORE_LABEL: "ignore",
            },
        },
    }


def needs_dra_read(cfg: StackConfig) -> bool:
    """kube-scheduler of the declared version starts DRA informers (1.34 and later)."""
    return kubernetes_version(cfg)[:2] >= DRA_INFORMERS_FROM


def dra_read_role() -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": DRA_READ_ROLE, "labels": dict(resources.PART_OF)},
        "rules": [
            {"apiGroups": ["resource.k8s.io"], "resources": list(DRA_READ_RESOURCES), "verbs": ["get", "list", "watch"]}
        ],
    }


def dra_read_binding() -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DRA_READ_ROLE, "labels": dict(resources.PART_OF)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DRA_READ_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": hami.SCHEDULER_SERVICE_ACCOUNT, "namespace": hami.NAMESPACE}],
    }


def hami_objects(cfg: StackConfig) -> dict[str, Manifest]:
    """HAMi's objects besides the release, by role; empty without HAMi."""
    if not hami.uses_hami(cfg):
        return {}
    out = {"namespace": namespace(cfg)}
    if needs_dra_read(cfg):
        out.update({"dra-read-role": dra_read_role(), "dra-read-binding": dra_read_binding()})
    return out


class Hami(pulumi.ComponentResource):
    """HAMi's namespace, its chart as a pinned Helm release, and the scheduler's DRA read RBAC.

    ``depends_on``: the GPU Operator release (HAMi's device plugin waits for its toolkit and uses
    its RuntimeClass) and the node labels that turn the Operator's device plugin off on HAMi nodes
    (two device plugins must never advertise one node's GPUs).
    """

    release: k8s.helm.v3.Release

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("gpuaas:index:Hami", name, None, opts)
        objects = hami_objects(cfg)
        ns = kube.apply(f"{name}-namespace", objects.pop("namespace"), kube.child(self))
        # The RBAC first: the scheduler pod would otherwise start without its DRA reads and wait.
        rbac = [kube.apply(f"{name}-{role}", m, kube.child(self, [ns])) for role, m in objects.items()]
        self.release = kube.helm_release(
            f"{name}-release",
            charts.source(cfg.charts, charts.chart(cfg.versions, CHART)),
            release=hami.RELEASE,
            namespace=hami.NAMESPACE,
            values=hami_values(cfg),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=kube.child(self, [ns, *rbac, *depends_on]),
        )
        self.register_outputs({"namespace": hami.NAMESPACE, "release": self.release.name})
