"""The stack config model: one frozen pydantic tree for everything a stack can say.

Types and defaults live here; cross-field rules live in :mod:`components.rules`; turning
errors into ``gpuaas:<path>: <reason>`` lines lives in :mod:`components.errors`. Every key is
camelCase in ``Pulumi.<stack>.yaml`` and snake_case in Python. Defaults are written once, here
(versions come from :mod:`components.versions`).
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import versions
from components.catalog import GPU_MODELS, ND_SKUS
from components.grammar import extended_resource_problem
from components.types import (
    AksPoolName,
    AzureLocation,
    AzureResourceGroupName,
    AzureSubscriptionId,
    AzureVmSize,
    ChartVersion,
    CronSchedule,
    DnsLabel,
    DnsSubdomain,
    Guid,
    HcaName,
    ImageDigest,
    ImageRepository,
    ImageTag,
    KubernetesVersion,
    LabelKey,
    LabelValue,
    LineText,
    NonNegativeInt,
    PKey,
    PositiveInt,
    Quantity,
    RepositoryUrl,
    RoutingEngine,
    Taint,
)


class Model(BaseModel):
    """Base of every config node: immutable, unknown keys rejected, camelCase aliases."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
    )


# --------------------------------------------------------------------------------------------
# Versions


class Versions(Model):
    """Pinned chart and image versions. Defaults: :mod:`components.versions`."""

    helm_repository: RepositoryUrl = versions.NVIDIA_HELM_REPO
    network_operator_chart: ChartVersion = versions.NETWORK_OPERATOR_CHART
    gpu_operator_chart: ChartVersion = versions.GPU_OPERATOR_CHART
    mellanox_repository: ImageRepository = versions.MELLANOX_REPOSITORY
    network_operator_components: ImageTag = versions.NETWORK_OPERATOR_COMPONENTS
    doca_driver: ImageTag = versions.DOCA_DRIVER
    ib_sriov_cni_image: ImageRepository = versions.IB_SRIOV_CNI_IMAGE
    ib_sriov_cni: ImageTag = versions.IB_SRIOV_CNI
    rdma_shared_device_plugin_image: ImageRepository = versions.RDMA_SHARED_DP_IMAGE
    rdma_shared_device_plugin: ImageTag = versions.RDMA_SHARED_DP
    node_tools_image: ImageRepository = versions.NODE_TOOLS_IMAGE
    node_tools: ImageTag = versions.NODE_TOOLS
    opensm_image: ImageRepository = versions.OPENSM_IMAGE
    opensm: ImageTag = versions.OPENSM
    perftest_image: ImageRepository = versions.PERFTEST_IMAGE
    #: A pinned tag of ``perftestImage``; unset where the digest pins it (upstream tags only ``latest``).
    perftest: ImageTag | None = versions.PERFTEST
    #: ``sha256:…``; wins over the tag when both are set (the runtime pulls by digest).
    perftest_digest: ImageDigest | None = versions.PERFTEST_DIGEST
    pytorch_image: ImageRepository = versions.PYTORCH_IMAGE
    pytorch: ImageTag = versions.PYTORCH
    #: GPU driver version the GPU Operator installs; ``None`` keeps the chart's tested default.
    gpu_driver: ImageTag | None = None
    #: NVIDIA DRA driver for GPUs (``gpuOperator.resourceModel: dra``): repository and tag of the
    #: ``dra-driver-nvidia-gpu`` image the GPUCluster names.
    dra_driver_repository: str = versions.DRA_DRIVER_REPOSITORY
    dra_driver: ImageTag = versions.DRA_DRIVER
    #: Kueue (``gpuaas:queues``): its chart (an OCI reference, no repository) and manager image.
    kueue_chart: ChartVersion = versions.KUEUE_CHART
    kueue_chart_ref: str = versions.KUEUE_CHART_REF
    kueue_image: str = versions.KUEUE_IMAGE
    kueue: ImageTag = versions.KUEUE


# --------------------------------------------------------------------------------------------
# GPU sharing (per node group / GPU pool)


