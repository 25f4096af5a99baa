"""Pinned versions of every chart and image, with the defaults gpuaas is tested against.

This is the one place a default version is written: the ``gpuaas:versions`` section
(:class:`Versions`, at the end) takes its defaults from the constants here, and users override
them per stack. Upgrading: change a value here (or in the stack),
run ``make plan`` and read the diff of ``plan/<stack>/helm`` and ``plan/<stack>/k8s``.
"""

from __future__ import annotations

from typing import Final

from components.model.base import Model
from components.model.types import ChartVersion, ImageDigest, ImageRepository, ImageTag, OciReference, RepositoryUrl

#: NVIDIA's Helm repository, home of both operator charts.
#: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html
NVIDIA_HELM_REPO: Final = "https://helm.ngc.nvidia.com/nvidia"

#: Network Operator chart; newest stable tag (shared/upstream/network-operator/v26.4.1).
NETWORK_OPERATOR_CHART: Final = "v26.4.1"
#: GPU Operator chart; newest release tag (shared/upstream/gpu-operator/v26.7.0).
GPU_OPERATOR_CHART: Final = "v26.7.0"

#: The first GPU Operator chart with the GPUCluster CR (DRA resource model); the DRA driver it
#: names by default (gpu-operator v26.7.0 values.yaml ``draDriver``).
GPU_OPERATOR_FIRST_GPUCLUSTER: Final = "v26.7.0"
DRA_DRIVER_REPOSITORY: Final = "nvcr.io/nvidia"
DRA_DRIVER: Final = "v0.5.0"
#: DynamicResourceAllocation is GA (``resource.k8s.io/v1``, on by default) from Kubernetes 1.34.
DRA_MIN_KUBERNETES: Final = (1, 34)

#: Images of the NicClusterPolicy operands, as in network-operator v26.4.1
#: example/crs/mellanox.com_v1alpha1_nicclusterpolicy_cr-full.yaml.
MELLANOX_REPOSITORY: Final = "nvcr.io/nvidia/mellanox"
NETWORK_OPERATOR_COMPONENTS: Final = "network-operator-v26.4.1"
#: DOCA driver container; the operator appends ``-<os><ver>-<arch>`` (Azure/aks-rdma-infiniband nic.yaml).
DOCA_DRIVER: Final = "doca3.4.1-26.04-1.1.0.0-1"

#: ib-sriov CNI binary installer (k8snetworkplumbingwg/ib-sriov-cni v1.3.0, the newest release);
#: the NicClusterPolicy has no ib-sriov field, so gpuaas installs the binary itself.
IB_SRIOV_CNI_IMAGE: Final = "ghcr.io/k8snetworkplumbingwg/ib-sriov-cni"
IB_SRIOV_CNI: Final = "v1.3.0"

#: Standalone RDMA shared device plugin (Mellanox/k8s-rdma-shared-dev-plugin v1.5.3).
RDMA_SHARED_DP_IMAGE: Final = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin"
RDMA_SHARED_DP: Final = "v1.5.3"

#: Host-tool image for the privileged node DaemonSets (ib-node-config, SR-IOV host config):
#: needs bash and util-linux's nsenter, nothing else.
NODE_TOOLS_IMAGE: Final = "docker.io/library/debian"
NODE_TOOLS: Final = "12.12-slim"

#: OpenSM in-cluster (opt-in): an image that carries NVIDIA's OpenSM (virt_enabled support).
OPENSM_IMAGE: Final = "nvcr.io/nvidia/mellanox/opensm"
OPENSM: Final = "5.23.0"

#: Verification workloads: perftest (ib_write_bw) and PyTorch with NCCL.
PERFTEST_IMAGE: Final = "ghcr.io/azure/aks-rdma-infiniband/ibtools"
#: Azure/aks-rdma-infiniband publishes this image as ``latest`` only (.github/workflows/build-ibtools-image.yaml:
#: ``type=raw,value=latest`` plus a date tag for ``schedule`` events, and the workflow has no schedule
#: trigger), so it is pinned by digest. The digest is the one a public AKS RDMA lab pins for this image
#: (found through code search, Network Operator 26.4.0 era); it was not re-read from ghcr.io here (no
#: registry access): check it with ``crane digest`` before the first run, and mirror it (README).
PERFTEST: Final[str | None] = None
PERFTEST_DIGEST: Final = "sha256:dcc502375af37e42dcdd75f758d406282007ff01590551822dafc03d740e02ce"
PYTORCH_IMAGE: Final = "nvcr.io/nvidia/pytorch"
PYTORCH: Final = "25.10-py3"

