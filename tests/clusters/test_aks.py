"""AKS cluster: pure helpers, the aks stack under mocks, and AKS config rules with their error paths."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.runtime import rpc

from components import platform_args
from components.clusters.aks import AksCluster, agent_pool_args, decode_kubeconfig, managed_cluster_args
from components.clusters.nd_pools import NODE_TEMPLATE_RESOURCES_TAG, autoscaler_tags, node_resources, pool_capacity
from components.clusters.onprem_nodes import pool_labels
from components.loader import parse_config
from components.model import capacity, resources, versions
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.plan.offline import FAKE_KUBECONFIG, Record, Run, run_program
from tests.conftest import fixture_config, qualified, raw_stack

AGENT_POOL = "azure-native:containerservice:AgentPool"
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
RESOURCE_GROUP = "azure-native:resources:ResourceGroup"
FEATURE = "azure-native:features:SubscriptionFeatureRegistration"
K8S_PROVIDER = "pulumi:providers:kubernetes"
AKS_CLUSTER = "gpuaas:index:AksCluster"


def _labels(pool: str, mig: str = "all-disabled") -> dict[str, str]:
    return {
        resources.NODE_GROUP_LABEL: pool,
        resources.MIG_CONFIG_LABEL: mig,
        resources.DEVICE_PLUGIN_CONFIG_LABEL: pool,
    }


def _pool_inputs(pool: str, max_count: int) -> dict[str, Any]:
    return {
        "resourceGroupName": "rg-gpuaas",
        "resourceName": "gpuaas-aks",
        "agentPoolName": pool,
        "mode": "User",
        "type": "VirtualMachineScaleSets",
        "osType": "Linux",
        "osSKU": "Ubuntu2204",
        "vmSize": "Standard_ND96isr_H100_v5",
        "orchestratorVersion": versions.AKS_KUBERNETES,
        "enableAutoScaling": True,
        "minCount": 0,
        "maxCount": max_count,
        "count": 0,
        "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"],
        "nodeLabels": _labels(pool),
        "gpuProfile": {"driver": "None"},
        # the cluster autoscaler's template node for an empty pool (components/clusters/aks.py)
        "tags": {
            "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "8",
            "k8s.io_cluster-autoscaler_node-template_resources_rdma_hcashared": "1000",
        },
    }


#: The aks stack's AgentPools exactly as registered (wire names). A change here is a change to
#: live node pools — several of these fields (vmSize, taints, gpuProfile) are create-time only.
AKS_AGENT_POOLS: dict[str, dict[str, Any]] = {
    "gpuaas-aks-ndh100a": _pool_inputs("ndh100a", 4),
    "gpuaas-aks-ndh100b": _pool_inputs("ndh100b", 2),
}

AKS_SYSTEM_POOL: dict[str, Any] = {
    "name": "system",
    "mode": "System",
    "type": "VirtualMachineScaleSets",
    "osType": "Linux",
    "osSKU": "Ubuntu2204",
    "vmSize": "Standard_D8ds_v5",
    "orchestratorVersion": versions.AKS_KUBERNETES,
    "enableAutoScaling": True,
    "minCount": 1,
    "maxCount": 3,
    "count": 1,
}


def _run(edit: Callable[[dict[str, Any]], None]) -> Run:
    raw = raw_stack("aks")
    edit(raw)
    return run_program("aks", config={"azure-native:location": "eastus", **qualified(raw)})


def _no_proofs(raw: dict[str, Any]) -> None:
    """A MIG pool advertises no whole GPU, so no NCCL proof pair fits it (components/rules/proofs.py)."""
    for team in raw["teams"]:
        team["verify"] = False


def _cfg(edit: Callable[[dict[str, Any]], None] | None = None) -> StackConfig:
    raw = raw_stack("aks")
    if edit is not None:
        edit(raw)
    return parse_config(raw)


def _secret(wire: Any) -> Any:
    """The plain value of an input that was registered as a secret (fails if it was not)."""
    assert isinstance(wire, dict) and wire.get(rpc._special_sig_key) == rpc._special_secret_sig, wire
    return wire["value"]


def _aks_component(run: Run) -> Record:
    (component,) = run.of_type(AKS_CLUSTER)
    return component


# --------------------------------------------------------------------------------------------
# The aks stack under mocks


def test_agent_pool_inputs_snapshot(run_of: Callable[[str], Run]) -> None:
    pools = {r.name: r.inputs for r in run_of("aks").of_type(AGENT_POOL)}
    assert pools == AKS_AGENT_POOLS


def test_gpu_driver_is_skipped_on_every_gpu_pool(run_of: Callable[[str], Run]) -> None:
    pools = run_of("aks").of_type(AGENT_POOL)
    assert pools
    for r in pools:
        assert r.inputs["gpuProfile"] == {"driver": "None"}, r.name
        assert "SkipGPUDriverInstall" not in r.inputs["tags"]  # the retired tag is not used


def test_cluster_carries_only_the_system_pool_inline(run_of: Callable[[str], Run]) -> None:
    (cluster,) = run_of("aks").of_type(MANAGED_CLUSTER)
    assert cluster.inputs["agentPoolProfiles"] == [AKS_SYSTEM_POOL]
    assert cluster.inputs["resourceName"] == "gpuaas-aks"
    assert cluster.inputs["kubernetesVersion"] == versions.AKS_KUBERNETES
    assert cluster.inputs["dnsPrefix"] == "gpuaas-aks"
    assert cluster.inputs["identity"] == {"type": "SystemAssigned"}
    assert cluster.inputs["resourceGroupName"] == "rg-gpuaas"


def test_cluster_and_gpu_pools_are_protected(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    (cluster,) = run.of_type(MANAGED_CLUSTER)
    assert cluster.protect
    assert cluster.ignore_changes == ["agentPoolProfiles[*].count"]
    for r in run.of_type(AGENT_POOL):
        assert r.protect, r.name
        assert "count" in r.ignore_changes, r.name


def test_children_are_named_from_the_component(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    component = _aks_component(run)
    children = sorted(r.name for r in run.records if r.parent == component.urn)
    assert children == [
        "gpuaas-aks-cluster",
        "gpuaas-aks-infiniband",
        "gpuaas-aks-k8s",
        "gpuaas-aks-ndh100a",
        "gpuaas-aks-ndh100b",
        "gpuaas-aks-rg",
    ]


def test_each_gpu_pool_is_an_nd_pool_component_under_the_cluster(run_of: Callable[[str], Run]) -> None:
    """One AksNdPool per pool, a child of the AksCluster; its AgentPool carries the pool component's name."""
    run = run_of("aks")
    component = _aks_component(run)
    nd_pools = {r.name: r for r in run.of_type("gpuaas:index:AksNdPool")}
    assert sorted(nd_pools) == sorted(AKS_AGENT_POOLS)
    agent_pools = {r.name: r for r in run.of_type(AGENT_POOL)}
    for name, pool in nd_pools.items():
        assert pool.parent == component.urn
        assert agent_pools[name].parent == pool.urn