class MigConfig(Model):
    """A MIG layout for every GPU of a node group: a named ``layout`` or explicit ``profiles``.

    Neither means ``all-disabled``. Named layouts: ``all-disabled``, ``all-balanced``,
    ``all-<profile>`` or ``<n>x<profile>`` terms joined by ``-`` (``1x4g.40gb-3x1g.10gb``).
    """

    layout: str | None = None
    profiles: dict[str, PositiveInt] | None = None
    #: Acknowledges that changing this layout evicts every GPU pod on the group's nodes. Without
    #: it a run whose layout differs from the last run's stops (components/mig_guard.py).
    reconfigure: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> MigConfig:
        if self.layout is not None and self.profiles is not None:
            raise ValueError("set either layout or profiles, not both")
        return self


#: The kubelet's default ``maxPods`` (kubelet config reference): the most pods one node runs.
MAX_TIME_SLICING_REPLICAS = 110


def _some_hcas(hcas: list[str]) -> list[str]:
    if not hcas:
        raise ValueError(
            "is empty; a node group needs at least one InfiniBand HCA (its VFs, GUIDs and RDMA devices come "
            "from them), e.g. [mlx5_0]"
        )
    return hcas


class TimeSlicing(Model):
    """Time-slicing: each GPU is advertised ``replicas`` times as ``nvidia.com/gpu.shared``."""

    replicas: int

    @field_validator("replicas")
    @classmethod
    def _at_least_one(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"time-slicing replicas must be at least 1 (got {v})")
        # Each replica is a schedulable nvidia.com/gpu.shared device, and one pod takes one: a
        # node runs at most 110 pods (the kubelet's default maxPods), so more replicas of one GPU
        # are devices no pod can ever be given, only inflated capacity that quotas are checked against.
        if v > MAX_TIME_SLICING_REPLICAS:
            raise ValueError(
                f"time-slicing replicas {v} exceed {MAX_TIME_SLICING_REPLICAS}: each replica is one pod's share of a "
                f"GPU and a node runs at most {MAX_TIME_SLICING_REPLICAS} pods (kubelet maxPods default)"
            )
        return v


class GpuSharing(Model):
    """Fields shared by on-prem node groups and AKS GPU pools."""

    mig: MigConfig = MigConfig()
    time_slicing: TimeSlicing | None = None

    @field_validator("gpu_model", check_fields=False)
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v not in GPU_MODELS:
            raise ValueError(f"unknown GPU model {v!r}; allowed: {', '.join(GPU_MODELS)}")
        return v


# --------------------------------------------------------------------------------------------
# On-prem platform


class NodeGroup(GpuSharing):
    """Nodes with the same hardware and the same GPU sharing; the unit MIG/time-slicing apply to."""

    name: DnsLabel
    gpu_model: str
    gpus_per_node: PositiveInt = 8
    #: RDMA device names of the InfiniBand HCAs (``ibv_devices``); their order fixes HCA indices in GUIDs.
    hcas: Annotated[list[HcaName], AfterValidator(_some_hcas)] = Field(
        default_factory=lambda: [f"mlx5_{i}" for i in range(8)]
    )


class Node(Model):
    """An existing Kubernetes node. ``id`` feeds the GUID scheme, so it never changes once set."""

    name: DnsSubdomain
    id: NonNegativeInt
    node_group: DnsLabel


class GuidScheme(Model):
    """VF GUID = ``base | node.id << (hcaBits+vfBits) | hcaIndex << vfBits | vfIndex``.

    Defaults place GUIDs in the locally administered 0x02… range that NVIDIA's ib-kubernetes
    uses for its pool (Mellanox/ib-kubernetes pkg/config/config.go).
    """

    base: Guid = 0x0200_0000_0000_0000
    node_bits: PositiveInt = 16
    hca_bits: PositiveInt = 4
    vf_bits: PositiveInt = 8


class OpenSm(Model):
    """Subnet-manager settings rendered into ``partitions.conf`` and an ``opensm.conf`` fragment."""

    routing_engine: RoutingEngine = "ftree"
    #: IBTA MTU code of the IPoIB broadcast groups: 4 = 2048, 5 = 4096 (opensm(8)).
    ipoib_mtu: Literal[4, 5] = 5
    #: IBTA rate code of the IPoIB broadcast groups: 17 = 200 Gb/s (HDR), 21 = 400 Gb/s (NDR),
    #: 23 = 800 Gb/s (XDR). ``None`` (default): no ``rate=`` flag. A group's rate is a join
    #: requirement: a port whose link trained slower cannot join it (opensm(8) "rate"), so one
    #: degraded link would lose IPoIB; set it only on a fabric whose links all run at that rate.
    ipoib_rate: Literal[17, 21, 23] | None = None
    #: Run NVIDIA OpenSM in the cluster (privileged Deployment pinned to ``node``).
    deploy_in_cluster: bool = False
    node: DnsSubdomain | None = None


