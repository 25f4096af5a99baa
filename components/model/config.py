"""The stack config model: one frozen pydantic tree for everything a stack can say, rooted here.

:class:`StackConfig` holds one section per ``gpuaas:<key>``, each in the module named after it
(:mod:`components.model.platform`, :mod:`~components.model.network`,
:mod:`~components.model.gpu_operator`, :mod:`~components.model.teams`,
:mod:`~components.model.queues`, :mod:`~components.model.verification`,
:mod:`~components.model.observability`,
:mod:`~components.model.versions`, :mod:`~components.model.charts`). Types and defaults live in
the model; cross-field rules live in
:mod:`components.rules`; turning errors into ``gpuaas:<path>: <reason>`` lines lives in
:mod:`components.model.errors`. Every key is camelCase in ``Pulumi.<stack>.yaml`` and snake_case in
Python. Defaults are written once, in the model (versions come from :mod:`components.model.versions`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
)

from components.model.base import Model
from components.model.charts import Charts
from components.model.gpu_operator import GpuOperator
from components.model.network import Network
from components.model.observability import Observability
from components.model.platform import AksPlatform, OnPremPlatform, Platform
from components.model.queues import Queues
from components.model.teams import Team
from components.model.verification import Verification
from components.model.versions import Versions

#: Config namespaces a stack file may use beside ``gpuaas``: Pulumi's own (``pulumi:tags``) and those
#: of the providers this program creates resources with (their default provider's settings:
#: ``kubernetes:context``, ``azure-native:location``). Any other namespace is refused as a likely
#: typo (``gpuas:teams`` once planned 0 teams, silently) unless ``gpuaas:extraConfigNamespaces``
#: lists it (components/loader.py, ``namespace_issues``).
KNOWN_CONFIG_NAMESPACES: tuple[str, ...] = ("pulumi", "kubernetes", "azure-native")

#: A Pulumi config namespace: a project or package name (keys are ``<namespace>:<name>``, pulumi/pulumi
#: sdk/go/common/resource/config/key.go).
ConfigNamespace = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100)]


class QuotaPolicy(Model):
    allow_oversubscription: bool = False
    """Allow the sum of team quotas to exceed what the fleet has."""


class StackConfig(Model):
    """The whole stack. Each field is one ``gpuaas:<key>`` in ``Pulumi.<stack>.yaml``."""

    platform: Platform
    """The cluster: ``kind: onprem`` (an existing bare-metal cluster: node groups, nodes, fabric) or ``kind: aks``
    (an AKS cluster with ND InfiniBand GPU pools). Required."""
    versions: Versions = Versions()
    """Pinned chart and image versions; defaults: the versions gpuaas is tested against
    (components/model/versions.py)."""
    charts: Charts = Charts()
    """Where Helm takes the charts from: unset, their public repositories; or one mirror (a local directory or an
    OCI registry) for an air-gapped site."""
    network: Network = Network()
    """The NVIDIA Network Operator, the NicClusterPolicy and the RDMA node agents."""
    gpu_operator: GpuOperator = GpuOperator()
    """The NVIDIA GPU Operator and the GPU resource model (device plugin or DRA)."""
    teams: list[Team] = Field(default_factory=list)
    """The tenants: each a namespace with a quota and RBAC, and optionally an InfiniBand partition and a Kueue
    queue. Default none."""
    quota_policy: QuotaPolicy = QuotaPolicy()
    """Stack-wide quota checks (whether team quotas may add up to more than the fleet has)."""
    queues: Queues = Queues()
    """Elastic team quotas with Kueue (off by default)."""
    verification: Verification = Verification()
    """Pass marks, isolation probes and burn-in of the RDMA and NCCL proofs."""
    observability: Observability = Observability()
    """Monitoring, alerts, dashboards and showback of the GPUs per team (off by default)."""
    extra_config_namespaces: tuple[ConfigNamespace, ...] = ()
    """Config namespaces beside gpuaas', Pulumi's and its providers' (``pulumi``, ``kubernetes``,
    ``azure-native``) that this stack file may use: a program of your own that reads ``myteam:owner``
    lists ``myteam``. Keys of any other namespace are refused as a likely typo."""

    @property
    def onprem(self) -> OnPremPlatform | None:
        return self.platform if isinstance(self.platform, OnPremPlatform) else None

    @property
    def aks(self) -> AksPlatform | None:
        return self.platform if isinstance(self.platform, AksPlatform) else None
