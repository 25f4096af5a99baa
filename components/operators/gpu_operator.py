"""NVIDIA GPU Operator: its namespace, our MIG and device-plugin ConfigMaps, and the Helm release.

Everything the chart is told is derived from the stack config by pure functions
(:func:`gpu_operator_values`, :func:`mig_parted_configmap`, :func:`device_plugin_configmap`);
:class:`GpuOperator` only registers them. Key paths follow gpu-operator v26.7.0
``deployments/gpu-operator/values.yaml`` (../shared/upstream/gpu-operator/v26.7.0/values.yaml) and the
ClusterPolicy CRD they are rendered into; the tests check every path and enum against both.

MIG and time-slicing are selected per node by two labels (set by :mod:`components.clusters.onprem_nodes`
on-prem and by the AgentPool on AKS): ``nvidia.com/mig.config`` names a config in our mig-parted
ConfigMap, ``nvidia.com/device-plugin.config`` a key of our device-plugin ConfigMap
(GPU Operator docs "GPU Operator with MIG" and "Time-Slicing GPUs in Kubernetes").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components import k8s as kube
from components.guards.gate import gated
from components.model import charts, resources
from components.model.capacity import (
    DEVICE_PLUGIN_DEFAULT_CONFIG,
    device_plugin_config_name,
    layout_name,
    mig_counts,
)
from components.model.gpu_operator import GpuOperator as GpuOperatorConfig
from components.model.mig import DISABLED, mig_parted_config
from components.model.observability import Observability, dcgm_counters_csv
from components.model.sharing import GpuSharing
from components.model.versions import Versions
from components.operators import gpu_cluster

#: Our mig-parted ConfigMap. Naming one turns off MIG Manager's per-node generated configs
#: (GPU Operator >= v26.3.0), so every node sees exactly the layouts the stack declares.
MIG_CONFIGMAP = "gpuaas-mig-parted-config"
#: The key MIG Manager reads; a custom ConfigMap "MUST have a key named config.yaml" (values.yaml).
MIG_CONFIG_KEY = "config.yaml"
#: Our device-plugin (and GFD) ConfigMap: one key per node group plus the unlabelled-node default.
DEVICE_PLUGIN_CONFIGMAP = "gpuaas-time-slicing-config"
#: Helm release name; a contract (renaming it reinstalls the operator).
RELEASE_NAME = "gpu-operator"
#: dcgm-exporter's counters list (``dcgmExporter.config``; the chart creates it, key ``dcgm-metrics.csv``).
DCGM_CONFIGMAP = "gpuaas-dcgm-metrics"
CHART = charts.GPU_OPERATOR
PART_OF = resources.PART_OF


# --------------------------------------------------------------------------------------------
# Pure renderers


@dataclass(frozen=True)
class GpuGroup:
    """One node group (on-prem) or ND pool (AKS) as the GPU Operator configures it."""

    name: str
    """The group's name: its device-plugin config is named after it."""
    sharing: GpuSharing
    """How its GPUs are shared: the MIG layout or profiles, time-slicing replicas."""
    gpu_model: str
    """Its GPU model (a key of :data:`components.model.catalog.GPU_MODELS`), which its MIG profiles are of."""