class InfraPartition(Model):
    """The hosts' own ports (PFs) as full members of one partition: host IPoIB, storage over RDMA.

    With a partitions.conf, OpenSM makes every port a *limited* member of the default partition
    (linux-rdma/opensm ``osm_prtn.c`` ``osm_prtn_make_default``), and two limited members cannot
    talk: PF-to-PF traffic stops. This partition gives the listed PF ports a partition of their
    own, at P_Key index 0 (``indx0``: the parent IPoIB interface and RDMA CM use index 0), and
    never holds a VF, so team VFs still reach no host.
    """

    #: The partition's name in partitions.conf.
    name: DnsLabel = "infra"
    pkey: PKey
    ipoib: bool = True
    #: Port GUIDs of the hosts' PFs (``ibstat -p`` on each host); VF GUIDs are refused.
    ports: list[Guid]


class Fabric(Model):
    """The on-prem InfiniBand fabric: SR-IOV layout, GUIDs and the subnet manager."""

    vfs_per_hca: PositiveInt = 6
    #: ``NUM_OF_VFS`` burnt into firmware (mlxconfig); ConnectX allows at most 127 per port.
    firmware_max_vfs: Annotated[int, Field(ge=1, le=127)] = 16
    link_rate_gbps: Literal[200, 400, 800] = 400
    guid_scheme: GuidScheme = GuidScheme()
    opensm: OpenSm = OpenSm()
    #: How VFs are created and given GUIDs on the hosts (see components/sriov_host.py).
    vf_config: Literal["daemonset", "sriov-network-operator"] = "daemonset"
    #: IPAM of the team NADs. ``none``: the VF gets no IPv4 address (RDMA needs none; NCCL
    #: bootstraps over the pod network). ``static``: every pod lists its own ``ips`` in its
    #: network-selection element (pods that list none use the team's address-less
    #: ``ib-<team>-rdma`` NAD). ``nv-ipam``: NVIDIA nv-ipam assigns them from a pool per team.
    ipam: Literal["none", "static", "nv-ipam"] = "none"
    #: Subnet each team's secondary network draws from (nv-ipam) — one /24 per team by P_Key.
    ipam_supernet: str = "192.168.0.0/16"
    #: Acknowledges that changing ``vfsPerHca`` or ``guidScheme`` re-creates (``sriov_numvfs``) or
    #: re-binds (new GUIDs) every VF of every node under running pods. Without it a run whose
    #: values differ from the last run's stops (components/fabric_guard.py).
    reconfigure: bool = False
    #: A partition for the hosts' own PF ports; ``None``: PFs are only limited members of the
    #: default partition and cannot reach each other (see :class:`InfraPartition`).
    infrastructure: InfraPartition | None = None


class Multus(Model):
    """Multus on-prem: the thin plugin in front of the cluster's own CNI (see components/multus.py).

    Multus needs to know which network is the pods' primary one; the Network Operator's
    "auto" mode would find it but cannot switch on ``namespaceIsolation``, so gpuaas writes
    the whole Multus config and asks for that network here.
    """

    #: The primary CNI network: the ``name`` inside its conf file in ``cniConfDir`` (Calico
    #: ``k8s-pod-network``, Cilium ``cilium``, Flannel ``cbr0``) or a NAD in ``kube-system``.
    #: (The operator pastes the Multus config into a single-quoted template: no quotes here.)
    cluster_network: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=253)]
    #: The container runtime's CNI conf directory on every node (k3s/RKE2 use their own): the
    #: primary CNI's conf is there, and the Network Operator writes Multus' conf there.
    cni_conf_dir: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9_.-]+)+/?$")] = "/etc/cni/net.d"
    #: A file whose existence means the primary CNI is ready (Multus waits for it); ``None``: no wait.
    readiness_indicator_file: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9_.-]+)+$")] | None = None


