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
    versions: Versions = Versions()
    charts: Charts = Charts()
    network: Network = Network()
    gpu_operator: GpuOperator = GpuOperator()
    teams: list[Team] = Field(default_factory=list)
    quota_policy: QuotaPolicy = QuotaPolicy()
    queues: Queues = Queues()
    verification: Verification = Verification()
    observability: Observability = Observability()
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
