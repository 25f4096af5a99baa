"""A Pulumi program of its own that uses gpuaas' components through the package (the e2e and the benchmark).

:class:`ConsumerStack` is a project beside the repository: its own ``Pulumi.yaml`` and virtualenv,
a program written against the SDK that `pulumi package add` generates (:data:`PROGRAM`), or, for
comparison, the same components built in-process from the repository's classes
(:data:`IN_PROCESS`). :data:`STACK` holds the same values as a stack file writes them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components import platform_args
from components.model.config import StackConfig
from components.operators.gpu_operator import GpuOperator
from components.operators.network_operator import NetworkOperator
from components.operators.nic_cluster_policy import NicClusterPolicy
from components.package.provider import TeamComponent
from components.plan.offline import Run, run_program
from components.tenancy.teams import Teams
from e2e.engine import Stack

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "lab"

#: The values, as a stack file writes them (the expected side).
STACK: dict[str, Any] = {
    "platform": {
        "kind": "onprem",
        "kubeconfigContext": CONTEXT,
        "kubernetesVersion": "1.37.2",
        "nodeGroups": [{"name": "h100", "gpuModel": "H100-80GB", "gpusPerNode": 8, "hcas": ["mlx5_0", "mlx5_1"]}],
        "nodes": [{"name": "gpu-a", "id": 1, "nodeGroup": "h100"}, {"name": "gpu-b", "id": 2, "nodeGroup": "h100"}],
        "fabric": {"vfsPerHca": 2, "guidScheme": {"base": "0x0200000000000000"}},
        "multus": {"clusterNetwork": "k8s-pod-network"},
    },
    "network": {"ofedDriver": "host", "rdmaSharedDevicePlugin": "none"},
    "gpuOperator": {"gpudirect": "peermem", "migStrategy": "mixed"},
    "teams": [
        {
            "name": "vision",
            "groups": ["oidc:team-vision"],
            "partition": {"pkey": "0x0001", "vfIndex": 0},
            "quota": {"gpus": 8, "rdma": 4, "cpu": "64", "memory": "512Gi"},
        }
    ],
}

#: The consumer: a program of its own, written against the generated SDK (``pulumi_gpuaas``), the
#: same values in the package's form. Only the chart mirror's folder comes from its config.
PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s
import pulumi_gpuaas as gpuaas

config = pulumi.Config()
charts = gpuaas.ChartsConfigArgs(directory=config.require("chartsDirectory"))
cluster = k8s.Provider("cluster", context="{context}", enable_server_side_apply=True)

platform = gpuaas.PlatformConfigArgs(
    onprem=gpuaas.OnPremPlatformConfigArgs(
        kubeconfig_context="{context}",
        kubernetes_version="1.37.2",
        node_groups=[
            gpuaas.NodeGroupConfigArgs(name="h100", gpu_model="H100-80GB", gpus_per_node=8, hcas=["mlx5_0", "mlx5_1"]),
        ],
        nodes=[
            gpuaas.NodeConfigArgs(name="gpu-a", id=1, node_group="h100"),
            gpuaas.NodeConfigArgs(name="gpu-b", id=2, node_group="h100"),
        ],
        fabric=gpuaas.FabricConfigArgs(
            vfs_per_hca=2, guid_scheme=gpuaas.GuidSchemeConfigArgs(base="0x0200000000000000")
        ),
        multus=gpuaas.MultusConfigArgs(cluster_network="k8s-pod-network"),
    )
)
network = gpuaas.NetworkConfigArgs(
    ofed_driver=gpuaas.NetworkOfedDriver.HOST,
    rdma_shared_device_plugin=gpuaas.NetworkRdmaSharedDevicePlugin.NONE,
)
team = gpuaas.TeamConfigArgs(
    name="vision",
    groups=["oidc:team-vision"],
    partition=gpuaas.PartitionConfigArgs(onprem=gpuaas.OnPremPartitionConfigArgs(pkey="0x0001", vf_index=0)),
    quota=gpuaas.QuotaConfigArgs(gpus=8, rdma=4, cpu="64", memory="512Gi"),
)
on_cluster = pulumi.ResourceOptions(providers={{"kubernetes": cluster}})

operator = gpuaas.NetworkOperator(
    "lab-network-operator", platform=platform, network=network, charts=charts, opts=on_cluster
)
policy = gpuaas.NicClusterPolicy(
    "lab-nic-cluster-policy",
    platform=platform,
    network=network,
    teams=[team],
    opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[operator])),
)
after_policy = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[policy]))
gpu = gpuaas.GpuOperator(
    "lab-gpu-operator",
    platform=platform,
    network=network,
    gpu_operator=gpuaas.GpuOperatorConfigArgs(
        gpudirect=gpuaas.GpuOperatorGpudirect.PEERMEM,
        mig_strategy=gpuaas.GpuOperatorMigStrategy.MIXED,
    ),
    charts=charts,
    opts=after_policy,
)
vision = gpuaas.Team("lab-teams", platform=platform, team=team, network=network, opts=after_policy)

pulumi.export("gpuOperatorNamespace", gpu.namespace)
pulumi.export("policy", policy.policy_name)
pulumi.export("team", vision.namespace)
"""


