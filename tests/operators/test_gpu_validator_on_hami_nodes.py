"""The GPU Operator's validator on HAMi nodes and on whole-GPU nodes (issue 34, item 5).

KWOK marks a validator pod ready whatever it would do, so a crash loop cannot be watched on the
fleet: this states the outcome against what the Operator renders, for the HAMi variant stack and an
AKS stack with a HAMi pool. The oracle is written from gpu-operator v26.7.0's source, read in place
(../shared/upstream/src/gpu-operator-v26.7.0), not from ``components/``:

- the validator DaemonSet, its nodeSelector and init containers:
  ``assets/state-operator-validation/0500_daemonset.yaml``;
- the Operator puts every ``nvidia.com/gpu.deploy.*`` label of a GPU node to ``"true"`` unless the
  node already has a value (``controllers/state_manager.go`` ``addGPUStateLabels``);
- ``plugin-validation`` is left out only when the device plugin is off for the whole cluster
  (``controllers/object_controls.go`` ``TransformValidatorComponent``, case ``"plugin"``);
- ``nvidia-validator`` with ``COMPONENT=plugin`` waits for a node capacity resource whose name
  begins with ``genericGPUResourceType`` or ``migGPUResourcePrefix`` (``cmd/nvidia-validator/main.go``
  ``validateGPUResource``), then fails, and the pod restarts;
- ``COMPONENT=driver`` / ``COMPONENT=toolkit`` write ``driver-ready`` / ``toolkit-ready``; the
  toolkit one runs ``nvidia-smi`` as the NVIDIA runtime injects it (``Toolkit.validate``), so its
  pod needs the ``nvidia`` RuntimeClass (what ``TransformValidator`` ``setRuntimeClassName`` gives
  the Operator's own) and ``NVIDIA_VISIBLE_DEVICES=all``.

What a HAMi node advertises is HAMi's ``resourceName`` (HAMi 2.10.0 device plugin; ../shared/reference/hami.md),
read from the plan's HAMi release values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pytest
import yaml

from components.loader import parse_config
from components.model.config import StackConfig
from components.plan.offline import Run, run_program, stack_config
from components.plan.writer import manifest
from e2e import upstream
from tests.conftest import qualified, raw_stack
from tests.hami_cases import HAMI_STACK

SRC: Final = "src/gpu-operator-v26.7.0"
VALIDATOR_DS: Final = f"{SRC}/assets/state-operator-validation/0500_daemonset.yaml"
VALIDATOR_MAIN: Final = f"{SRC}/cmd/nvidia-validator/main.go"
DEPLOY_PREFIX: Final = "nvidia.com/gpu.deploy."
DAEMONSET: Final = "kubernetes:apps/v1:DaemonSet"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Node:
    """One node the oracle reasons about: its labels once the plan and the Operator labelled it."""

    name: str
    hami: bool
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...] = ()


def validator_prefixes() -> tuple[str, ...]:
    """The resource-name prefixes the plugin validation waits for, from the validator's constants."""
    text = upstream.require(VALIDATOR_MAIN).read_text()
    found = dict(re.findall(r'^\s*(genericGPUResourceType|migGPUResourcePrefix)\s*=\s*"([^"]+)"', text, re.M))
    assert set(found) == {"genericGPUResourceType", "migGPUResourcePrefix"}, found
    # The check itself, so that a changed rule is noticed here rather than assumed.
    assert "strings.HasPrefix(string(resourceName), migGPUResourcePrefix) && quantity.Value() >= 1" in text
    assert "strings.HasPrefix(string(resourceName), genericGPUResourceType) && quantity.Value() >= 1" in text
    return tuple(found.values())


def operators_validator() -> Obj:
    return dict(yaml.safe_load(upstream.require(VALIDATOR_DS).read_text()))


def component(container: Mapping[str, Any]) -> str | None:
    """The ``COMPONENT`` an ``nvidia-validator`` container validates, else None."""
    if "nvidia-validator" not in " ".join([*container.get("command", []), *container.get("args", [])]):
        return None
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    return env.get("COMPONENT")