@dataclass(frozen=True, kw_only=True)
class GpuOperatorArgs:
    """Arguments of :class:`GpuOperator`.

    Ordering: ``opts.depends_on``, forwarded to every child; ``release_after`` for the release alone.
    """

    gpu_operator: GpuOperatorConfig = field(default_factory=GpuOperatorConfig)
    """Namespace, MIG strategy, GPUDirect path (``dmabuf``/``peermem``), resource model and Helm timeout
    (``gpuaas:gpuOperator``)."""
    versions: Versions = field(default_factory=Versions)
    """The chart's release (the operator's image tags), the pinned GPU driver and DRA driver."""
    chart: charts.Source = field(
        default_factory=lambda: charts.source(charts.Charts(), charts.chart(Versions(), CHART))
    )
    """Where the gpu-operator chart comes from, at its pinned version (defaults to the public repository)."""
    driver_enabled: bool = False
    """The operator installs the GPU driver (on AKS, whose pools skip theirs); off: the hosts carry it
    (:func:`driver_enabled` resolves ``gpuOperator.driverEnabled``)."""
    host_mofed: bool = True
    """The NIC driver (DOCA-OFED) is on the hosts, not the Network Operator's container
    (``network.ofedDriver: host``): the peermem sidecar then uses the host's."""
    groups: tuple[GpuGroup, ...] = ()
    """The node groups or ND pools, whose MIG layouts and device-plugin configs the operator's ConfigMaps hold."""
    observability: Observability = field(default_factory=Observability)
    """With ``enabled``: dcgm-exporter's counters and its ServiceMonitor, labelled for the Prometheus stack."""
    release_after: tuple[pulumi.Resource, ...] = ()
    """What the Helm release alone waits for: the NicClusterPolicy, so GPUDirect RDMA finds the NIC driver
    (the namespace and ConfigMaps need not wait; ``opts.depends_on`` holds back every child)."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards (:mod:`components.guards`): the MIG ConfigMap's content and the chart values wait
    for them. ``None``: no guard."""

    @property
    def uses_dra(self) -> bool:
        """GPUs through ResourceClaims (GPUCluster), not the device plugin (ClusterPolicy)."""
        return self.gpu_operator.resource_model == "dra"


def driver_enabled(go: GpuOperatorConfig, *, aks: bool) -> bool:
    """Whether the operator installs the GPU driver. Defaults to the platform's convention.

    On-prem the first seed ships the driver on the host. On AKS the GPU pools are created with the
    AKS driver install skipped (``gpu_profile.driver=None``), and the AKS-managed driver and the
    operator's driver "are mutually exclusive" (Azure/aks-rdma-infiniband docs 02-gpu-drivers.md),
    so the operator must bring it.
    """
    if go.driver_enabled is not None:
        return go.driver_enabled
    return aks


def rdma_values(args: GpuOperatorArgs) -> dict[str, bool]:
    """``driver.rdma``: the legacy nvidia-peermem path on or off, and where MOFED comes from.

    ``driver.rdma.enabled`` deploys nvidia-peermem (the ``nvidia-peermem-ctr`` sidecar), which only
    the legacy ``peermem`` path needs; DMA-BUF needs no module at all. ``useHostMofed`` tells that
    sidecar to use a MOFED installed on the host instead of the Network Operator's driver container
    (NVIDIA GPU Operator docs, "GPUDirect RDMA and GPUDirect Storage", gpu-operator-rdma.html), so it
    is true only for a host OFED with peermem on. Azure/aks-rdma-infiniband's gpu-operator values set
    ``rdma.enabled: true`` and no ``useHostMofed`` because their OFED is the containerized DOCA driver.
    """
    enabled = args.gpu_operator.gpudirect == "peermem"
    return {"enabled": enabled, "useHostMofed": enabled and args.host_mofed}


def mig_layouts(groups: tuple[GpuGroup, ...]) -> dict[str, dict[str, int]]:
    """Every node group's layout by the config name its nodes are labelled with.

    One name has one layout; :func:`components.rules.check` refuses a stack where a name such as
    ``all-balanced`` means different profiles on two GPU models.
    """
    layouts: dict[str, dict[str, int]] = {DISABLED: {}}
    for group in groups:
        layouts[layout_name(group.sharing)] = mig_counts(group.sharing, group.gpu_model)
    return dict(sorted(layouts.items()))


def mig_parted_configmap(args: GpuOperatorArgs) -> dict[str, Any]:
    """Our mig-parted ConfigMap; ``config.yaml`` is dumped with sorted keys so it never churns.

    Stable bytes matter: a changed ConfigMap is a diff in ``pulumi preview``, and a MIG layout
    change evicts every GPU pod on the nodes it applies to (GPU Operator MIG docs).
    """
    text = yaml.safe_dump(mig_parted_config(mig_layouts(args.groups)), sort_keys=True, default_flow_style=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MIG_CONFIGMAP, "namespace": args.gpu_operator.namespace, "labels": dict(PART_OF)},
        "data": {MIG_CONFIG_KEY: text},
    }


