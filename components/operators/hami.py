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

from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import k8s as kube
from components.k8s import Manifest
from components.model import charts, hami, resources
from components.model.gpu_operator import GpuOperator as GpuOperatorConfig
from components.model.network import Network
from components.model.sharing import Hami as HamiSettings
from components.model.types import Taint
from components.model.versions import Versions
from components.operators.gpu_operator import operator_version

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


@dataclass(frozen=True, kw_only=True)
class HamiArgs:
    """Arguments of :class:`Hami`.

    Ordering: ``opts.depends_on`` is forwarded to every child; ``release_after`` holds back the release
    and the node validation alone.
    """

    kubernetes_version: str
    """The cluster's Kubernetes version, ``MAJOR.MINOR.PATCH`` (``1.34.4``): kube-scheduler runs at it, and
    from 1.34 it needs the DRA read rules HAMi 2.10.0 lacks. No default: it must be the cluster's."""
    settings: HamiSettings = field(default_factory=HamiSettings)
    """Slices per GPU, the memory share handed out and HAMi-core's SM policy, cluster-wide (a node group's
    ``hami``; every HAMi group of a stack states the same). ``driver`` must be ``devicePlugin``: this is
    HAMi's device plugin and scheduler, not its DRA driver."""
    versions: Versions = field(default_factory=Versions)
    """HAMi's, kube-scheduler's and the certificate job's images; the GPU Operator's release (its validator's tag)."""
    chart: charts.Source = field(
        default_factory=lambda: charts.source(charts.Charts(), charts.chart(Versions(), CHART))
    )
    """Where the hami chart comes from, at its pinned version (defaults to the public repository)."""
    operator_driver: bool = False
    """The GPU Operator brings the GPU driver (its ``/run/nvidia/driver``, HAMi's ``nvidiaDriverRoot``);
    off: the hosts carry it (on-prem's default; :func:`components.operators.gpu_operator.driver_enabled`)."""
    gpu_operator_namespace: str = field(default_factory=lambda: GpuOperatorConfig().namespace)
    """The GPU Operator's namespace, where its validator's ServiceAccount is and the node validation runs."""
    network: Network = field(default_factory=Network)
    """The tolerations the node validation runs with, as every node agent (``gpuaas:network``)."""
    taints: tuple[Taint, ...] = ()
    """The HAMi nodes' taints (``key[=value]:Effect``, the AKS pools' ``taints``), tolerated by HAMi's device
    plugin and the node validation, each once in order. None on-prem."""
    release_after: tuple[pulumi.Resource, ...] = ()
    """What the release and the node validation wait for: the GPU Operator release (its toolkit,
    RuntimeClass and validator ServiceAccount) and the node labels that turn its device plugin off on
    HAMi nodes, so two device plugins never advertise one node's GPUs."""


def image(repository: str, tag: str) -> dict[str, str]:
    """The chart's ``{registry, repository, tag}`` for ``repository`` (``docker.io/projecthami/hami``).

    The first segment is a registry when it looks like a host (a dot, a port or ``localhost``),
    as container runtimes read an image reference (distribution/reference ``splitDockerDomain``).
    """
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return {"registry": first, "repository": rest, "tag": tag}
    return {"registry": "", "repository": repository, "tag": tag}


def kubernetes_version(args: HamiArgs) -> tuple[int, int, int]:
    """The declared version as numbers (the stack's rules made it ``MAJOR.MINOR.PATCH`` for a HAMi stack)."""
    parts = args.kubernetes_version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"kubernetes_version {args.kubernetes_version!r}: want MAJOR.MINOR.PATCH, e.g. 1.34.4")
    major, minor, patch = (int(n) for n in parts)
    return major, minor, patch


def scheduler_tag(args: HamiArgs) -> str:
    """``v1.34.4``: kube-scheduler at the cluster's declared version (registry.k8s.io tags so)."""
    return "v" + ".".join(str(n) for n in kubernetes_version(args))


def tolerations(args: HamiArgs) -> list[dict[str, str]]:
    """Tolerations of the HAMi nodes' taints, each once, in order."""
    out: list[dict[str, str]] = []
    for t in args.taints:
        tol = kube.taint_toleration(t)
        if tol not in out:
            out.append(tol)
    return out