def tolerates(pod: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    for t in pod.get("tolerations", []):
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def lands_on(ds: Obj, node: Node) -> bool:
    """Whether a DaemonSet wants a pod on the node: its nodeSelector and the node's NoSchedule taints."""
    pod = ds["spec"]["template"]["spec"]
    selector = pod.get("nodeSelector", {})
    return all(node.labels.get(k) == v for k, v in selector.items()) and all(tolerates(pod, t) for t in node.taints)


def validations_on(run: Run, node: Node, device_plugin_on: bool) -> list[tuple[str, str, Obj]]:
    """``(DaemonSet, COMPONENT, pod spec)`` of every validator container that runs on the node."""
    out: list[tuple[str, str, Obj]] = []
    operators = operators_validator()
    if lands_on(operators, node):
        # TransformValidator's setRuntimeClassName: the chart's operator.runtimeClass, "nvidia".
        pod = {**operators["spec"]["template"]["spec"], "runtimeClassName": "nvidia"}
        for c in pod["initContainers"]:
            comp = component(c)
            if comp == "plugin" and not device_plugin_on:
                continue  # object_controls.go: removed only when the device plugin is off cluster-wide
            if comp:
                out.append(("the Operator's nvidia-operator-validator", comp, pod))
    for r in run.of_type(DAEMONSET):
        ds = manifest(r)
        if lands_on(ds, node):
            pod = ds["spec"]["template"]["spec"]
            for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
                if comp := component(c):
                    out.append((ds["metadata"]["name"], comp, pod))
    return out


def operator_labelled(labels: Mapping[str, str], gpu: bool) -> dict[str, str]:
    """The node's labels after the Operator's ``addGPUStateLabels``: a deploy label with no value becomes "true"."""
    out = dict(labels)
    if gpu:
        for key in ("container-toolkit", "device-plugin", "driver", "operator-validator", "dcgm-exporter"):
            if not out.get(DEPLOY_PREFIX + key):
                out[DEPLOY_PREFIX + key] = "true"
    return out


# --------------------------------------------------------------------------------------------
# the two stacks: on-prem HAMi variant, AKS with a HAMi pool


def onprem_case() -> tuple[StackConfig, Run, list[Node]]:
    config = stack_config("onprem", HAMI_STACK)
    cfg = parse_config({k.removeprefix("gpuaas:"): v for k, v in config.items() if k.startswith("gpuaas:")})
    run = run_program("onprem", config=config)
    assert cfg.onprem is not None
    groups = cfg.onprem.groups_by_name
    patches = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"]
        for r in run.of_type("kubernetes:core/v1:NodePatch")
    }
    nodes = [
        Node(n.name, groups[n.node_group].hami is not None, operator_labelled(patches.get(n.name, {}), gpu=True))
        for n in cfg.onprem.nodes
    ]
    return cfg, run, nodes


def aks_case() -> tuple[StackConfig, Run, list[Node]]:
    raw = raw_stack("aks")
    raw["platform"]["gpuPools"].append(
        {
            "name": "ndhami",
            "vmSize": "Standard_ND96isr_H100_v5",
            "minCount": 2,
            "maxCount": 2,
            "hami": {},
        }
    )
    cfg = parse_config(raw)
    run = run_program("aks", config=qualified(raw))
    assert cfg.aks is not None
    pools = {
        r.inputs["agentPoolName"]: r.inputs for r in run.records if r.type == "azure-native:containerservice:AgentPool"
    }
    nodes = []
    for pool in cfg.aks.gpu_pools:
        inputs = pools[pool.name]
        taints = tuple(
            dict(zip(("key", "value", "effect"), re.split(r"[=:]", t), strict=True))
            for t in inputs.get("nodeTaints") or []
        )
        nodes.append(
            Node(pool.name, pool.hami is not None, operator_labelled(inputs.get("nodeLabels") or {}, gpu=True), taints)
        )
    return cfg, run, nodes


@pytest.fixture(scope="module", params=["onprem-hami", "aks-with-a-hami-pool"])
def case(request: pytest.FixtureRequest) -> Iterator[tuple[StackConfig, Run, list[Node]]]:
    yield onprem_case() if request.param == "onprem-hami" else aks_case()


def hami_resource(run: Run) -> str:
    return str(run.named("gpuaas-hami-release").inputs["values"]["resourceName"])


def device_plugin_on(run: Run) -> bool:
    values = run.named("gpuaas-gpu-operator-release").inputs["values"]
    return bool(values.get("devicePlugin", {}).get("enabled", True))


# --------------------------------------------------------------------------------------------
# the promises


def test_nothing_of_the_validator_waits_on_a_hami_node_for_a_resource_hami_does_not_advertise(case: Any) -> None:
    _cfg, run, nodes = case
    prefixes = validator_prefixes()
    advertised = hami_resource(run)
    assert not advertised.startswith(prefixes), f"HAMi advertises {advertised}: the plugin validation would pass"
    hami_nodes = [n for n in nodes if n.hami]
    assert hami_nodes
    for node in hami_nodes:
        waits = [ds for ds, comp, _pod in validations_on(run, node, device_plugin_on(run)) if comp == "plugin"]
        assert not waits, (
            f"{node.name}: {waits} validate(s) the device plugin, waiting for a resource beginning {prefixes} "
            f"(cmd/nvidia-validator validateGPUResource); the node advertises {advertised} only"
        )


def test_the_driver_and_toolkit_validations_still_run_on_every_hami_node(case: Any) -> None:
    _cfg, run, nodes = case
    for node in (n for n in nodes if n.hami):
        found = {comp: pod for _ds, comp, pod in validations_on(run, node, device_plugin_on(run))}
        assert {"driver", "toolkit"} <= set(found), f"{node.name}: validations {sorted(found)}"
        toolkit = found["toolkit"]
        assert toolkit.get("runtimeClassName") == "nvidia", (
            f"{node.name}: toolkit validation without the NVIDIA runtime"
        )
        env = {
            e["name"]: e.get("value")
            for c in toolkit.get("initContainers", [])
            if component(c) == "toolkit"
            for e in c.get("env", [])
        }
        assert env.get("NVIDIA_VISIBLE_DEVICES") == "all", f"{node.name}: {env}"


def test_a_whole_gpu_node_still_validates_the_device_plugin(case: Any) -> None:
    """The allowed twin: off HAMi nodes the Operator's validator runs, plugin validation included."""
    _cfg, run, nodes = case
    whole = [n for n in nodes if not n.hami]
    assert whole
    for node in whole:
        comps = {(ds, comp) for ds, comp, _pod in validations_on(run, node, device_plugin_on(run))}
        assert ("the Operator's nvidia-operator-validator", "plugin") in comps, f"{node.name}: {sorted(comps)}"