def build_in_process(cfg: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
    """The same four components from the repository's own classes (what :data:`PROGRAM` declares)."""
    operator = NetworkOperator("lab-network-operator", platform_args.network_operator(cfg), opts)
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[operator]))
    policy = NicClusterPolicy("lab-nic-cluster-policy", platform_args.nic_cluster_policy(cfg), after)
    GpuOperator("lab-gpu-operator", platform_args.gpu_operator(cfg, release_after=(policy.policy,)), opts)
    team = TeamComponent("lab-teams", opts)
    Teams("lab-teams", platform_args.teams(cfg), pulumi.ResourceOptions(parent=team, depends_on=[policy.policy]))


def expected_run(cfg: StackConfig) -> Run:
    """The stack program's own components, built in-process from :data:`STACK` under mocks."""
    return run_program("onprem", config={}, program=lambda: build_in_process(cfg))


#: The same components in-process, under the real engine: the package's cost is the difference.
IN_PROCESS = """
import sys
sys.path.insert(0, "{root}")
import pulumi
import pulumi_kubernetes as k8s
from components.loader import parse_config
from tests.e2e.package_consumer import STACK, build_in_process

cfg = parse_config({{**STACK, "charts": {{"directory": pulumi.Config().require("chartsDirectory")}}}})
cluster = k8s.Provider("cluster", context="{context}", enable_server_side_apply=True)
build_in_process(cfg, pulumi.ResourceOptions(providers={{"kubernetes": cluster}}))
"""


def consumer_venv(at: Path) -> Path:
    """A virtualenv of the consumer's own, seeing the repository's installed packages (pulumi,
    pulumi-kubernetes, setuptools) through a .pth file: pip installs the SDK there, offline."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([str(base), "-m", "venv", str(at)], check=True, capture_output=True)
    shared = sysconfig.get_paths()["purelib"]
    (next((at / "lib").glob("python3*")) / "site-packages" / "gpuaas-e2e-shared.pth").write_text(shared + "\n")
    return at


class ConsumerStack(Stack):
    """:class:`e2e.engine.Stack`'s backend, binaries and environment around a project of its own:
    ``program`` :data:`PROGRAM` (through the package) or :data:`IN_PROCESS`."""

    def __init__(self, kubeconfig: Path, program: str = "") -> None:
        super().__init__(kubeconfig, stack="dev")
        for name in [*os.listdir(self.project)]:
            path = self.project / name
            path.unlink() if path.is_symlink() or path.is_file() else shutil.rmtree(path)
        (self.project / "Pulumi.yaml").write_text(
            "name: consumer\nruntime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: venv\n"
        )
        (self.project / "requirements.txt").write_text("# the program's own requirements\n")
        (self.project / "__main__.py").write_text((program or PROGRAM).format(context=CONTEXT, root=ROOT))
        consumer_venv(self.project / "venv")

    def start(self) -> None:
        self.pulumi("login", f"file://{self.state}")
        self.pulumi("stack", "init", self.stack, "--secrets-provider", "passphrase")
        doc = {"config": {"consumer:chartsDirectory": str(self.charts)}}
        self.config_file.write_text(yaml.safe_dump(doc))