#: AKS Kubernetes version pinned for new clusters: 1.36, GA on AKS since the 2026-06-19 release
#: notes, AKS standard support until 2027-06-30 (AKS Kubernetes release calendar, read 2026-12-01);
#: patch 1.36.3 from the 2026-09-04 release notes (Azure/AKS#5948). The last minor AKS runs
#: ``osSku: Ubuntu2204`` on (the default OS SKU); the table and its sources: components/model/kubernetes.py.
AKS_KUBERNETES: Final = "1.36.3"

#: Kueue (elastic team quotas): the chart at registry.k8s.io, and the manager image of the same
#: release (kubernetes-sigs/kueue v0.19.2; CRDs in shared/upstream/kueue/v0.19.2).
KUEUE_CHART_REF: Final = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_CHART: Final = "0.19.2"
KUEUE_IMAGE: Final = "registry.k8s.io/kueue/kueue"
KUEUE: Final = "v0.19.2"

#: HAMi (node groups with ``hami``): its chart from the project's Helm repository (HAMi docs,
#: "Installation": ``helm repo add hami-charts https://project-hami.github.io/HAMi/``), chart and
#: images at the newest release, v2.10.0 (shared/upstream/charts/hami-2.10.0).
HAMI_HELM_REPO: Final = "https://project-hami.github.io/HAMi/"
HAMI_CHART: Final = "2.10.0"
HAMI_IMAGE: Final = "docker.io/projecthami/hami"
HAMI: Final = "v2.10.0"
#: The registry Kubernetes publishes kube-scheduler to; HAMi's scheduler pod runs it at the
#: cluster's declared version (the chart's default is a mirror, registry.cn-hangzhou.aliyuncs.com).
KUBE_SCHEDULER_IMAGE: Final = "registry.k8s.io/kube-scheduler"
#: The webhook certificate job: kube-webhook-certgen as Kubernetes' ingress-nginx publishes it (the
#: fork of jet/kube-webhook-certgen the chart's ``create``/``patch`` arguments come from) instead of
#: the chart's personal ``docker.io/liangjw/kube-webhook-certgen``. v1.6.9 is the tag minikube's
#: ingress addon pins beside controller v1.15.1 (seen in public logs); it was not re-read from
#: registry.k8s.io here: check it with ``crane ls`` and mirror it (README).
WEBHOOK_CERTGEN_IMAGE: Final = "registry.k8s.io/ingress-nginx/kube-webhook-certgen"
WEBHOOK_CERTGEN: Final = "v1.6.9"


# --------------------------------------------------------------------------------------------
# The section


