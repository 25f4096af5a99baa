"""Node labels selecting MIG and device-plugin configs: pure labels, and the NodePatches under mocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes_validate
import yaml

from components import platform_args
from components.clusters.onprem_nodes import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    OWNED_LABELS,
    node_labels,
    node_patch,
    pool_labels,
)
from components.loader import parse_config
from components.model.config import StackConfig
from components.operators.gpu_operator import device_plugin_configs, mig_parted_configmap
from components.plan.offline import Run, run_program
from components.plan.writer import plan_files
from tests.conftest import qualified, raw_stack

K8S_VERSION = "1.33.0"
NODE_PATCH = "kubernetes:core/v1:NodePatch"


def _labels(mig: str, group: str) -> dict[str, str]:
    return {"nvidia.com/mig.config": mig, "nvidia.com/device-plugin.config": group, "gpuaas.io/node-group": group}


def test_onprem_node_labels_snapshot(cfg_of: Callable[[str], StackConfig]) -> None:
    assert node_labels(cfg_of("onprem")) == {
        "gpu-node-01": _labels("all-disabled", "h100-full"),
        "gpu-node-02": _labels("all-disabled", "h100-full"),
        "gpu-node-03": _labels("all-disabled", "h100-full"),
        "gpu-node-04": _labels("all-disabled", "h100-full"),
        "gpu-node-05": _labels("1x4g.40gb-3x1g.10gb", "h100-mig"),
        "gpu-node-06": _labels("all-disabled", "h100-shared"),
    }


def test_aks_pools_get_the_same_labels_and_no_node_patches(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("aks")
    assert node_labels(cfg) == {}
    assert cfg.aks is not None
    assert [pool_labels(cfg, p) for p in cfg.aks.gpu_pools] == [
        _labels("all-disabled", "ndh100a"),
        _labels("all-disabled", "ndh100b"),
    ]


def test_every_label_names_an_existing_config(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    mig_configs = yaml.safe_load(mig_parted_configmap(platform_args.gpu_operator(cfg))["data"]["config.yaml"])[
        "mig-configs"
    ]
    plugin_configs = device_plugin_configs(platform_args.gpu_operator(cfg))
    for labels in node_labels(cfg).values():
        assert labels["nvidia.com/mig.config"] in mig_configs
        assert labels[DEVICE_PLUGIN_CONFIG_LABEL] in plugin_configs


def test_media_extension_profiles_become_valid_label_values() -> None:
    raw: dict[str, Any] = {
        "platform": {
            "kind": "onprem",
            "kubernetesVersion": "1.37.2",
            "nodeGroups": [
                {"name": "me", "gpuModel": "H100-80GB", "mig": {"profiles": {"1g.10gb+me": 1, "3g.40gb": 1}}}
            ],
            "nodes": [{"name": "n1", "id": 1, "nodeGroup": "me"}],
        }
    }
    cfg = parse_config(raw)
    label = node_labels(cfg)["n1"]["nvidia.com/mig.config"]
    assert label == "1x1g.10gb.me-1x3g.40gb"
    config = yaml.safe_load(mig_parted_configmap(platform_args.gpu_operator(cfg))["data"]["config.yaml"])[
        "mig-configs"
    ][label]
    assert config[0]["mig-devices"] == {"1g.10gb+me": 1, "3g.40gb": 1}  # the profile keeps its real name
    kubernetes_validate.validate(_node(node_patch("n1", node_labels(cfg)["n1"])), K8S_VERSION, strict=True)


def _node(patch: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", **patch}


def test_node_patches_are_valid_nodes(cfg_of: Callable[[str], StackConfig]) -> None:
    for node, labels in node_labels(cfg_of("onprem")).items():
        kubernetes_validate.validate(_node(node_patch(node, labels)), K8S_VERSION, strict=True)


# --------------------------------------------------------------------------------------------
# Under the mock runtime


def _patches(run: Run) -> dict[str, Any]:
    return {r.name: r for r in run.of_type(NODE_PATCH)}


def test_one_node_patch_per_node_with_only_our_labels(
    run_of: Callable[[str], Run], cfg_of: Callable[[str], StackConfig]
) -> None:
    run, cfg = run_of("onprem"), cfg_of("onprem")
    assert cfg.onprem is not None
    patches = _patches(run)
    assert sorted(patches) == sorted(f"gpuaas-nodes-{n.name}" for n in cfg.onprem.nodes)
    component = run.named("gpuaas-nodes")
    assert component.type == "gpuaas:index:OnPremNodes"
    provider = run.named("gpuaas-k8s")
    assert provider.inputs["enableServerSideApply"] == "true"  # NodePatch needs server-side apply
    configs = {run.named(n).urn for n in ("gpuaas-gpu-operator-mig-config", "gpuaas-gpu-operator-device-plugin-config")}
    expected = node_labels(cfg)
    for node in cfg.onprem.nodes:
        patch = patches[f"gpuaas-nodes-{node.name}"]
        assert patch.parent == component.urn
        assert patch.provider.startswith(provider.urn)
        assert set(patch.inputs) - {"apiVersion", "kind"} == {"metadata"}, "a NodePatch sets nothing but metadata"
        meta = patch.inputs["metadata"]
        assert meta["name"] == node.name
        assert set(meta["labels"]) <= OWNED_LABELS  # the HAMi labels on HAMi groups only
        assert meta["labels"] == expected[node.name]
        assert meta["annotations"] == {"pulumi.com/patchForce": "true"}
        assert configs <= set(patch.dependencies), "labels must wait for the ConfigMaps they name"


def test_aks_has_no_node_patches(run_of: Callable[[str], Run]) -> None:
    assert _patches(run_of("aks")) == {}


def test_node_patches_are_stable_under_reordering(run_of: Callable[[str], Run]) -> None:
    raw = raw_stack("onprem")
    raw["platform"]["nodes"].reverse()
    raw["platform"]["nodeGroups"].reverse()
    reordered = _patches(run_program("onprem", config=qualified(raw)))
    original = _patches(run_of("onprem"))
    assert sorted(reordered) == sorted(original)
    for name, record in original.items():
        assert reordered[name].inputs == record.inputs


def test_dropping_a_node_from_config_leaves_its_labels(run_of: Callable[[str], Run]) -> None:
    """Deleting the patch would drop mig.config and let the GPU Operator reset the node's GPUs."""
    patches = [r for r in run_of("onprem").records if r.type == "kubernetes:core/v1:NodePatch"]
    assert patches and all(r.retain_on_delete for r in patches)
    files = plan_files(run_of("onprem"))
    assert files["k8s/_cluster/Node-gpu-node-01.patch.yaml"].startswith("# pulumi options: retainOnDelete\n")
    assert files["k8s/_cluster/Namespace-vision.yaml"].startswith("# pulumi options: protect\n")
    assert not files["k8s/_cluster/Namespace-gpu-operator.yaml"].startswith("#")