def device_plugin_configs(args: GpuOperatorArgs) -> dict[str, dict[str, Any]]:
    """k8s-device-plugin configs (``version: v1``) by key: one per group and ``default``.

    Every config carries ``flags.migStrategy`` so the plugin and GFD agree with ClusterPolicy
    ``mig.strategy``. Time-sliced groups set ``renameByDefault: true`` so replicas are advertised as
    ``nvidia.com/gpu.shared`` (:data:`components.model.resources.GPU_SHARED`, what team quotas name) and
    ``failRequestsGreaterThanOne: true`` because a request for two shares gets no more compute
    (NVIDIA/k8s-device-plugin README, "Shared Access to GPUs with CUDA Time-Slicing").
    """
    strategy = args.gpu_operator.mig_strategy

    def plain() -> dict[str, Any]:
        return {"version": "v1", "flags": {"migStrategy": strategy}}

    configs: dict[str, dict[str, Any]] = {DEVICE_PLUGIN_DEFAULT_CONFIG: plain()}
    for group in args.groups:
        sharing = group.sharing
        config = plain()
        if sharing.time_slicing is not None:
            config["sharing"] = {
                "timeSlicing": {
                    "renameByDefault": True,
                    "failRequestsGreaterThanOne": True,
                    "resources": [{"name": resources.GPU, "replicas": sharing.time_slicing.replicas}],
                }
            }
        configs[device_plugin_config_name(group.name)] = config
    return dict(sorted(configs.items()))


def device_plugin_configmap(args: GpuOperatorArgs) -> dict[str, Any]:
    """Our device-plugin ConfigMap: "a ConfigMap whose keys are config names" (GPU Operator time-slicing docs)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DEVICE_PLUGIN_CONFIGMAP,
            "namespace": args.gpu_operator.namespace,
            "labels": dict(PART_OF),
        },
        "data": {
            key: yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
            for key, config in device_plugin_configs(args).items()
        },
    }


def namespace_manifest(namespace: str) -> dict[str, Any]:
    """The operator namespace, Pod Security ``privileged``: the driver, toolkit, device plugin and
    MIG Manager pods are privileged host agents (GPU Operator getting-started, "Pod Security
    Admission"). ``audit``/``warn`` match so rollouts do not warn."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {**PART_OF, **resources.pod_security_labels("privileged")},
        },
    }


def operator_version(versions: Versions) -> str:
    """The tag of the GPU Operator's own images (operator, validator, node status exporter): the
    release of the pinned chart, ``v`` first as NVIDIA tags them (nvcr.io/nvidia/gpu-operator:v26.7.0).

    The chart defaults these tags to its ``appVersion`` (templates/_helpers.tpl
    ``gpu-operator.fullimage``, templates/clusterpolicy.yaml), which the published chart sets to
    its release; the chart at its git tag says ``appVersion: main-latest`` (and ``version:
    v1.0.0-devel``), so a mirror built from the source tree would run a moving development image.
    Written out, the tag is the release wherever the chart comes from.
    """
    return "v" + versions.gpu_operator_chart.removeprefix("v")