class Versions(Model):
    """Pinned chart and image versions (``gpuaas:versions``). Defaults: the constants above."""

    helm_repository: RepositoryUrl = NVIDIA_HELM_REPO
    """Helm repository of the Network Operator and GPU Operator charts (default NVIDIA's,
    https://helm.ngc.nvidia.com/nvidia); ignored while a chart mirror (``gpuaas:charts``) is set
    (components/rules/charts.py)."""
    network_operator_chart: ChartVersion = NETWORK_OPERATOR_CHART
    """NVIDIA Network Operator chart version (default the newest stable tag, shared/upstream/network-operator)."""
    gpu_operator_chart: ChartVersion = GPU_OPERATOR_CHART
    """NVIDIA GPU Operator chart version (default the newest release, shared/upstream/gpu-operator); v26.7.0 is the
    first with the GPUCluster CR that ``gpuOperator.dra`` needs."""
    mellanox_repository: ImageRepository = MELLANOX_REPOSITORY
    """Image repository of the NicClusterPolicy operands from NVIDIA's Mellanox registry (the DOCA driver and the
    operator's components)."""
    network_operator_components: ImageTag = NETWORK_OPERATOR_COMPONENTS
    """Image tag of the NicClusterPolicy operands other than the DOCA driver, as in the Network Operator release's
    full NicClusterPolicy example (default ``network-operator-v26.4.1``)."""
    doca_driver: ImageTag = DOCA_DRIVER
    """DOCA driver container tag (in ``mellanoxRepository``); the operator appends ``-<os><ver>-<arch>`` itself, so
    this is the tag without that suffix."""
    ib_sriov_cni_image: ImageRepository = IB_SRIOV_CNI_IMAGE
    """Image of the ib-sriov CNI binary installer (k8snetworkplumbingwg/ib-sriov-cni); gpuaas installs the binary
    itself because the NicClusterPolicy has no ib-sriov field."""
    ib_sriov_cni: ImageTag = IB_SRIOV_CNI
    """Tag of ``ibSriovCniImage`` (default v1.3.0, the newest release)."""
    rdma_shared_device_plugin_image: ImageRepository = RDMA_SHARED_DP_IMAGE
    """Image of the RDMA shared device plugin with ``network.rdmaSharedDevicePlugin: standalone``
    (Mellanox/k8s-rdma-shared-dev-plugin); the ``nic-cluster-policy`` one takes the operator's own."""
    rdma_shared_device_plugin: ImageTag = RDMA_SHARED_DP
    """Tag of ``rdmaSharedDevicePluginImage`` (default v1.5.3)."""
    node_tools_image: ImageRepository = NODE_TOOLS_IMAGE
    """Host-tool image of gpuaas's privileged node DaemonSets and jobs (ib-node-config, SR-IOV host config, OpenSM,
    Multus kubeconfig); it needs only bash and util-linux's nsenter."""
    node_tools: ImageTag = NODE_TOOLS
    """Tag of ``nodeToolsImage`` (default ``12.12-slim``)."""
    opensm_image: ImageRepository = OPENSM_IMAGE
    """Image of the in-cluster OpenSM (opt-in, ``platform.fabric.opensm``): one that carries NVIDIA's OpenSM with
    virtualization (virt_enabled) support."""
    opensm: ImageTag = OPENSM
    """Tag of ``opensmImage``."""
    perftest_image: ImageRepository = PERFTEST_IMAGE
    """Image of the ib_write_bw (perftest) verification workload; upstream publishes it as ``latest`` only, so
    ``perftestDigest`` pins it."""
    perftest: ImageTag | None = PERFTEST
    """A pinned tag of ``perftestImage``; unset where the digest pins it (upstream tags only ``latest``)."""
    perftest_digest: ImageDigest | None = PERFTEST_DIGEST
    """``sha256:…``; wins over the tag when both are set (the runtime pulls by digest)."""
    pytorch_image: ImageRepository = PYTORCH_IMAGE
    """Image of the PyTorch/NCCL verification workload (NGC PyTorch)."""
    pytorch: ImageTag = PYTORCH
    """Tag of ``pytorchImage`` (an NGC release, e.g. ``25.10-py3``)."""
    gpu_driver: ImageTag | None = None
    """GPU driver version the GPU Operator installs; ``None`` keeps the chart's tested default."""
    dra_driver_repository: ImageRepository = DRA_DRIVER_REPOSITORY
    """NVIDIA DRA driver for GPUs (``gpuOperator.resourceModel: dra``): repository and tag of the
    ``dra-driver-nvidia-gpu`` image the GPUCluster names."""
    dra_driver: ImageTag = DRA_DRIVER
    """Tag of the ``dra-driver-nvidia-gpu`` image in ``draDriverRepository`` (default v0.5.0, the one GPU Operator
    v26.7.0 names)."""
    kueue_chart: ChartVersion = KUEUE_CHART
    """Kueue (``gpuaas:queues``): its chart (an OCI reference, no repository) and manager image."""
    kueue_chart_ref: OciReference = KUEUE_CHART_REF
    """OCI reference of the Kueue chart (default registry.k8s.io's); ignored while a chart mirror
    (``gpuaas:charts``) is set (components/rules/charts.py)."""
    kueue_image: ImageRepository = KUEUE_IMAGE
    """Image repository of the Kueue manager."""
    kueue: ImageTag = KUEUE
    """Tag of ``kueueImage``; the same release as ``kueueChart`` (default v0.19.2)."""
    hami_helm_repository: RepositoryUrl = HAMI_HELM_REPO
    """HAMi (node groups with ``hami``): its chart repository and version, its image (device plugin,
    scheduler extender, monitor), the kube-scheduler repository (tagged with the cluster's declared
    version) and the webhook certificate job's image."""
    hami_chart: ChartVersion = HAMI_CHART
    """HAMi chart version (default 2.10.0, shared/upstream/charts/hami-2.10.0)."""
    hami_image: ImageRepository = HAMI_IMAGE
    """HAMi image (device plugin, scheduler extender and monitor)."""
    hami: ImageTag = HAMI
    """Tag of ``hamiImage``; the same release as ``hamiChart`` (default v2.10.0)."""
    kube_scheduler_image: ImageRepository = KUBE_SCHEDULER_IMAGE
    """kube-scheduler repository of HAMi's scheduler pod, tagged with the cluster's declared Kubernetes version
    (default registry.k8s.io's, not the chart's mirror)."""
    webhook_certgen_image: ImageRepository = WEBHOOK_CERTGEN_IMAGE
    """Image of HAMi's webhook certificate job: kube-webhook-certgen as ingress-nginx publishes it, instead of the
    chart's personal image."""
    webhook_certgen: ImageTag = WEBHOOK_CERTGEN
    """Tag of ``webhookCertgenImage`` (default v1.6.9; not re-read from the registry: check it with ``crane ls`` and
    mirror it)."""
