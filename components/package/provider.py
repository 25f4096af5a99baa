"""The gpuaas component provider: the components, usable from any Pulumi program through a package.

``provider/__main__.py`` (the plugin ``pulumi package add`` runs) calls :func:`serve`. The schema is
what Pulumi's component provider host (``pulumi.provider.experimental``) infers from the classes
below: each declares its arguments (``args``, a TypedDict of :mod:`components.package.types`) and
its outputs (annotations, each with its description). They are declarations only: the provider
builds the real component (:data:`BUILDERS`), with the same type token and name, so its URN and
its children's are the ones the component has in a stack program. ``opts.depends_on`` reaches
every child object (the SDK does not pass a component's own on), so ordering between components
works through ordinary resource options.

No ``from __future__ import annotations`` here: the host's analyzer reads these annotations as
objects.
"""

import ast
import inspect
import itertools
import json
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import pulumi
from pulumi.provider import ConstructResult, Provider
from pulumi.provider import main as provider_main
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema
from pulumi.provider.server import ComponentInitError

from components import platform_args
from components.clusters.aks import AksCluster as AksClusterComponent
from components.clusters.aks import AksNdPool as AksNdPoolComponent
from components.clusters.onprem_nodes import OnPremNodes as OnPremNodesComponent
from components.fabric import ib_node_config
from components.fabric.ib_node_config import IbNodeConfig as IbNodeConfigComponent
from components.model.errors import ConfigError, Issue
from components.operators import nic_cluster_policy
from components.operators.gpu_operator import GpuOperator as GpuOperatorComponent
from components.operators.network_operator import NetworkOperator as NetworkOperatorComponent
from components.operators.nic_cluster_policy import NicClusterPolicy as NicClusterPolicyComponent
from components.operators.rdma_shared_device_plugin import RdmaSharedDevicePlugin as RdmaPluginComponent
from components.package import types as t
from components.package.mapping import platform_config, stack_config
from components.platform import Platform as PlatformComponent
from components.runtime import drop_sdk_debug, tune_collector
from components.tenancy.teams import Teams

#: The package name: the type tokens are ``gpuaas:index:<Component>``, as in a stack program.
PACKAGE = "gpuaas"
#: The package version the schema carries (the generated SDK's version).
VERSION = "0.1.0"

_DECLARATION = "declares the package schema; the provider builds the component (components/package/provider.py)"


class _Declaration(pulumi.ComponentResource):
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} {_DECLARATION}; in Python use the component in components/ itself")