def gpu_operator_values(args: GpuOperatorArgs) -> dict[str, Any]:
    """Helm values of the gpu-operator chart; every other key keeps the chart's default.

    - ``operator``/``validator``/``nodeStatusExporter.version``: :func:`operator_version`.
    - ``nfd.enabled: false``: the Network Operator already runs NFD, and two NFD deployments fight
      over the same node labels (Azure/aks-rdma-infiniband configs/values/gpu-operator does the same).
    - ``driver``: see :func:`driver_enabled` and :func:`rdma_values`. With ``dmabuf``, NVIDIA's
      recommended GPUDirect path, ``kernelModuleType: open`` because DMA-BUF needs the open kernel
      modules (``auto`` picks them only on newer branches; GPU Operator RDMA docs). A host driver
      must likewise be the open flavour. ``version`` is set only when the stack pins one.
    - ``migManager.config`` / ``devicePlugin.config``: our ConfigMaps (``create: false``: we own
      them, so a MIG layout change is a ConfigMap diff rather than a Helm upgrade).
    """
    go = args.gpu_operator
    driver: dict[str, Any] = {"enabled": args.driver_enabled, "rdma": rdma_values(args)}
    if go.gpudirect == "dmabuf":
        driver["kernelModuleType"] = "open"
    if args.versions.gpu_driver is not None:
        driver["version"] = args.versions.gpu_driver
    if args.uses_dra:
        return dra_values(args, driver)
    version = operator_version(args.versions)
    dcgm = dcgm_exporter_values(args.observability, dra=args.uses_dra)
    return {
        "nfd": {"enabled": False},
        "operator": {"version": version},
        "validator": {"version": version},
        "nodeStatusExporter": {"version": version},
        "driver": driver,
        **({"dcgmExporter": dcgm} if dcgm else {}),
        "mig": {"strategy": go.mig_strategy},
        "migManager": {"config": {"create": False, "name": MIG_CONFIGMAP, "default": DISABLED}},
        "devicePlugin": {
            "config": {"create": False, "name": DEVICE_PLUGIN_CONFIGMAP, "default": DEVICE_PLUGIN_DEFAULT_CONFIG}
        },
    }


def dcgm_exporter_values(o: Observability, *, dra: bool) -> dict[str, Any]:
    """``dcgmExporter`` with ``observability.enabled``: our counters list and the operator's ServiceMonitor.

    - ``config``: the chart creates the ConfigMap (templates/dcgm_exporter_config.yaml) and the
      operator points dcgm-exporter's collectors at it; the list is
      :data:`components.model.observability.DCGM_COUNTERS` (ECC and retired pages enabled).
    - ``serviceMonitor``: labelled for the Prometheus stack's selector. Pod attribution is
      dcgm-exporter's own (``DCGM_EXPORTER_KUBERNETES``, on in the operator's DaemonSet): it labels a
      GPU held by a pod with ``namespace``, ``pod``, ``container``. Those names collide with the
      target's own labels, which Prometheus would keep, renaming the pod's to ``exported_*``;
      so the target's ``namespace``/``pod``/``container`` are dropped (a GPU no pod holds then has
      none) and ``node`` is taken from the exporter pod's node (``__meta_kubernetes_pod_node_name``).
    - DRA: ``KUBERNETES_ENABLE_DRA`` maps claimed devices to pods (dcgm-exporter ``--kubernetes-enable-dra``).
    """
    if not o.enabled:
        return {}
    out: dict[str, Any] = {
        "config": {"name": DCGM_CONFIGMAP, "create": True, "data": dcgm_counters_csv()},
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "honorLabels": False,
            "additionalLabels": dict(o.prometheus.monitor_labels),
            "relabelings": [
                {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"},
                {"regex": "namespace|pod|container", "action": "labeldrop"},
            ],
        },
    }
    if dra:
        out["env"] = [{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}]
    return out


def dra_values(args: GpuOperatorArgs, driver: dict[str, Any]) -> dict[str, Any]:
    """Chart values of the DRA resource model: no ClusterPolicy, and gpuaas's own GPUCluster.

    ``clusterPolicy.deployCR: false`` because a ClusterPolicy and a GPUCluster "may not exist at the
    same time" (gpu-operator v26.7.0 controllers/gpucluster_controller.go). ``gpuCluster.deployCR:
    false`` too: gpuaas applies the GPUCluster itself (:func:`components.operators.gpu_cluster.gpu_cluster`), so it is
    one object in the plan, checked against the CRD, with one owner; the chart's copy would carry
    ``helm.sh/resource-policy: keep`` and outlive the release. The operator's GPUCluster controller
    runs either way (cmd/gpu-operator/main.go registers it unconditionally). GPUCluster installs no
    GPU driver: where the operator brings it (AKS), it does so through an NVIDIADriver CR, which
    the chart refuses to leave out ("the NVIDIADriver CRD must be enabled when deploying a
    GPUCluster CR", templates/validations.yaml); its default CR takes ``driver.*`` as before.
    """
    if driver["enabled"]:
        driver = {**driver, "nvidiaDriverCRD": {"enabled": True, "deployDefaultCR": True}}
    dcgm = dcgm_exporter_values(args.observability, dra=args.uses_dra)
    return {
        "nfd": {"enabled": False},
        "operator": {"version": operator_version(args.versions)},
        "driver": driver,
        # The chart creates the counters ConfigMap; the GPUCluster (ours) names it.
        **({"dcgmExporter": {"config": dcgm["config"]}} if dcgm else {}),
        "clusterPolicy": {"deployCR": False},
        "gpuCluster": {"deployCR": False},
    }


