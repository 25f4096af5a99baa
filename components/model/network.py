"""``gpuaas:network``: the NVIDIA Network Operator, its NicClusterPolicy and the RDMA node agents."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    TypeAdapter,
    model_validator,
)

from components.model.base import Model
from components.model.grammar import extended_resource_problem
from components.model.types import (
    DnsLabel,
    GoDurationSeconds,
    LabelKey,
    LabelValue,
    PositiveInt,
)

LabelKeyCheck: TypeAdapter[str] = TypeAdapter(LabelKey)


class Toleration(Model):
    """A pod toleration; validated as the API server does (core/validation ValidateTolerations)."""

    key: str
    """Taint key to tolerate (a label key); empty with operator ``Exists`` tolerates every taint."""
    operator: Literal["Exists", "Equal"] = "Exists"
    """``Exists`` (default: any value of ``key``) or ``Equal`` (only ``value``)."""
    value: LabelValue | None = None
    """Taint value to match with operator ``Equal``; must be empty with ``Exists``."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect to tolerate (``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``); unset: every effect."""

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
    """Namespace of the Network Operator release (default ``nvidia-network-operator``)."""
    deploy_node_feature_rules: bool = True
    """The Network Operator chart's NodeFeatureRule (vendor 15b3, class Ethernet or InfiniBand) that
    labels Mellanox nodes ``feature.node.kubernetes.io/pci-15b3.present``; the AKS guide turns it off."""
    node_feature_rule: bool = True
    """gpuaas's own NodeFeatureRule in place of the chart's when ``deployNodeFeatureRules`` is off:
    InfiniBand devices only (AKS: the IB VFs, as Azure/aks-rdma-infiniband's; on-prem: IB class)."""
    ofed_driver: Literal["host", "container"] = "host"
    """``host``: DOCA-OFED preinstalled on the nodes; ``container``: the operator's doca-driver."""
    rdma_shared_device_plugin: Literal["nic-cluster-policy", "standalone", "none"] = "nic-cluster-policy"
    """Where the RDMA shared device plugin comes from; one source per cluster, never both."""
    rdma_resource_prefix: str = "rdma"
    """Prefix of the RDMA shared device plugin's resource: pods ask for ``<rdmaResourcePrefix>/<rdmaResourceName>``
    (default ``rdma/hcashared``); together a valid extended resource name."""
    rdma_resource_name: str = "hcashared"
    """Letters and digits only: the plugin allows ``[A-Za-z0-9_]`` (k8s-rdma-shared-dev-plugin
    ``validResourceName``), and the cluster autoscaler reads every ``_`` of a node-template tag
    as ``/`` (components/clusters/aks.py), so ``hca_shared_devices_a`` cannot scale an AKS pool from zero."""
    rdma_hca_max: PositiveInt = 1000
    """How many pods can hold the RDMA shared resource on one node (the plugin's ``rdmaHcaMax``, default 1000): each
    node advertises this many, and capacity checks count them so."""
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=lambda: {"feature.node.kubernetes.io/pci-15b3.present": "true"}
    )
    """Node selector of the RDMA node DaemonSets (ib-node-config, SR-IOV host config)."""
    tolerations: list[Toleration] = Field(default_factory=lambda: [Toleration(key="nvidia.com/gpu")])
    """Tolerations of the RDMA node agents (the NicClusterPolicy's operands, gpuaas's node DaemonSets and the
    in-cluster OpenSM); default: any ``nvidia.com/gpu`` taint."""
    helm_timeout_seconds: GoDurationSeconds = 1200
    """Seconds `pulumi up` waits for the Network Operator Helm release (driver builds are slow); a release that
    times out is not rolled back, its new resources are cleaned up (`cleanup_on_fail`, components/k8s.py)."""

    @model_validator(mode="after")
    def _extended_resource(self) -> Network:
        name = f"{self.rdma_resource_prefix}/{self.rdma_resource_name}"
        problem = extended_resource_problem(name)
        if problem:
            raise ValueError(
                f"rdmaResourcePrefix/rdmaResourceName make {name!r}, not a Kubernetes extended resource name: {problem}"
            )
        return self