class Platform(_Declaration):
    """The whole GPU-as-a-Service platform, as one stack program builds it from its stack config."""

    exports: pulumi.Output[dict[str, Any]]
    """What the stack program exports: teams, fabric layouts, the last run's MIG layouts."""

    def __init__(self, name: str, args: t.PlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class NetworkOperator(_Declaration):
    """NVIDIA Network Operator: its namespace (Pod Security privileged) and the Helm release (NFD and the operator)."""

    namespace: pulumi.Output[str]
    """The operator's namespace."""

    def __init__(self, name: str, args: t.NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class NicClusterPolicy(_Declaration):
    """The NicClusterPolicy (awaited until ready), gpuaas's NodeFeatureRule where the chart's is off, and
    on-prem the ib-sriov CNI installer and Multus' kubeconfig refresher. Depend on the NetworkOperator: its
    release brings the CRD."""

    policy_name: pulumi.Output[str]
    """``metadata.name`` of the NicClusterPolicy."""

    def __init__(self, name: str, args: t.NicClusterPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class IbNodeConfig(_Declaration):
    """ib-node-config: kernel modules and memlock on every RDMA node, before any RDMA pod is scheduled."""

    daemonset_name: pulumi.Output[str]
    """``metadata.name`` of the DaemonSet."""

    def __init__(self, name: str, args: t.IbNodeConfigArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class RdmaSharedDevicePlugin(_Declaration):
    """The standalone RDMA shared device plugin (``network.rdmaSharedDevicePlugin: standalone``)."""

    resource_name: pulumi.Output[str]
    """The extended resource pods request (``rdma/hcashared`` by default)."""

    def __init__(
        self, name: str, args: t.RdmaSharedDevicePluginArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(name, args, opts)


class GpuOperator(_Declaration):
    """NVIDIA GPU Operator: namespace, MIG and device-plugin configs, the Helm release with the RDMA/GPUDirect flags."""

    namespace: pulumi.Output[str]
    """The operator's namespace."""

    def __init__(self, name: str, args: t.GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class OnPremNodes(_Declaration):
    """The on-prem nodes' labels (node group, MIG layout, device-plugin config), applied as NodePatches."""

    nodes: pulumi.Output[list[str]]
    """The nodes labelled."""

    def __init__(self, name: str, args: t.OnPremNodesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class AksCluster(_Declaration):
    """The AKS cluster with its System pool (or an existing cluster's credentials); its ND InfiniBand GPU pools
    are ``AksNdPool`` components, one per pool."""

    cluster_name: pulumi.Output[str]
    """The AKS cluster's name."""

    def __init__(self, name: str, args: t.AksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class AksNdPool(_Declaration):
    """One ND InfiniBand GPU pool (an autoscaled AgentPool, GPU driver left to the GPU Operator) on an AKS
    cluster, gpuaas' or an existing one: ``platform.aks`` names the cluster and lists this one pool in
    ``gpu_pools``. Depend on the cluster and on the ``AKSInfinibandSupport`` registration."""

    pool_name: pulumi.Output[str]
    """The AKS agent pool's name."""

    def __init__(self, name: str, args: t.AksNdPoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


class Team(_Declaration):
    """One team: namespace, quota and limits, RBAC for its groups, and its partition's networks."""

    namespace: pulumi.Output[str]
    """The team's namespace."""
    export: pulumi.Output[dict[str, Any]]
    """What operators read about the team (namespace, quota, P_Key or node pool), as the stack's ``teams`` output."""

    def __init__(self, name: str, args: t.TeamArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)


#: The exposed components, in the schema's order.
COMPONENTS: tuple[type[pulumi.ComponentResource], ...] = (
    Platform,
    AksCluster,
    AksNdPool,
    OnPremNodes,
    NetworkOperator,
    NicClusterPolicy,
    IbNodeConfig,
    RdmaSharedDevicePlugin,
    GpuOperator,
    Team,
)


# --------------------------------------------------------------------------------------------
# What the provider builds for each


Built = tuple[pulumi.ComponentResource, dict[str, Any]]


def _after(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """``opts.depends_on`` as a list: what every child object waits for."""
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    # Construct hands dependencies over as resolved resources (DependencyResource), never Outputs.
    found = list(deps) if isinstance(deps, Sequence) else [deps]
    return [d for d in found if isinstance(d, pulumi.Resource)]


def _platform(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    p = PlatformComponent(name, platform_config(args), opts)
    return p, {"exports": p.exports}


def _network_operator(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("NetworkOperator", args)
    c = NetworkOperatorComponent(name, platform_args.network_operator(cfg), opts)
    return c, {"namespace": cfg.network.namespace}


def _nic_cluster_policy(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("NicClusterPolicy", args)
    c = NicClusterPolicyComponent(name, platform_args.nic_cluster_policy(cfg), opts)
    return c, {"policyName": nic_cluster_policy.NAME}


def _ib_node_config(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("IbNodeConfig", args)
    c = IbNodeConfigComponent(name, platform_args.ib_node_config(cfg), opts)
    return c, {"daemonsetName": ib_node_config.NAME}


def _rdma_plugin(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("RdmaSharedDevicePlugin", args)
    c = RdmaPluginComponent(name, platform_args.rdma_shared_device_plugin(cfg), opts)
    return c, {"resourceName": f"{cfg.network.rdma_resource_prefix}/{cfg.network.rdma_resource_name}"}


def _gpu_operator(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("GpuOperator", args)
    c = GpuOperatorComponent(name, platform_args.gpu_operator(cfg), opts)
    return c, {"namespace": cfg.gpu_operator.namespace}


def _onprem_nodes(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("OnPremNodes", args)
    c = OnPremNodesComponent(name, platform_args.onprem_nodes(cfg), opts)
    return c, {"nodes": sorted(c.patches)}


def _aks_cluster(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("AksCluster", args)
    c = AksClusterComponent(name, platform_args.aks_cluster(cfg), opts)
    return c, {"clusterName": c.cluster_name}


def _aks_nd_pool(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("AksNdPool", args)
    pools = platform_args.aks_nd_pools(cfg)
    if len(pools) != 1:
        got = [p.pool_name for p in pools]
        raise ConfigError([Issue("gpuaas:platform.gpuPools", f"AksNdPool builds exactly one pool (got {got})")])
    c = AksNdPoolComponent(name, pools[0], opts)
    return c, {"poolName": c.pool_name}


def _team(name: str, args: dict[str, Any], opts: pulumi.ResourceOptions | None) -> Built:
    cfg = stack_config("Team", args)
    (team,) = cfg.teams
    c = TeamComponent(name, opts)
    teams = Teams(name, platform_args.teams(cfg), pulumi.ResourceOptions(parent=c, depends_on=_after(opts)))
    c.register_outputs({"namespace": team.ns})
    return c, {"namespace": team.ns, "export": teams.exports[team.name]}


class TeamComponent(pulumi.ComponentResource):
    """One team (``gpuaas:index:Team``): the team objects a stack program's ``Teams`` makes for it, as
    its child of the same name (``<name>-<team>-namespace`` and so on)."""

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"{PACKAGE}:index:Team", name, None, opts)


BUILDERS: dict[str, Callable[[str, dict[str, Any], pulumi.ResourceOptions | None], Built]] = {
    "Platform": _platform,
    "AksCluster": _aks_cluster,
    "AksNdPool": _aks_nd_pool,
    "OnPremNodes": _onprem_nodes,
    "NetworkOperator": _network_operator,
    "NicClusterPolicy": _nic_cluster_policy,
    "IbNodeConfig": _ib_node_config,
    "RdmaSharedDevicePlugin": _rdma_plugin,
    "GpuOperator": _gpu_operator,
    "Team": _team,
}


def field_docstrings(*modules: ModuleType) -> dict[str, dict[str, str]]:
    """Each class's field descriptions (the string right after a field), as the host's analyzer reads
    them (``Analyzer.get_docstring``), from one parse per module. The analyzer parses a module's
    source again for every class it meets: 3 s of the provider's start on this machine, with the
    sixty-odd types of :mod:`components.package.types`."""
    out: dict[str, dict[str, str]] = {}
    for module in modules:
        for cls in (n for n in ast.parse(inspect.getsource(module)).body if isinstance(n, ast.ClassDef)):
            fields: dict[str, str] = {}
            for node, after in itertools.pairwise(cls.body):
                target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                value = after.value if isinstance(after, ast.Expr) else None
                doc = value.value if isinstance(value, ast.Constant) else None
                if isinstance(target, ast.Name) and isinstance(doc, str):
                    fields[target.id] = doc
            out[cls.name] = fields
    return out


class GpuaasProvider(ComponentProvider):
    """Pulumi's component provider, building the real component for each declaration."""

    def __init__(self) -> None:
        # ComponentProvider.__init__ (SDK 3.272.0), with the analyzer's docstrings read up front
        # (field_docstrings); tests/package checks that the schema is the one it infers itself.
        self._name = PACKAGE
        self.analyzer = Analyzer(PACKAGE)
        self.analyzer.docstrings = field_docstrings(t, sys.modules[__name__])
        result = self.analyzer.analyze(list(COMPONENTS))
        self._components = {c.__name__: c for c in COMPONENTS}
        self._component_defs = result["component_definitions"]
        self._type_defs = result["type_definitions"]
        self._external_enum_types = result["external_enum_types"]
        self._dependencies = sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")
        spec = generate_schema(PACKAGE, VERSION, None, self._component_defs, self._type_defs, self._dependencies)
        Provider.__init__(self, VERSION, json.dumps(spec.to_json()))

    def construct(
        self,
        name: str,
        resource_type: str,
        inputs: pulumi.Inputs,
        options: pulumi.ResourceOptions | None = None,
    ) -> ConstructResult:
        self.validate_resource_type(PACKAGE, resource_type)
        component = resource_type.rsplit(":", 1)[-1]
        args = self.map_inputs(inputs, self._component_defs[component])
        try:
            built, state = BUILDERS[component](name, dict(args), options)
        except Exception as e:  # reported to the engine as the component's failure
            raise ComponentInitError(e) from e
        return ConstructResult(built.urn, state)


def schema() -> dict[str, Any]:
    """The schema the provider serves (GetSchema), as a dict."""
    return dict(json.loads(GpuaasProvider().schema or "{}"))


def serve(args: list[str]) -> None:
    """Serve the provider (``args``: the engine's, as the plugin's ``__main__.py`` got them).

    As the stack program runs (``__main__.py``, components/runtime.py): the collector's thresholds
    raised, the SDK's blocking debug messages dropped unless GPUAAS_SDK_DEBUG asks for them.
    """
    tune_collector()
    warning = drop_sdk_debug(os.environ)
    if warning is not None:
        print(warning, file=sys.stderr)
    provider_main(GpuaasProvider(), args)
