"""An ND InfiniBand pool added to an existing AKS cluster by a program that is not gpuaas' (issue #33, item 1).

The program below is a team's own: no stack config, no ``Platform``; it names a cluster it did not create
by resource group and name, writes the pool's arguments by hand, and orders the pool after its own
``AKSInfinibandSupport`` registration with ordinary resource options. The AgentPool it registers is
compared with inputs written out here.
"""

from __future__ import annotations

import pulumi
import pulumi_azure_native as azure_native

from components.clusters.aks import AksCluster, AksClusterArgs, AksNdPool, AksNdPoolArgs
from components.model.platform import ResourceGroup
from components.plan.offline import FAKE_KUBECONFIG, run_program

AGENT_POOL = "azure-native:containerservice:AgentPool"


def test_one_nd_pool_on_an_existing_cluster() -> None:
    def program() -> None:
        feature = azure_native.features.SubscriptionFeatureRegistration(
            "ib", provider_namespace="Microsoft.ContainerService", feature_name="AKSInfinibandSupport"
        )
        AksNdPool(
            "train",
            AksNdPoolArgs(
                resource_group_name="rg-ml",
                cluster_name="ml-prod",
                pool_name="ndh200",
                orchestrator_version="1.35.7",
                vm_size="Standard_ND96isr_H200_v5",
                os_sku="Ubuntu2404",
                max_count=6,
                labels={"team": "research", "nvidia.com/mig.config": "all-disabled"},
                tags={"k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "8"},
            ),
            pulumi.ResourceOptions(depends_on=[feature]),
        )

    run = run_program("reuse", config={}, program=program)
    (pool,) = run.of_type(AGENT_POOL)
    assert pool.inputs == {
        "resourceGroupName": "rg-ml",
        "resourceName": "ml-prod",
        "agentPoolName": "ndh200",
        "mode": "User",
        "type": "VirtualMachineScaleSets",
        "osType": "Linux",
        "osSKU": "Ubuntu2404",
        "vmSize": "Standard_ND96isr_H200_v5",
        "orchestratorVersion": "1.35.7",
        "enableAutoScaling": True,
        "minCount": 0,
        "maxCount": 6,
        "count": 0,
        "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"],
        "nodeLabels": {"team": "research", "nvidia.com/mig.config": "all-disabled"},
        "gpuProfile": {"driver": "None"},
        "tags": {"k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu": "8"},
    }
    # Named as the component, its child, protected, the count left to the autoscaler; ordered after the
    # feature through the component's own options (the SDK would not pass them on).
    (component,) = run.of_type("gpuaas:index:AksNdPool")
    assert (pool.name, pool.parent, pool.protect, pool.ignore_changes) == ("train", component.urn, True, ["count"])
    assert run.named("ib").urn in pool.dependencies
    # At the root, there is no earlier parent to answer to: no alias beyond azure-native's own type aliases.
    assert not [a for a in pool.aliases if 'parentUrn: "urn:' in a]


def test_a_pool_without_depends_on_waits_for_nothing() -> None:
    """The twin: the feature is ordered before the pool only because the program asked for it."""

    def program() -> None:
        azure_native.features.SubscriptionFeatureRegistration(
            "ib", provider_namespace="Microsoft.ContainerService", feature_name="AKSInfinibandSupport"
        )
        AksNdPool(
            "train",
            AksNdPoolArgs(
                resource_group_name="rg-ml", cluster_name="ml-prod", pool_name="nd", orchestrator_version="1.35.7"
            ),
        )

    run = run_program("reuse", config={}, program=program)
    (pool,) = run.of_type(AGENT_POOL)
    assert pool.dependencies == []


def test_an_existing_cluster_and_a_pool_on_its_outputs() -> None:
    """The cluster component reads an existing cluster's credentials only; a pool on its outputs waits for nothing
    Azure would create, and the provider is built from the credentials."""

    def program() -> None:
        cluster = AksCluster(
            "ml",
            AksClusterArgs(
                cluster_name="ml-prod",
                resource_group=ResourceGroup(name="rg-ml", create=False),
                location="westeurope",
                existing_cluster=True,
            ),
        )
        AksNdPool(
            "ml-nd",
            AksNdPoolArgs(
                resource_group_name=cluster.resource_group_name,
                cluster_name=cluster.cluster_name,
                pool_name="nd",
                orchestrator_version="1.35.7",
            ),
            pulumi.ResourceOptions(parent=cluster),
        )

    run = run_program("reuse", config={}, program=program)
    assert [r.type for r in run.records if r.custom] == ["pulumi:providers:kubernetes", AGENT_POOL]
    (pool,) = run.of_type(AGENT_POOL)
    assert (pool.inputs["resourceGroupName"], pool.inputs["resourceName"]) == ("rg-ml", "ml-prod")
    assert run.named("ml-k8s").inputs["kubeconfig"]["value"] == FAKE_KUBECONFIG


def test_a_new_cluster_orders_every_child_after_its_own_depends_on() -> None:
    """The cluster component forwards ``opts.depends_on`` to what it creates (the SDK would not)."""

    def program() -> None:
        first = azure_native.resources.ResourceGroup("network-first", resource_group_name="rg-net")
        AksCluster(
            "ml",
            AksClusterArgs(
                cluster_name="ml-prod",
                resource_group=ResourceGroup(name="rg-ml"),
                location="westeurope",
                register_infiniband_feature=True,
            ),
            pulumi.ResourceOptions(depends_on=[first]),
        )

    run = run_program("reuse", config={}, program=program)
    first = run.named("network-first").urn
    children = {r.name: r for r in run.records if r.custom and r.name.startswith("ml-")}
    assert sorted(children) == ["ml-cluster", "ml-infiniband", "ml-k8s", "ml-rg"]
    for child in children.values():
        assert first in child.dependencies, child.name
    cluster = children["ml-cluster"].inputs
    assert (cluster["resourceName"], cluster["dnsPrefix"]) == ("ml-prod", "ml-prod")
    assert cluster["resourceGroupName"] == "rg-ml"
    assert [p["name"] for p in cluster["agentPoolProfiles"]] == ["system"]  # the ND pools are AksNdPools