# --------------------------------------------------------------------------------------------
# Shell


class GpuOperator(pulumi.ComponentResource):
    """The GPU Operator release with the namespace and ConfigMaps it reads.

    ``args.release_after`` orders the release after the NicClusterPolicy (reconciled, not ready:
    docs/notes/what-a-run-waits-for.md). GPUDirect RDMA needs the NIC driver up before the GPU driver
    stack starts; that order is kept per node by the operands, not by the run: with
    ``driver.rdma.enabled`` the driver manager and ``mofed`` validation wait for the node's MOFED
    (gpu-operator v26.7.0 ``GPU_DIRECT_RDMA_ENABLED``, cmd/nvidia-validator ``MOFED``).
    ``configs`` are what node labels must wait for: a label naming a config that does not exist
    yet makes MIG Manager fail the node. ``args.gate``: the day-2 MIG guard; the MIG ConfigMap's
    content waits for it.
    """

    namespace: pulumi.CustomResource
    mig_config: pulumi.CustomResource
    device_plugin_config: pulumi.CustomResource | None
    release: k8s.helm.v3.Release
    gpu_cluster: pulumi.CustomResource | None

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:GpuOperator", name, None, opts)
        after, gate, go = kube.depends_on(opts), args.gate, args.gpu_operator
        self.namespace = kube.apply(f"{name}-namespace", namespace_manifest(go.namespace), kube.child(self, after))
        in_ns = kube.child(self, [*after, self.namespace])
        mig_configs = mig_parted_configmap(args)
        # A changed layout drops the old one from this ConfigMap: it waits on the MIG guard too.
        mig_configs["data"] = gated(gate, mig_configs["data"])
        self.mig_config = kube.apply(f"{name}-mig-config", mig_configs, in_ns)
        # DRA: no device plugin reads it (and GPUCluster runs no MIG Manager: the mig-parted config
        # above is then what the hosts apply before the driver starts, components/model/dra.py).
        self.device_plugin_config = (
            None if args.uses_dra else kube.apply(f"{name}-device-plugin-config", device_plugin_configmap(args), in_ns)
        )
        self.release = kube.helm_release(
            f"{name}-release",
            args.chart,
            release=RELEASE_NAME,
            namespace=go.namespace,
            # The values wait on the day-2 guards too: a resource-model switch (ClusterPolicy off)
            # must stop before the chart hears of it (components/model/dra.py model_switch_issues).
            values={k: gated(gate, v) for k, v in gpu_operator_values(args).items()},
            timeout=go.helm_timeout_seconds,
            opts=kube.child(self, [self.namespace, *self.configs, *after, *args.release_after]),
        )
        self.gpu_cluster = None
        if args.uses_dra:
            # After the release: its CRD and the controller that reconciles it come with the chart.
            manifest = gpu_cluster.gpu_cluster(
                args.versions,
                go.dra.dynamic_mig,
                args.driver_enabled,
                dcgm_exporter_values(args.observability, dra=True),
            )
            self.gpu_cluster = kube.apply(f"{name}-gpu-cluster", manifest, kube.child(self, [*after, self.release]))
        self.register_outputs({"namespace": go.namespace, "release": self.release.name})

    @property
    def configs(self) -> list[pulumi.Resource]:
        """The MIG and device-plugin ConfigMaps the node labels name."""
        return [c for c in (self.mig_config, self.device_plugin_config) if c is not None]