def test_kubeconfig_output_is_secret(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    assert "kubeconfig" in run.secret_outputs
    assert run.outputs["kubeconfig"] == FAKE_KUBECONFIG
    assert run.outputs["clusterName"] == "gpuaas-aks"
    assert "clusterName" not in run.secret_outputs


def test_one_kubernetes_provider_built_by_the_aks_cluster(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    (provider,) = run.of_type(K8S_PROVIDER)
    assert provider.parent == _aks_component(run).urn
    assert _secret(provider.inputs["kubeconfig"]) == FAKE_KUBECONFIG
    assert provider.inputs["enableServerSideApply"] == "true"
    for r in run.records:
        if r.custom and r.type.startswith("kubernetes:"):
            assert r.provider.startswith(provider.urn + "::"), r.name


def test_kubernetes_resources_use_the_aks_provider() -> None:
    """A resource given the component's provider registers with it (the stack's own are checked above)."""

    def program() -> None:
        cluster = AksCluster("t", platform_args.aks_cluster(_cfg()))
        k8s.core.v1.Namespace(
            "ns", metadata={"name": "x"}, opts=pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})
        )

    run = run_program("aks", config=fixture_config("aks"), program=program)
    (provider,) = run.of_type(K8S_PROVIDER)
    assert run.named("ns").provider.startswith(provider.urn + "::")