def hami_values(args: HamiArgs) -> dict[str, Any]:
    """Helm values of the HAMi chart (see the module docstring for every departure from its defaults)."""
    s = args.settings
    v = args.versions
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
    if args.operator_driver:
        device_plugin["nvidiaDriverRoot"] = OPERATOR_DRIVER_ROOT
    if tols := tolerations(args):
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
                "image": image(v.kube_scheduler_image, scheduler_tag(args)),
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


def namespace() -> Manifest:
    """HAMi's namespace, Pod Security ``privileged`` (its device plugin is a privileged host agent
    with ``hostPID``), and out of HAMi's webhook's sight."""
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


def needs_dra_read(args: HamiArgs) -> bool:
    """kube-scheduler of the declared version starts DRA informers (1.34 and later)."""
    return kubernetes_version(args)[:2] >= DRA_INFORMERS_FROM


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


#: The GPU Operator's validator image (chart values.yaml ``validator.repository``/``image``), at
#: :func:`components.operators.gpu_operator.operator_version`.
VALIDATOR_IMAGE: Final = "nvcr.io/nvidia/gpu-operator"
#: The ServiceAccount the Operator creates for its validator in its namespace, with the reads the
#: driver validation makes (gpu-operator v26.7.0 assets/state-operator-validation/0100-0310).
VALIDATOR_SERVICE_ACCOUNT: Final = "nvidia-operator-validator"
NODE_VALIDATION: Final = "hami-node-validation"
#: Where the validator writes ``driver-ready`` and ``toolkit-ready``, which the Operator's
#: dcgm-exporter and HAMi's device plugin (``gpuOperatorToolkitReady``) wait for on the node.
VALIDATIONS_DIR: Final = "/run/nvidia/validations"


def _validation(component: str, env: dict[str, str], mounts: list[dict[str, Any]], image_ref: str) -> dict[str, Any]:
    """One of the validator's init containers as the Operator renders it: ``nvidia-validator`` with
    ``COMPONENT`` (assets/state-operator-validation/0500_daemonset.yaml)."""
    return {
        "name": f"{component}-validation",
        "image": image_ref,
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        "env": [{"name": k, "value": v} for k, v in {**env, "COMPONENT": component}.items()]
        + [{"name": "OPERATOR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
        "volumeMounts": mounts,
    }


def node_validation_daemonset(args: HamiArgs) -> Manifest:
    """The GPU Operator's driver and toolkit validations on HAMi nodes, where its validator is off.

    gpu-operator v26.7.0 renders one validator DaemonSet for the cluster; its ``plugin-validation``
    waits for a node resource beginning ``nvidia.com/gpu`` or ``nvidia.com/mig-``
    (cmd/nvidia-validator/main.go ``validateGPUResource``, 30 × 5 s, then the pod restarts) and is
    left out only when the device plugin is off for the whole cluster
    (controllers/object_controls.go ``TransformValidatorComponent``); no env or label turns it off
    on one node (NVIDIA/gpu-operator#2550, open). HAMi advertises ``nvidia.com/vgpu``, so on a HAMi
    node it would restart forever and the ClusterPolicy never be ready. HAMi nodes therefore carry
    ``nvidia.com/gpu.deploy.operator-validator=false`` (:mod:`components.clusters.onprem_nodes`,
    which the Operator keeps), and this DaemonSet runs there what the validator's first two init
    containers run, with the same image, environment and mounts: the driver validation and the
    toolkit validation (with the ``nvidia`` RuntimeClass, as the Operator gives its validator, so
    ``nvidia-smi`` is injected). They write ``driver-ready`` and ``toolkit-ready``, which the
    Operator's dcgm-exporter and HAMi's device plugin wait for. Whole-GPU nodes keep the Operator's
    validator, device-plugin validation and all.
    """
    ref = f"{VALIDATOR_IMAGE}:{operator_version(args.versions)}"
    validations: dict[str, Any] = {
        "name": "run-nvidia-validations",
        "mountPath": VALIDATIONS_DIR,
        "mountPropagation": "Bidirectional",
    }
    driver_mounts: list[dict[str, Any]] = [
        {"name": "host-root", "mountPath": "/host", "readOnly": True, "mountPropagation": "HostToContainer"},
        {"name": "driver-install-dir", "mountPath": OPERATOR_DRIVER_ROOT, "mountPropagation": "HostToContainer"},
        validations,
        {"name": "host-dev-char", "mountPath": "/host-dev-char"},
    ]
    ready = " ".join(f"{VALIDATIONS_DIR}/{c}-ready" for c in ("driver", "toolkit"))
    pod: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "serviceAccountName": VALIDATOR_SERVICE_ACCOUNT,
        "runtimeClassName": RUNTIME_CLASS,
        # The Operator's validator's own toleration, and the HAMi pools' taints.
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, *tolerations(args)],
        "initContainers": [
            _validation("driver", {"WITH_WAIT": "true"}, driver_mounts, ref),
            _validation("toolkit", {"NVIDIA_VISIBLE_DEVICES": "all", "WITH_WAIT": "false"}, [validations], ref),
        ],
        "containers": [
            {
                "name": NODE_VALIDATION,
                "image": ref,
                "command": ["sh", "-c"],
                "args": ["echo driver and toolkit validations are successful; while true; do sleep 86400; done"],
                "securityContext": {"privileged": True},
                # As the Operator's validator: a node whose validation pod goes makes its dependants wait again.
                "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", f"rm -f {ready}"]}}},
                "volumeMounts": [validations],
            }
        ],
        "volumes": [
            {"name": "run-nvidia-validations", "hostPath": {"path": VALIDATIONS_DIR, "type": "DirectoryOrCreate"}},
            {"name": "driver-install-dir", "hostPath": {"path": OPERATOR_DRIVER_ROOT}},
            {"name": "host-root", "hostPath": {"path": "/"}},
            {"name": "host-dev-char", "hostPath": {"path": "/dev/char"}},
        ],
    }
    return kube.node_daemonset(
        args.network,
        NODE_VALIDATION,
        pod,
        node_selector=resources.HAMI_NODE_LABELS,
        namespace=args.gpu_operator_namespace,
    )


