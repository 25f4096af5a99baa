"""The component package: its generated types and schema are current, the types map onto the
components' own arguments, and a component built through the provider makes the objects the stack
program makes from the same values.

Arguments are written by hand here, in the package's form (enums, ``platform: {onprem: ...}``)
and beside them in a stack file's form; neither is computed by the code under test.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.provider.experimental.component import ComponentProvider

from components import platform_args
from components.clusters.aks import AksNdPool
from components.clusters.onprem_nodes import OnPremNodes
from components.fabric.ib_node_config import IbNodeConfig
from components.loader import parse_config
from components.model.errors import ConfigError
from components.operators.gpu_operator import GpuOperator
from components.operators.network_operator import NetworkOperator
from components.operators.nic_cluster_policy import NicClusterPolicy
from components.operators.rdma_shared_device_plugin import RdmaSharedDevicePlugin
from components.package import generate, mapping, provider, schema
from components.package import types as t
from components.package.provider import TeamComponent
from components.plan.offline import run_program
from components.plan.writer import HELM_RELEASE
from components.platform import Platform
from components.tenancy.teams import Teams
from e2e.plan_apply import planned_objects
from tests import tenancy_objects
from tests.conftest import fixture_config

#: A small on-prem cluster, package form: one node group of two nodes, two VFs per HCA.
ONPREM: t.PlatformConfig = {
    "onprem": {
        "kubeconfig_context": "lab",
        "kubernetes_version": "1.37.2",
        "node_groups": [
            {"name": "h100", "gpu_model": "H100-80GB", "gpus_per_node": 8, "hcas": ["mlx5_0", "mlx5_1"]},
        ],
        "nodes": [
            {"name": "gpu-a", "id": 1, "node_group": "h100"},
            {"name": "gpu-b", "id": 2, "node_group": "h100"},
        ],
        "fabric": {"vfs_per_hca": 2, "guid_scheme": {"base": "0x0200000000000000"}},
        "multus": {"cluster_network": "k8s-pod-network"},
    }
}
#: The same cluster as a stack file writes it.
ONPREM_STACK: dict[str, Any] = {
    "kind": "onprem",
    "kubeconfigContext": "lab",
    "kubernetesVersion": "1.37.2",
    "nodeGroups": [{"name": "h100", "gpuModel": "H100-80GB", "gpusPerNode": 8, "hcas": ["mlx5_0", "mlx5_1"]}],
    "nodes": [{"name": "gpu-a", "id": 1, "nodeGroup": "h100"}, {"name": "gpu-b", "id": 2, "nodeGroup": "h100"}],
    "fabric": {"vfsPerHca": 2, "guidScheme": {"base": "0x0200000000000000"}},
    "multus": {"clusterNetwork": "k8s-pod-network"},
}
TEAM: t.TeamConfig = {
    "name": "vision",
    "groups": ["oidc:team-vision"],
    "partition": {"onprem": {"pkey": "0x0001", "vf_index": 0}},
    "quota": {"gpus": 8, "rdma": 4, "cpu": "64", "memory": "512Gi"},
}
TEAM_STACK: dict[str, Any] = {
    "name": "vision",
    "groups": ["oidc:team-vision"],
    "partition": {"pkey": "0x0001", "vfIndex": 0},
    "quota": {"gpus": 8, "rdma": 4, "cpu": "64", "memory": "512Gi"},
}


# --------------------------------------------------------------------------------------------
# generated files


def test_types_py_is_what_the_generator_writes() -> None:
    assert generate.TYPES_FILE.read_text() == generate.render(), "run: python -m components.package.generate"


def test_schema_json_is_what_the_provider_serves() -> None:
    assert schema.SCHEMA_FILE.read_text() == schema.text(), "run: python -m components.package.generate"


def test_schema_exposes_the_components_with_their_arguments_documented() -> None:
    doc = json.loads(schema.SCHEMA_FILE.read_text())
    assert doc["name"] == "gpuaas"
    assert set(doc["resources"]) == {
        f"gpuaas:index:{c}"
        for c in (
            "Platform",
            "AksCluster",
            "AksNdPool",
            "OnPremNodes",
            "NetworkOperator",
            "NicClusterPolicy",
            "IbNodeConfig",
            "RdmaSharedDevicePlugin",
            "GpuOperator",
            "Team",
        )
    }
    for res in doc["resources"].values():
        assert res["isComponent"] is True
        assert "platform" in res["requiredInputs"]
    # A literal became an enum, its default and the model's comment the description.
    ofed = doc["types"]["gpuaas:index:NetworkConfig"]["properties"]["ofedDriver"]
    assert ofed["$ref"] == "#/types/gpuaas:index:NetworkOfedDriver"
    assert "doca-driver" in ofed["description"] and 'Defaults to `"host"`.' in ofed["description"]
    assert [v["value"] for v in doc["types"]["gpuaas:index:NetworkOfedDriver"]["enum"]] == ["host", "container"]
    # The platform union: one optional field per kind, no `kind` inside.
    platform = doc["types"]["gpuaas:index:PlatformConfig"]["properties"]
    assert set(platform) == {"onprem", "aks"}
    assert "kind" not in doc["types"]["gpuaas:index:OnPremPlatformConfig"]["properties"]
    # A P_Key is text, as written in a stack file.
    assert doc["types"]["gpuaas:index:OnPremPartitionConfig"]["properties"]["pkey"]["type"] == "string"


# --------------------------------------------------------------------------------------------
# mapping


def test_package_form_maps_to_the_stack_files_form() -> None:
    args = {"platform": ONPREM, "team": TEAM, "network": {"ofed_driver": t.NetworkOfedDriver.CONTAINER}}
    assert mapping.raw_config("Team", args) == {
        "platform": ONPREM_STACK,
        "teams": [TEAM_STACK],
        "network": {"ofedDriver": "container"},
    }


def test_a_component_reads_only_its_sections() -> None:
    args = {"platform": ONPREM, "team": TEAM, "gpu_operator": {"namespace": "elsewhere"}}
    cfg = mapping.stack_config("NetworkOperator", args)
    assert cfg.teams == [] and cfg.gpu_operator.namespace == "gpu-operator"
    assert cfg.onprem is not None and [n.name for n in cfg.onprem.nodes] == ["gpu-a", "gpu-b"]


def test_bad_values_are_reported_by_their_stack_key() -> None:
    args = {"platform": ONPREM, "network": {"rdma_hca_max": 0, "namespace": "Not_A_Label"}}
    with pytest.raises(ConfigError) as err:
        mapping.stack_config("NetworkOperator", args)
    paths = {i.path for i in err.value.issues}
    assert {"gpuaas:network.rdmaHcaMax", "gpuaas:network.namespace"} <= paths, paths
    # The allowed twin: the same keys with good values.
    good = mapping.stack_config(
        "NetworkOperator", {"platform": ONPREM, "network": {"rdma_hca_max": 1, "namespace": "n"}}
    )
    assert (good.network.rdma_hca_max, good.network.namespace) == (1, "n")


def test_a_platform_is_exactly_one_kind() -> None:
    both = {"onprem": ONPREM["onprem"], "aks": {"cluster_name": "x"}}
    with pytest.raises(ConfigError, match=r"gpuaas:platform: exactly one of \['aks', 'onprem'\]"):
        mapping.stack_config("NetworkOperator", {"platform": both})
    assert mapping.stack_config("NetworkOperator", {"platform": ONPREM}).platform.kind == "onprem"


def test_an_output_is_refused_where_a_count_is_decided() -> None:
    team = {**TEAM, "quota": {"gpus": pulumi.Output.from_input(8)}}
    with pytest.raises(mapping.NotPlainError, match=r"gpuaas:teams\[0\]\.quota\.gpus: must be a plain value"):
        mapping.raw_config("Team", {"platform": ONPREM, "team": team})
    assert mapping.raw_config("Team", {"platform": ONPREM, "team": TEAM})["teams"][0]["quota"]["gpus"] == 8


# --------------------------------------------------------------------------------------------
# built through the provider, as the stack program builds it


def _objects(records: list[Any], prefix: str) -> dict[str, dict[str, Any]]:
    return {r.name.removeprefix(prefix): r.inputs for r in records if r.custom and r.name.startswith(prefix)}


def test_a_team_built_through_the_provider_is_the_stack_programs_team() -> None:
    def program() -> None:
        provider.BUILDERS["Team"]("lab", {"platform": ONPREM, "team": TEAM}, None)

    run = run_program("onprem", config=fixture_config("onprem"), program=program)
    got = _objects(run.records, "lab-vision-")
    cfg = parse_config({"platform": ONPREM_STACK, "teams": [TEAM_STACK]})
    want = tenancy_objects.team_objects(cfg, cfg.teams[0])
    assert set(got) == set(want)
    for role, manifest in want.items():
        assert got[role]["metadata"]["name"] == manifest["metadata"]["name"], role
        assert got[role].get("spec") == manifest.get("spec"), role
    (component,) = [r for r in run.records if r.type == "gpuaas:index:Team"]
    assert component.name == "lab"
    assert {r.type for r in run.records if r.parent == component.urn} == {"gpuaas:index:Teams"}


def test_the_four_components_built_through_the_provider_make_the_stack_programs_objects() -> None:
    """What the e2e proves with the real engine, offline: Network Operator, NicClusterPolicy, GPU
    Operator with the RDMA flags and a team, package form in, the stack program's objects out."""
    charts: t.ChartsConfig = {"directory": "/charts"}
    network: t.NetworkConfig = {"ofed_driver": t.NetworkOfedDriver.HOST}
    gpu: t.GpuOperatorConfig = {"gpudirect": t.GpuOperatorGpudirect.PEERMEM}

    def through_the_provider() -> None:
        common = {"platform": ONPREM, "network": network}
        provider.BUILDERS["NetworkOperator"]("lab-no", {**common, "charts": charts}, None)
        provider.BUILDERS["NicClusterPolicy"]("lab-ncp", {**common, "teams": [TEAM]}, None)
        provider.BUILDERS["GpuOperator"]("lab-gpu", {**common, "gpu_operator": gpu, "charts": charts}, None)
        provider.BUILDERS["Team"]("lab-teams", {**common, "team": TEAM}, None)

    def stack_program() -> None:
        cfg = parse_config(
            {
                "platform": ONPREM_STACK,
                "network": {"ofedDriver": "host"},
                "gpuOperator": {"gpudirect": "peermem"},
                "teams": [TEAM_STACK],
                "charts": {"directory": "/charts"},
            }
        )
        NetworkOperator("lab-no", platform_args.network_operator(cfg))
        NicClusterPolicy("lab-ncp", platform_args.nic_cluster_policy(cfg))
        GpuOperator("lab-gpu", platform_args.gpu_operator(cfg))
        Teams("lab-teams", platform_args.teams(cfg), pulumi.ResourceOptions(parent=TeamComponent("lab-teams")))

    def objects(run: Any) -> dict[str, Any]:
        out = {p.ref: p.obj for p in planned_objects(run)}
        out.update({r.name: r.inputs["values"] for r in run.records if r.type == HELM_RELEASE})
        return out

    got = objects(run_program("onprem", config=fixture_config("onprem"), program=through_the_provider))
    want = objects(run_program("onprem", config=fixture_config("onprem"), program=stack_program))
    assert got == want
    assert got["lab-gpu-release"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    assert {"NicClusterPolicy nic-cluster-policy", "Namespace vision", "ResourceQuota vision/gpuaas-team-quota"} <= set(
        got
    )


STANDALONE: t.NetworkConfig = {"rdma_shared_device_plugin": t.NetworkRdmaSharedDevicePlugin.STANDALONE}
#: Package-form arguments of the other components, and the stack program's build of the same values.
OTHERS: dict[str, tuple[dict[str, Any], Any]] = {
    "IbNodeConfig": ({"platform": ONPREM}, lambda cfg: IbNodeConfig("c", platform_args.ib_node_config(cfg))),
    "RdmaSharedDevicePlugin": (
        {"platform": ONPREM, "network": STANDALONE},
        lambda cfg: RdmaSharedDevicePlugin("c", platform_args.rdma_shared_device_plugin(cfg)),
    ),
    "OnPremNodes": ({"platform": ONPREM}, lambda cfg: OnPremNodes("c", platform_args.onprem_nodes(cfg))),
    "Platform": ({"platform": ONPREM, "teams": [TEAM]}, lambda cfg: Platform("c", cfg)),
}
OTHERS_STACK: dict[str, dict[str, Any]] = {
    "IbNodeConfig": {"platform": ONPREM_STACK},
    "RdmaSharedDevicePlugin": {"platform": ONPREM_STACK, "network": {"rdmaSharedDevicePlugin": "standalone"}},
    "OnPremNodes": {"platform": ONPREM_STACK},
    "Platform": {"platform": ONPREM_STACK, "teams": [TEAM_STACK]},
}


@pytest.mark.parametrize("component", sorted(OTHERS))
def test_each_other_component_built_through_the_provider_is_the_stack_programs(component: str) -> None:
    args, build = OTHERS[component]

    def records(program: Any) -> list[tuple[str, str, Any]]:
        run = run_program("onprem", config=fixture_config("onprem"), program=program)
        return sorted((r.type, r.name, r.inputs) for r in run.records if r.type != "pulumi:pulumi:Stack")

    got = records(lambda: provider.BUILDERS[component]("c", args, None))
    want = records(lambda: build(parse_config(OTHERS_STACK[component])))
    assert got == want
    assert any(rtype == f"gpuaas:index:{component}" for rtype, _, _ in got)


def test_the_providers_schema_is_the_one_the_host_infers_itself() -> None:
    """The provider reads the field descriptions up front (one parse per module, not one per type):
    the schema is byte for byte the one Pulumi's own ComponentProvider builds from the same classes."""
    own = ComponentProvider(list(provider.COMPONENTS), provider.PACKAGE, None, provider.VERSION)
    assert provider.GpuaasProvider().schema == own.schema
    assert "Defaults to" in str(own.schema)


#: An existing AKS cluster with one ND pool to add, package form and stack-file form.
AKS_POOL: t.PlatformConfig = {
    "aks": {
        "subscription_id": "00000000-0000-0000-0000-000000000000",
        "location": "eastus",
        "resource_group": {"name": "rg-existing", "create": False},
        "cluster_name": "existing",
        "existing_cluster": True,
        "gpu_pools": [{"name": "ndh200", "vm_size": "Standard_ND96isr_H200_v5", "max_count": 3}],
    }
}
AKS_POOL_STACK: dict[str, Any] = {
    "kind": "aks",
    "subscriptionId": "00000000-0000-0000-0000-000000000000",
    "location": "eastus",
    "resourceGroup": {"name": "rg-existing", "create": False},
    "clusterName": "existing",
    "existingCluster": True,
    "gpuPools": [{"name": "ndh200", "vmSize": "Standard_ND96isr_H200_v5", "maxCount": 3}],
}


def test_an_nd_pool_built_through_the_provider_is_the_stack_programs_pool() -> None:
    def records(program: Any) -> list[tuple[str, str, Any]]:
        run = run_program("aks", config=fixture_config("aks"), program=program)
        return sorted((r.type, r.name, r.inputs) for r in run.records if r.type != "pulumi:pulumi:Stack")

    got = records(lambda: provider.BUILDERS["AksNdPool"]("p", {"platform": AKS_POOL}, None))
    (pool,) = platform_args.aks_nd_pools(parse_config({"platform": AKS_POOL_STACK}))
    want = records(lambda: AksNdPool("p", pool))
    assert got == want
    (agent_pool,) = [inputs for rtype, _, inputs in got if rtype == "azure-native:containerservice:AgentPool"]
    assert (agent_pool["resourceGroupName"], agent_pool["resourceName"]) == ("rg-existing", "existing")
    assert (agent_pool["vmSize"], agent_pool["maxCount"]) == ("Standard_ND96isr_H200_v5", 3)


def test_an_nd_pool_is_one_pool() -> None:
    two = {"aks": {**AKS_POOL["aks"], "gpu_pools": [{"name": "nda"}, {"name": "ndb"}]}}
    with pytest.raises(ConfigError) as err:  # refused before anything is registered
        provider.BUILDERS["AksNdPool"]("p", {"platform": two}, None)
    assert [str(i) for i in err.value.issues] == [
        "gpuaas:platform.gpuPools: AksNdPool builds exactly one pool (got ['nda', 'ndb'])"
    ]
    # The allowed twin: one pool.
    one = {"aks": {**AKS_POOL["aks"], "gpu_pools": [{"name": "nda"}]}}
    run = run_program(
        "aks",
        config=fixture_config("aks"),
        program=lambda: provider.BUILDERS["AksNdPool"]("p", {"platform": one}, None),
    )
    assert [r.inputs["agentPoolName"] for r in run.of_type("azure-native:containerservice:AgentPool")] == ["nda"]