class OnPremPlatform(Model):
    """An existing bare-metal cluster with ConnectX HCAs, SR-IOV VFs and OpenSM."""

    kind: Literal["onprem"]
    #: kubeconfig context to deploy to; ``None`` uses the ambient kubeconfig's current context.
    kubeconfig_context: LineText | None = None
    #: The cluster's Kubernetes version (``kubectl version``, e.g. ``1.34.4``), declared because
    #: gpuaas does not create this cluster. Required with ``gpuOperator.resourceModel: dra`` (1.34+).
    kubernetes_version: str | None = None
    node_groups: list[NodeGroup]
    nodes: list[Node]
    fabric: Fabric = Fabric()
    #: Required once a team has a P_Key partition (its NAD goes through Multus).
    multus: Multus | None = None

    @cached_property
    def groups_by_name(self) -> dict[str, NodeGroup]:
        return {g.name: g for g in self.node_groups}


# --------------------------------------------------------------------------------------------
# AKS platform


class ResourceGroup(Model):
    name: AzureResourceGroupName
    #: ``False``: the group exists and is only referenced.
    create: bool = True


class SystemPool(Model):
    """The small inline System pool of the ManagedCluster (the API cannot update it in place)."""

    name: AksPoolName = "system"
    vm_size: AzureVmSize = "Standard_D8ds_v5"
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = "Ubuntu2204"
    min_count: int = 1
    max_count: PositiveInt = 3


class GpuPool(GpuSharing):
    """An ND InfiniBand GPU pool: its own AgentPool, and on Azure its own IB partition."""

    name: AksPoolName
    vm_size: str = "Standard_ND96isr_H100_v5"
    #: Pinned because NVIDIA's DOCA and driver images are built per OS release.
    os_sku: Literal["Ubuntu2204", "Ubuntu2404"] = "Ubuntu2204"
    min_count: NonNegativeInt = 0
    max_count: PositiveInt = 2
    taints: list[Taint] = Field(default_factory=lambda: ["nvidia.com/gpu=present:NoSchedule"])
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)

    @cached_property
    def gpu_model(self) -> str:
        sku = ND_SKUS.get(self.vm_size)
        return sku.gpu_model if sku else ""


class AksPlatform(Model):
    """Azure AKS with ND-series InfiniBand GPU pools (pulumi-azure-native v3)."""

    kind: Literal["aks"]
    subscription_id: AzureSubscriptionId
    #: Must agree with ``azure-native:location`` where the stack sets it (components/loader.py parse_stack).
    location: AzureLocation
    resource_group: ResourceGroup
    cluster_name: DnsLabel
    kubernetes_version: KubernetesVersion = versions.AKS_KUBERNETES
    #: Use an existing cluster (``clusterName`` in ``resourceGroup``, which must then have
    #: ``create: false``) instead of creating one: nothing in Azure is created or changed, only
    #: its user credentials are read; ``gpuPools`` then describe the pools it already has.
    existing_cluster: bool = False
    #: Register the ``AKSInfinibandSupport`` preview feature (a pool's VMs on one IB network).
    #: Subscription-wide: it applies to every AKS cluster in the subscription and is kept when the
    #: stack is destroyed. Asynchronous: Azure returns while it is still ``Registering``; pools
    #: created before ``Registered`` get no IB placement, so register once out of band or rerun
    #: ``pulumi up`` once ``az feature show`` reports ``Registered``.
    register_infiniband_feature: bool = False
    system_pool: SystemPool = SystemPool()
    gpu_pools: list[GpuPool]

    @cached_property
    def pools_by_name(self) -> dict[str, GpuPool]:
        return {p.name: p for p in self.gpu_pools}


Platform = Annotated[OnPremPlatform | AksPlatform, Field(discriminator="kind")]


# --------------------------------------------------------------------------------------------
# Operators


LabelKeyCheck: TypeAdapter[str] = TypeAdapter(LabelKey)


class Toleration(Model):
    """A pod toleration; validated as the API server does (core/validation ValidateTolerations)."""

    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    @model_validator(mode="after")
    def _api_rules(self) -> Toleration:
        if self.key == "" and self.operator != "Exists":
            raise ValueError("an empty key tolerates every taint and needs operator Exists")
        if self.key != "":
            LabelKeyCheck.validate_python(self.key)
        if self.operator == "Exists" and self.value:
            raise ValueError(f"value {self.value!r} must be empty with operator Exists (or use operator Equal)")
        return self