def hami_objects(args: HamiArgs) -> dict[str, Manifest]:
    """HAMi's objects besides the release, by role."""
    out = {"namespace": namespace()}
    if needs_dra_read(args):
        out.update({"dra-read-role": dra_read_role(), "dra-read-binding": dra_read_binding()})
    return out


class Hami(pulumi.ComponentResource):
    """HAMi's namespace, its chart as a pinned Helm release, the scheduler's DRA read RBAC, and the
    GPU Operator's driver and toolkit validations on HAMi nodes (:func:`node_validation_daemonset`).

    ``opts.depends_on`` reaches every child; ``args.release_after`` (the GPU Operator release and the
    HAMi nodes' labels) holds back the release and the node validation.
    """

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: HamiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Hami", name, None, opts)
        if args.settings.driver != "devicePlugin":
            raise ValueError(
                f"Hami deploys HAMi's device plugin: settings.driver is {args.settings.driver!r}, "
                "allowed: 'devicePlugin'"
            )
        after = kube.depends_on(opts)
        objects = hami_objects(args)
        ns = kube.apply(f"{name}-namespace", objects.pop("namespace"), kube.child(self, after))
        # The RBAC first: the scheduler pod would otherwise start without its DRA reads and wait.
        rbac = [kube.apply(f"{name}-{role}", m, kube.child(self, [*after, ns])) for role, m in objects.items()]
        # After the GPU Operator: it creates the validator's ServiceAccount this runs as.
        kube.apply(
            f"{name}-node-validation",
            node_validation_daemonset(args),
            kube.child(self, [*after, *args.release_after]),
        )
        self.release = kube.helm_release(
            f"{name}-release",
            args.chart,
            release=hami.RELEASE,
            namespace=hami.NAMESPACE,
            values=hami_values(args),
            timeout=HELM_TIMEOUT_SECONDS,
            opts=kube.child(self, [*after, ns, *rbac, *args.release_after]),
        )
        self.register_outputs({"namespace": hami.NAMESPACE, "release": self.release.name})