def test_feature_registration_when_configured(run_of: Callable[[str], Run]) -> None:
    run = run_of("aks")
    (feature,) = run.of_type(FEATURE)
    assert feature.inputs == {
        "providerNamespace": "Microsoft.ContainerService",
        "featureName": "AKSInfinibandSupport",
    }
    for r in run.of_type(AGENT_POOL):
        assert feature.urn in r.dependencies, r.name


def test_no_feature_registration_unless_configured() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["registerInfinibandFeature"] = False

    run = _run(edit)
    assert run.of_type(FEATURE) == []
    pools = run.of_type(AGENT_POOL)
    assert len(pools) == 2
    for r in pools:
        assert not any(FEATURE in d for d in r.dependencies), r.name


def test_existing_resource_group_is_referenced_not_created() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["resourceGroup"] = {"name": "rg-shared", "create": False}

    run = _run(edit)
    assert run.of_type(RESOURCE_GROUP) == []
    (cluster,) = run.of_type(MANAGED_CLUSTER)
    assert cluster.inputs["resourceGroupName"] == "rg-shared"
    assert {r.inputs["resourceGroupName"] for r in run.of_type(AGENT_POOL)} == {"rg-shared"}


def test_existing_cluster_creates_no_cluster_resources() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["existingCluster"] = True
        raw["platform"]["registerInfinibandFeature"] = False
        raw["platform"]["resourceGroup"] = {"name": "rg-existing", "create": False}

    run = _run(edit)
    assert not [r for r in run.records if r.type.startswith("azure-native:")]
    (provider,) = run.of_type(K8S_PROVIDER)
    assert _secret(provider.inputs["kubeconfig"]) == FAKE_KUBECONFIG
    assert "kubeconfig" in run.secret_outputs
    assert run.outputs["clusterName"] == "gpuaas-aks"


# --------------------------------------------------------------------------------------------
# Pure helpers


def test_agent_pool_args_defaults() -> None:
    cfg = parse_config(
        {
            "platform": {
                "kind": "aks",
                "subscriptionId": "00000000-0000-0000-0000-000000000000",
                "location": "westeurope",
                "resourceGroup": {"name": "rg"},
                "clusterName": "c",
                "gpuPools": [{"name": "gpu"}],
            }
        }
    )
    aks = cfg.aks
    assert aks is not None
    assert agent_pool_args(platform_args.aks_nd_pools(cfg)[0]) == {
        "agent_pool_name": "gpu",
        "mode": "User",
        "type": "VirtualMachineScaleSets",
        "os_type": "Linux",
        "os_sku": "Ubuntu2204",
        "vm_size": "Standard_ND96isr_H100_v5",
        "orchestrator_version": aks.kubernetes_version,
        "enable_auto_scaling": True,
        "min_count": 0,
        "max_count": 2,
        "count": 0,
        "node_taints": ["nvidia.com/gpu=present:NoSchedule"],
        "node_labels": _labels("gpu"),
        "gpu_profile": {"driver": "None"},
        "tags": {
            "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "8",
            "k8s.io_cluster-autoscaler_node-template_resources_rdma_hcashared": "1000",
        },
    }