class Network(Model):
    """NVIDIA Network Operator and the NicClusterPolicy."""

    namespace: DnsLabel = "nvidia-network-operator"
    #: The Network Operator chart's NodeFeatureRule (vendor 15b3, class Ethernet or InfiniBand) that
    #: labels Mellanox nodes ``feature.node.kubernetes.io/pci-15b3.present``; the AKS guide turns it off.
    deploy_node_feature_rules: bool = True
    #: gpuaas's own NodeFeatureRule in place of the chart's when ``deployNodeFeatureRules`` is off:
    #: InfiniBand devices only (AKS: the IB VFs, as Azure/aks-rdma-infiniband's; on-prem: IB class).
    node_feature_rule: bool = True
    #: ``host``: DOCA-OFED preinstalled on the nodes; ``container``: the operator's doca-driver.
    ofed_driver: Literal["host", "container"] = "host"
    #: Where the RDMA shared device plugin comes from; one source per cluster, never both.
    rdma_shared_device_plugin: Literal["nic-cluster-policy", "standalone", "none"] = "nic-cluster-policy"
    rdma_resource_prefix: str = "rdma"
    #: Letters and digits only: the plugin allows ``[A-Za-z0-9_]`` (k8s-rdma-shared-dev-plugin
    #: ``validResourceName``), and the cluster autoscaler reads every ``_`` of a node-template tag
    #: as ``/`` (components/aks.py), so ``hca_shared_devices_a`` cannot scale an AKS pool from zero.
    rdma_resource_name: str = "hcashared"
    rdma_hca_max: PositiveInt = 1000
    #: Node selector of the RDMA node DaemonSets (ib-node-config, SR-IOV host config).
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=lambda: {"feature.node.kubernetes.io/pci-15b3.present": "true"}
    )
    tolerations: list[Toleration] = Field(default_factory=lambda: [Toleration(key="nvidia.com/gpu")])
    #: Seconds a Helm release may take before it is rolled back (driver builds are slow).
    helm_timeout_seconds: PositiveInt = 1200

    @model_validator(mode="after")
    def _extended_resource(self) -> Network:
        name = f"{self.rdma_resource_prefix}/{self.rdma_resource_name}"
        problem = extended_resource_problem(name)
        if problem:
            raise ValueError(
                f"rdmaResourcePrefix/rdmaResourceName make {name!r}, not a Kubernetes extended resource name: {problem}"
            )
        return self


class DraOptions(Model):
    """Options of the DRA resource model (``gpuOperator.resourceModel: dra``)."""

    #: Alpha: the DRA driver creates MIG partitions on demand (its ``DynamicMIG`` feature gate,
    #: driver v0.3+) instead of the node groups' static layouts, which must then be left out
    #: ("MIG partitions the driver did not create are destroyed", dra-driver-nvidia-gpu MIG guide).
    dynamic_mig: bool = False
    #: With ``dynamicMig`` on Kubernetes 1.34–1.35: the cluster's kube-apiserver and kube-scheduler
    #: run with the ``DRAPartitionableDevices`` feature gate (alpha; on by default from 1.36).
    partitionable_devices_enabled: bool = False


class GpuOperator(Model):
    """NVIDIA GPU Operator."""

    namespace: DnsLabel = "gpu-operator"
    mig_strategy: Literal["single", "mixed"] = "mixed"
    #: ``dmabuf`` (open kernel modules, NVIDIA's recommendation) or legacy ``peermem``.
    gpudirect: Literal["dmabuf", "peermem"] = "dmabuf"
    #: ``None``: derived per platform (host driver on-prem, operator driver on AKS).
    driver_enabled: bool | None = None
    helm_timeout_seconds: PositiveInt = 1800
    #: How pods get GPUs: ``devicePlugin`` (ClusterPolicy; ``nvidia.com/gpu`` extended resources)
    #: or ``dra`` (GPUCluster; ResourceClaims through the NVIDIA DRA driver, Kubernetes 1.34+).
    #: A running stack does not switch: GPUCluster is greenfield only (see components/dra.py).
    resource_model: Literal["devicePlugin", "dra"] = "devicePlugin"
    dra: DraOptions = DraOptions()


# --------------------------------------------------------------------------------------------
# Teams


class OnPremPartition(Model):
    """A team's InfiniBand partition on-prem: its P_Key and the VF index bound to it on every HCA."""

    pkey: PKey
    vf_index: NonNegativeInt
    ipoib: bool = True
    #: Acknowledges that changing this ``pkey`` or ``vfIndex`` moves the team's VFs to another
    #: partition or pool under its running pods. Without it such a run stops (components/fabric_guard.py).
    reconfigure: bool = False


class AksPartition(Model):
    """On AKS a partition is a dedicated ND node pool: Azure assigns one P_Key per VMSS."""

    node_pool: AksPoolName


def _partition_kind(v: Any) -> str | None:
    if isinstance(v, dict):
        return "aks" if "nodePool" in v or "node_pool" in v else "onprem"
    if isinstance(v, AksPartition):
        return "aks"
    if isinstance(v, OnPremPartition):
        return "onprem"
    return None


Partition = Annotated[
    Annotated[OnPremPartition, Tag("onprem")] | Annotated[AksPartition, Tag("aks")],
    Discriminator(_partition_kind),
]


class Quota(Model):
    """A team's quota. Extended resources are quota'd as ``requests.<resource>`` (Kubernetes docs)."""

    gpus: NonNegativeInt = 0
    #: MIG instances per profile name, e.g. ``{"1g.10gb": 4}`` (mixed strategy).
    mig: dict[str, NonNegativeInt] = Field(default_factory=dict)
    time_sliced_gpus: NonNegativeInt = 0
    #: On-prem: VFs of the team's partition; AKS: RDMA shared-device slots.
    rdma: NonNegativeInt = 0
    cpu: Quantity = "64"
    memory: Quantity = "512Gi"
    pods: PositiveInt = 200


class QueueAmounts(Model):
    """Amounts per resource kind of a team's queue (a borrowing or a lending limit).

    A kind left out has no limit of its own: a GPU kind may then borrow whatever its cohort
    lends (at most the flavor's capacity) and lend all of its share; ``cpu``/``memory`` left out
    of ``borrowingLimit`` borrow nothing (their fleet capacity is not in the config).
    GPU kinds apply per node group (a Kueue ResourceFlavor); the partition resource (``rdma``)
    is never lent or borrowed.
    """

    gpus: NonNegativeInt | None = None
    mig: dict[str, NonNegativeInt] = Field(default_factory=dict)
    time_sliced_gpus: NonNegativeInt | None = None
    cpu: str | None = None
    memory: str | None = None


class TeamQueue(Model):
    """A team's Kueue queue; only with ``gpuaas:queues.elastic: true`` (components/elastic.py)."""

    #: Most the team may use beyond its quota, from what its cohort lends.
    borrowing_limit: QueueAmounts = QueueAmounts()
    #: Most of its quota the team lends while it does not use it (at most the quota).
    lending_limit: QueueAmounts = QueueAmounts()
    #: Defaults to ``queues.cohort``: teams lend and borrow within one cohort only.
    cohort: DnsLabel | None = None
    #: Node groups (AKS: GPU pools) the team's queue uses, in order of preference; its quota of
    #: each GPU kind lives in the first that offers it. Defaults to every group (AKS: its own
    #: partition's pool, or the pools outside every team's partition).
    node_groups: list[DnsLabel] = Field(default_factory=list)


class Team(Model):
    """A tenant: a namespace with a quota, RBAC for its groups, and optionally an IB partition."""

    name: DnsLabel
    #: Defaults to the team name.
    namespace: DnsLabel | None = None
    #: Identity-provider groups bound to the team's workload role.
    groups: list[LineText] = Field(default_factory=list)
    #: Pod Security ``privileged`` instead of ``baseline``: only for teams that truly need it.
    privileged: bool = False
    #: Pulumi ``protect`` on the namespace: deleting it deletes every workload and volume claim
    #: of the team. To retire a team, set ``false``, run ``pulumi up``, then remove the team.
    protect: bool = True
    partition: Partition | None = None
    quota: Quota = Quota()
    queue: TeamQueue = TeamQueue()
    #: Run the ib_write_bw and NCCL proofs for this team after every ``pulumi up``.
    verify: bool = False

    @property
    def ns(self) -> str:
        return self.namespace if self.namespace is not None else self.name