def test_agent_pool_args_custom() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["quotaPolicy"] = {"allowOversubscription": True}  # MIG turns the pool's GPUs into instances
        _no_proofs(raw)
        raw["platform"]["kubernetesVersion"] = "1.35.7"
        # One OS for the whole cluster (the GPU Operator's rule, components/rules/versions.py).
        raw["platform"]["systemPool"]["osSku"] = "Ubuntu2404"
        for pool in raw["platform"]["gpuPools"][1:]:
            pool["osSku"] = "Ubuntu2404"
        raw["platform"]["gpuPools"][0].update(
            {
                "vmSize": "Standard_ND96isr_H200_v5",
                "osSku": "Ubuntu2404",
                "minCount": 1,
                "maxCount": 8,
                "taints": ["sku=h200:NoSchedule"],
                "labels": {"team": "training"},
                "mig": {"layout": "all-1g.18gb"},
            }
        )

    cfg = _cfg(edit)
    assert cfg.aks is not None
    args = agent_pool_args(platform_args.aks_nd_pools(cfg)[0])
    assert args["vm_size"] == "Standard_ND96isr_H200_v5"
    assert args["os_sku"] == "Ubuntu2404"
    assert args["orchestrator_version"] == "1.35.7"
    assert (args["min_count"], args["max_count"], args["count"]) == (1, 8, 1)
    assert args["node_taints"] == ["sku=h200:NoSchedule"]
    assert args["node_labels"] == {"team": "training", **_labels("ndh100a", mig="all-1g.18gb")}
    assert args["node_labels"] == {"team": "training", **pool_labels(cfg, cfg.aks.gpu_pools[0])}
    assert args["gpu_profile"] == {"driver": "None"}


def _autoscaler_reads(tags: dict[str, str]) -> dict[str, str]:
    """What the cluster autoscaler makes of the tags: every ``_`` and ``~2`` after the prefix is ``/``
    (kubernetes/autoscaler cloudprovider/azure ``extractAllocatableResourcesFromScaleSet``)."""
    prefix = "k8s.io_cluster-autoscaler_node-template_resources_"
    return {k.split(prefix)[1].replace("_", "/").replace("~2", "/"): v for k, v in tags.items() if k.startswith(prefix)}


def test_an_empty_pool_advertises_what_its_nodes_will_offer() -> None:
    """Item 5: the autoscaler's template node has the RDMA and GPU resources the pods ask for."""
    cfg = _cfg()
    assert cfg.aks is not None
    for pool in cfg.aks.gpu_pools:
        seen = _autoscaler_reads(autoscaler_tags(cfg, pool))
        assert (
            seen
            == {"nvidia.com/gpu": "8", "rdma/hcashared": "1000"}
            == {k: str(v) for k, v in node_resources(cfg, pool).items()}
        )


def test_a_mig_pool_advertises_its_instances() -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["quotaPolicy"] = {"allowOversubscription": True}
        _no_proofs(raw)
        raw["platform"]["gpuPools"][0]["mig"] = {"layout": "all-1g.10gb"}

    cfg = _cfg(edit)
    assert cfg.aks is not None
    seen = _autoscaler_reads(autoscaler_tags(cfg, cfg.aks.gpu_pools[0]))
    assert seen == {"nvidia.com/mig-1g.10gb": "56", "rdma/hcashared": "1000"}


def test_an_underscore_name_cannot_be_a_node_template() -> None:
    """Why the default changed: the old name reads back as another resource; it is not tagged."""
    assert _autoscaler_reads({NODE_TEMPLATE_RESOURCES_TAG + "rdma_hca_shared_devices_a": "1"}) == {
        "rdma/hca/shared/devices/a": "1"
    }

    def edit(raw: dict[str, Any]) -> None:
        raw["network"]["rdmaResourceName"] = "hca_shared_devices_a"
        for pool in raw["platform"]["gpuPools"]:
            pool["minCount"] = 1

    cfg = _cfg(edit)  # allowed: the pools never scale from zero
    assert cfg.aks is not None
    assert _autoscaler_reads(autoscaler_tags(cfg, cfg.aks.gpu_pools[0])) == {"nvidia.com/gpu": "8"}


def test_managed_cluster_args_pins_version_and_names() -> None:
    args = managed_cluster_args(platform_args.aks_cluster(_cfg()))
    assert args["resource_name_"] == "gpuaas-aks"
    assert args["kubernetes_version"] == versions.AKS_KUBERNETES
    assert args["identity"] == {"type": "SystemAssigned"}
    assert [p["mode"] for p in args["agent_pool_profiles"]] == ["System"]


def test_pool_capacity_of_the_aks_stack() -> None:
    cfg = _cfg()
    rows = pool_capacity(cfg)
    assert rows == [
        {
            "pool": "ndh100a",
            "vm_size": "Standard_ND96isr_H100_v5",
            "gpu_model": "H100-80GB",
            "gpus_per_vm": 8,
            "max_nodes": 4,
            "max_gpus": 32,
            "ib_gbps_per_gpu": 400,
        },
        {
            "pool": "ndh100b",
            "vm_size": "Standard_ND96isr_H100_v5",
            "gpu_model": "H100-80GB",
            "gpus_per_vm": 8,
            "max_nodes": 2,
            "max_gpus": 16,
            "ib_gbps_per_gpu": 400,
        },
    ]
    # The same arithmetic the quota rules check against.
    assert sum(r["max_gpus"] for r in rows) == capacity.capacity(cfg)[resources.GPU]


def test_pool_capacity_is_empty_on_prem(cfg_of: Callable[[str], StackConfig]) -> None:
    assert pool_capacity(cfg_of("onprem")) == []


def test_decode_kubeconfig() -> None:
    assert decode_kubeconfig(base64.b64encode(b"apiVersion: v1\n").decode()) == "apiVersion: v1\n"


# --------------------------------------------------------------------------------------------
# Bad AKS input: every problem path-qualified


def _pool(**over: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["gpuPools"][0].update(over)

    return edit


def _platform(**over: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"].update(over)

    return edit


def _system(**over: Any) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["platform"]["systemPool"].update(over)

    return edit


def _team_pool(pool: str) -> Callable[[dict[str, Any]], None]:
    def edit(raw: dict[str, Any]) -> None:
        raw["teams"][1]["partition"] = {"nodePool": pool}

    return edit


BAD: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "unknown-sku",
        _pool(vmSize="Standard_ND96isr_X9000_v9"),
        "gpuaas:platform.gpuPools[0].vmSize",
        "unknown GPU VM size 'Standard_ND96isr_X9000_v9'; allowed: ",
    ),
    (
        "sku-without-infiniband",
        _pool(vmSize="Standard_NC24ads_A100_v4"),
        "gpuaas:platform.gpuPools[0].vmSize",
        "Standard_NC24ads_A100_v4 has no InfiniBand",
    ),
    ("min-above-max", _pool(minCount=3, maxCount=2), "gpuaas:platform.gpuPools[0].minCount", "3 is above maxCount 2"),
    (
        "system-pool-scale-to-zero",
        _system(minCount=0),
        "gpuaas:platform.systemPool.minCount",
        "the System pool cannot scale to zero",
    ),
    (
        "team-on-missing-pool",
        _team_pool("ndh100z"),
        "gpuaas:teams[1].partition.nodePool",
        "'ndh100z' is not a GPU pool; allowed: ndh100a, ndh100b",
    ),
    (
        "existing-cluster-in-a-created-group",
        _platform(existingCluster=True),
        "gpuaas:platform.resourceGroup.create",
        "set resourceGroup.create: false",
    ),
    (
        "rdma-name-the-autoscaler-cannot-template",
        lambda raw: raw["network"].update(rdmaResourceName="hca_shared_devices_a"),
        "gpuaas:network.rdmaResourceName",
        "pools ndh100a, ndh100b (minCount 0) would never scale up for RDMA pods",
    ),
    (
        "label-owned-by-gpuaas",
        _pool(labels={"nvidia.com/mig.config": "all-1g.10gb"}),
        'gpuaas:platform.gpuPools[0].labels["nvidia.com/mig.config"]',
        "gpuaas sets this label",
    ),
]


@pytest.mark.parametrize(("edit", "path", "reason"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_aks_config(edit: Callable[[dict[str, Any]], None], path: str, reason: str) -> None:
    raw = raw_stack("aks")
    edit(raw)
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    matching = [i for i in err.value.issues if i.path == path]
    assert matching, [str(i) for i in err.value.issues]
    assert any(reason in i.message for i in matching), [str(i) for i in matching]