# --------------------------------------------------------------------------------------------
# Root


class KueuePreemption(Model):
    """ClusterQueue ``preemption`` of every team queue (Kueue ClusterQueue API, v1beta2)."""

    #: Reclaim lent quota from borrowers when its owner needs it back.
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    #: Within a team, a higher-priority workload may preempt the team's lower-priority ones.
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "LowerPriority"
    #: Whether a borrowing workload may preempt lower-priority workloads of other teams.
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "Never"


class WorkloadPriorityClass(Model):
    """A Kueue WorkloadPriorityClass; workloads pick it with ``kueue.x-k8s.io/priority-class``."""

    name: DnsSubdomain
    value: int
    description: str = ""


KueueIntegration = Literal[
    "batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "kubeflow.org/mpijob", "pod"
]

DEFAULT_KUEUE_INTEGRATIONS: tuple[KueueIntegration, ...] = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/mpijob",
    "pod",
)


class Queues(Model):
    """Elastic team quotas with Kueue: idle GPUs lent within a cohort, reclaimed on demand.

    Off (the default): no Kueue, team quotas are hard ResourceQuotas as before.
    """

    elastic: bool = False
    namespace: DnsLabel = "kueue-system"
    #: The cohort of every team that names none (``teams[].queue.cohort``).
    cohort: DnsLabel = "gpuaas"
    #: ``False``: Kueue ignores jobs without ``kueue.x-k8s.io/queue-name``, and gpuaas's admission
    #: policy refuses GPU workloads without it; ``True``: Kueue holds such jobs (suspended).
    manage_jobs_without_queue_name: bool = False
    #: Job kinds Kueue manages; one whose CRD is absent waits until it appears (Kueue jobframework).
    integrations: list[KueueIntegration] = Field(default_factory=lambda: list(DEFAULT_KUEUE_INTEGRATIONS))
    preemption: KueuePreemption = KueuePreemption()
    priority_classes: list[WorkloadPriorityClass] = Field(default_factory=list)
    helm_timeout_seconds: PositiveInt = 600


class QuotaPolicy(Model):
    #: Allow the sum of team quotas to exceed what the fleet has.
    allow_oversubscription: bool = False


class IsolationPair(Model):
    """One negative probe: ``client``'s pod tries an RDMA write into ``server``'s partition and must fail.

    Each is a verification target key: a team name, or ``pool-<pool>`` for the per-pool proofs.
    """

    client: str
    server: str


class BurnIn(Model):
    """A recurring NCCL proof per target and node group, at a priority every team workload preempts."""

    enabled: bool = False
    schedule: CronSchedule = "30 3 * * *"
    #: Of the ``gpuaas-burn-in`` PriorityClass: below every team pod (0 without a class).
    priority: Annotated[int, Field(ge=-1_000_000, le=-1)] = -1000


class Verification(Model):
    """Thresholds of the verification workloads (fractions of the catalog's line rate)."""

    ib_write_bw_min_fraction: Annotated[float, Field(gt=0, le=1)] = 0.90
    nccl_gdr_min_fraction: Annotated[float, Field(gt=0, le=1)] = 0.85
    #: Also run the NCCL proof on every AKS GPU pool.
    aks_pools: bool = False
    #: Negative isolation probes. Unset: each target against the next other partition by name; ``[]``: none.
    isolation_pairs: list[IsolationPair] | None = None
    burn_in: BurnIn = BurnIn()


class StackConfig(Model):
    """The whole stack. Each field is one ``gpuaas:<key>`` in ``Pulumi.<stack>.yaml``."""

    platform: Platform
    versions: Versions = Versions()
    network: Network = Network()
    gpu_operator: GpuOperator = GpuOperator()
    teams: list[Team] = Field(default_factory=list)
    quota_policy: QuotaPolicy = QuotaPolicy()
    queues: Queues = Queues()
    verification: Verification = Verification()

    @property
    def onprem(self) -> OnPremPlatform | None:
        return self.platform if isinstance(self.platform, OnPremPlatform) else None

    @property
    def aks(self) -> AksPlatform | None:
        return self.platform if isinstance(self.platform, AksPlatform) else None
