"""ib-node-config: the node script run for real (bash, fake host), its ConfigMap/DaemonSet, and its order."""

from __future__ import annotations

import copy
import hashlib
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components import platform_args
from components.fabric.ib_node_config import (
    DONE_FILE,
    DROPIN_NAME,
    MAX_STAGGER,
    MODULES_LOAD_FILE,
    IbNodeConfigArgs,
    config_map,
    daemonset,
    script,
    script_sha256,
    stagger_seconds,
)
from components.loader import parse_config
from components.model.config import StackConfig
from components.plan.offline import Run
from tests.conftest import raw_stack
from tests.network_cases import K8S_VERSION, custom, defaults

# --------------------------------------------------------------------------------------------
# The script, against a fake host: ROOT is a temp dir, systemctl/modprobe/nsenter record calls.

RECORDER = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
if [[ -n "${FAIL_ON:-}" && " $* " == *" $FAIL_ON "* ]]; then exit 1; fi
# systemctl show -p MainPID --value <service>: the pid FakeHost.running recorded, else 0.
if [[ "$1" == show ]]; then cat "$(dirname "$0")/pid-${@: -1}" 2>/dev/null || echo 0; fi
"""

MEMLOCK = (
    "# gpuaas ib-node-config: RDMA pins the memory it registers; containers inherit this limit.\n"
    "[Service]\n"
    "LimitMEMLOCK=infinity\n"
)


@dataclass
class FakeHost:
    root: Path
    bin: Path
    calls_file: Path
    done: Path
    script: Path

    def calls(self) -> list[str]:
        """What the script did; its ``systemctl show`` queries of the live limit are left out."""
        return [c for c in self.all_calls() if " show -p MainPID " not in f" {c} "]

    def all_calls(self) -> list[str]:
        return self.calls_file.read_text().splitlines() if self.calls_file.exists() else []

    def running(self, service: str, pid: int, memlock: str) -> None:
        """``service``'s main process is ``pid`` with ``memlock`` as its live locked-memory limit."""
        (self.proc / str(pid)).mkdir(parents=True, exist_ok=True)
        (self.proc / str(pid) / "limits").write_text(
            "Limit                     Soft Limit           Hard Limit           Units     \n"
            "Max open files            1048576              1048576              files     \n"
            f"Max locked memory         {memlock:<20} {memlock:<20} bytes     \n"
        )
        (self.bin / f"pid-{service}").write_text(str(pid))

    @property
    def proc(self) -> Path:
        return self.root.parent / "proc"

    def dropin(self, service: str) -> Path:
        return self.root / f"etc/systemd/system/{service}.service.d/{DROPIN_NAME}"

    def run(self, overrides: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        self.calls_file.unlink(missing_ok=True)
        full = {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "CALLS": str(self.calls_file),
            "IB_NODE_CONFIG_ROOT": str(self.root),
            "IB_NODE_CONFIG_DONE": str(self.done),
            "IB_NODE_CONFIG_ONESHOT": "1",
            "IB_NODE_CONFIG_PROC": str(self.proc),
            "NODE_NAME": "gpu-node-01",
            **env,
        }
        if overrides:
            full["IB_NODE_CONFIG_SYSTEMCTL"] = str(self.bin / "systemctl")
            full["IB_NODE_CONFIG_MODPROBE"] = str(self.bin / "modprobe")
        return subprocess.run(
            ["bash", str(self.script)], env=full, capture_output=True, text=True, timeout=30, check=False
        )


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    fake = FakeHost(
        root=tmp_path / "host",
        bin=tmp_path / "bin",
        calls_file=tmp_path / "calls.log",
        done=tmp_path / "done",
        script=tmp_path / "ib-node-config.sh",
    )
    (fake.root / "etc").mkdir(parents=True)
    fake.bin.mkdir()
    for tool in ("systemctl", "modprobe", "nsenter"):
        (fake.bin / tool).write_text(RECORDER)
        (fake.bin / tool).chmod(0o755)
    fake.script.write_text(script())
    return fake


def _args(cfg: StackConfig) -> IbNodeConfigArgs:
    """ib-node-config's arguments as the Platform maps ``cfg``."""
    return platform_args.ib_node_config(cfg)


def test_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", "-c", script()], check=True)


def test_first_run_configures_and_restarts_both(host: FakeHost) -> None:
    result = host.run()
    assert result.returncode == 0, result.stderr
    assert host.calls() == [
        "modprobe ib_umad",
        "modprobe rdma_ucm",
        "systemctl daemon-reload",
        "systemctl restart containerd",
        "systemctl restart kubelet",
    ]
    assert (host.root / MODULES_LOAD_FILE.lstrip("/")).read_text() == "ib_umad\nrdma_ucm\n"
    assert host.dropin("containerd").read_text() == MEMLOCK
    assert host.dropin("kubelet").read_text() == MEMLOCK
    assert result.stdout.strip() == (
        "ib-node-config: node=gpu-node-01 modules=ib_umad,rdma_ucm "
        "changed=modules-load,containerd-memlock,kubelet-memlock restarted=containerd,kubelet"
    )
    assert host.done.exists()


def test_second_run_restarts_nothing(host: FakeHost) -> None:
    assert host.run().returncode == 0
    before = {p: p.stat().st_mtime_ns for p in host.root.rglob("*") if p.is_file()}
    result = host.run()
    assert result.returncode == 0, result.stderr
    # Modules are (re)loaded every time — modprobe is idempotent — but systemd is left alone.
    assert host.calls() == ["modprobe ib_umad", "modprobe rdma_ucm"]
    assert "changed=none restarted=none" in result.stdout
    assert {p: p.stat().st_mtime_ns for p in host.root.rglob("*") if p.is_file()} == before, "files rewritten"
    assert host.done.exists()


def test_only_the_service_whose_dropin_drifted_restarts(host: FakeHost) -> None:
    assert host.run().returncode == 0
    host.dropin("kubelet").write_text("[Service]\nLimitMEMLOCK=8M\n")
    result = host.run()
    assert result.returncode == 0, result.stderr
    assert host.calls() == [
        "modprobe ib_umad",
        "modprobe rdma_ucm",
        "systemctl daemon-reload",
        "systemctl restart kubelet",
    ]
    assert host.dropin("kubelet").read_text() == MEMLOCK
    assert "changed=kubelet-memlock restarted=kubelet" in result.stdout


def test_modules_load_change_alone_needs_no_restart(host: FakeHost) -> None:
    assert host.run().returncode == 0
    (host.root / MODULES_LOAD_FILE.lstrip("/")).write_text("ib_umad\n")
    result = host.run()
    assert host.calls() == ["modprobe ib_umad", "modprobe rdma_ucm"]
    assert "changed=modules-load restarted=none" in result.stdout


def test_a_node_configured_by_hand_is_left_alone(host: FakeHost) -> None:
    """Identical files already in place (a replaced pod, a reimaged node with our drop-ins baked in)."""
    for service in ("containerd", "kubelet"):
        host.dropin(service).parent.mkdir(parents=True)
        host.dropin(service).write_text(MEMLOCK)
    (host.root / "etc/modules-load.d").mkdir()
    (host.root / MODULES_LOAD_FILE.lstrip("/")).write_text("ib_umad\nrdma_ucm\n")
    result = host.run()
    assert not [c for c in host.calls() if c.startswith("systemctl")]
    assert "changed=none restarted=none" in result.stdout


def test_a_failed_module_load_fails_the_pod_before_touching_systemd(host: FakeHost) -> None:
    host.done.write_text("stale marker of an earlier run")
    result = host.run(FAIL_ON="rdma_ucm")
    assert result.returncode != 0
    assert not host.done.exists(), "a failed run must not leave the pod Ready"
    assert not [c for c in host.calls() if c.startswith("systemctl")]
    assert not host.dropin("containerd").exists()


def test_a_running_service_with_the_old_limit_is_restarted(host: FakeHost) -> None:
    """A pod killed after writing the drop-ins but before restarting: the files say "unchanged"."""
    assert host.run().returncode == 0
    host.running("containerd", 4242, "65536")
    host.running("kubelet", 4343, "unlimited")
    result = host.run()
    assert result.returncode == 0, result.stderr
    assert host.calls() == [
        "modprobe ib_umad",
        "modprobe rdma_ucm",
        "systemctl daemon-reload",
        "systemctl restart containerd",
    ]
    assert "containerd runs with memlock 65536 although its drop-in says infinity" in result.stderr
    assert "changed=containerd-live-memlock restarted=containerd" in result.stdout
    assert "systemctl show -p MainPID --value kubelet" in host.all_calls()
    host.running("containerd", 4244, "unlimited")  # restarted: the live limit is right now
    assert "changed=none restarted=none" in host.run().stdout


def test_first_restarts_are_staggered_by_node_and_repairs_are_not(host: FakeHost) -> None:
    sleep = host.bin / "sleep"
    sleep.write_text(RECORDER)
    sleep.chmod(0o755)
    result = host.run(IB_NODE_CONFIG_STAGGER="100", NODE_NAME="gpu-node-07")
    assert result.returncode == 0, result.stderr
    delay = int(subprocess.run(["cksum"], input="gpu-node-07", capture_output=True, text=True).stdout.split()[0]) % 100
    assert host.calls()[2:4] == [f"sleep {delay}", "systemctl daemon-reload"]
    assert f"first restart of containerd kubelet in {delay}s (staggered over 100s)" in result.stderr
    other = host.run(IB_NODE_CONFIG_STAGGER="100", NODE_NAME="gpu-node-08")
    assert other.returncode == 0
    host.dropin("kubelet").write_text("[Service]\nLimitMEMLOCK=8M\n")  # drift on a configured node
    repair = host.run(IB_NODE_CONFIG_STAGGER="100")
    assert not [c for c in host.calls() if c.startswith("sleep")], "a repair restarts at once"
    assert "restarted=kubelet" in repair.stdout


def test_the_stagger_window_grows_with_the_fleet() -> None:
    cfg = defaults()
    assert stagger_seconds(_args(cfg).nodes) == 2 * len(cfg.onprem.nodes)  # type: ignore[union-attr]
    raw = raw_stack("onprem")
    raw["platform"]["nodes"] = [{"name": f"n{i}", "id": i, "nodeGroup": "h100-full"} for i in range(1, 2000)]
    raw["quotaPolicy"] = {"allowOversubscription": True}
    raw["queues"] = {"elastic": False}  # oversubscribed hard quotas: the node count is what matters here
    assert stagger_seconds(_args(parse_config(raw)).nodes) == MAX_STAGGER
    aks = parse_config(raw_stack("aks"))
    assert stagger_seconds(_args(aks).nodes) == 2 * sum(p.max_count for p in aks.aks.gpu_pools)  # type: ignore[union-attr]


def test_default_commands_run_in_the_hosts_namespaces(host: FakeHost) -> None:
    """Without overrides every host command goes through nsenter into PID 1."""
    result = host.run(overrides=False)
    assert result.returncode == 0, result.stderr
    prefix = "nsenter --target 1 --mount --uts --ipc --net --pid --"
    assert host.calls() == [
        f"{prefix} modprobe ib_umad",
        f"{prefix} modprobe rdma_ucm",
        f"{prefix} systemctl daemon-reload",
        f"{prefix} systemctl restart containerd",
        f"{prefix} systemctl restart kubelet",
    ]


# --------------------------------------------------------------------------------------------
# ConfigMap and DaemonSet

DEFAULTS_DAEMONSET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {
        "name": "ib-node-config",
        "namespace": "nvidia-network-operator",
        "labels": {"app.kubernetes.io/name": "ib-node-config", "app.kubernetes.io/part-of": "gpuaas"},
    },
    "spec": {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "ib-node-config"}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
        "template": {
            "metadata": {
                "labels": {"app.kubernetes.io/name": "ib-node-config", "app.kubernetes.io/part-of": "gpuaas"},
                "annotations": {"gpuaas.io/script-sha256": hashlib.sha256(script().encode()).hexdigest()},
            },
            "spec": {
                "hostPID": True,
                "priorityClassName": "system-node-critical",
                "nodeSelector": {"feature.node.kubernetes.io/pci-15b3.present": "true"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {
                        "name": "ib-node-config",
                        "image": "docker.io/library/debian:12.12-slim",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["bash", "/opt/gpuaas/ib-node-config.sh"],
                        "env": [
                            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                            {"name": "IB_NODE_CONFIG_DONE", "value": "/tmp/ib-node-config.done"},
                            {"name": "IB_NODE_CONFIG_STAGGER", "value": "2"},
                        ],
                        "securityContext": {"privileged": True},
                        "readinessProbe": {
                            "exec": {"command": ["test", "-f", "/tmp/ib-node-config.done"]},
                            "periodSeconds": 5,
                        },
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                        "volumeMounts": [
                            {"name": "script", "mountPath": "/opt/gpuaas", "readOnly": True},
                            {"name": "host-etc", "mountPath": "/host/etc"},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "script", "configMap": {"name": "ib-node-config", "defaultMode": 0o555}},
                    {"name": "host-etc", "hostPath": {"path": "/etc", "type": "Directory"}},
                ],
            },
        },
    },
}


def test_defaults_snapshot() -> None:
    cfg = defaults()
    assert daemonset(_args(cfg)) == DEFAULTS_DAEMONSET
    assert config_map(cfg.network) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "ib-node-config",
            "namespace": "nvidia-network-operator",
            "labels": {"app.kubernetes.io/part-of": "gpuaas"},
        },
        "data": {"ib-node-config.sh": script()},
    }


def test_custom_snapshot() -> None:
    expected = copy.deepcopy(DEFAULTS_DAEMONSET)
    expected["metadata"]["namespace"] = "nvnet"
    pod = expected["spec"]["template"]["spec"]
    # The containerized DOCA driver: only nodes whose driver pod is ready.
    pod["nodeSelector"] = {
        "gpuaas.io/rdma": "true",
        "kubernetes.io/arch": "amd64",
        "network.nvidia.com/operator.mofed.wait": "false",
    }
    pod["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ib"},
    ]
    pod["containers"][0]["image"] = "mirror.example.com/debian:12.11-slim"
    assert daemonset(_args(custom())) == expected
    assert config_map(custom().network)["metadata"]["namespace"] == "nvnet"


@pytest.mark.parametrize("case", [defaults, custom], ids=["defaults", "custom"])
def test_objects_are_valid_kubernetes(case: Callable[[], StackConfig]) -> None:
    cfg = case()
    kubernetes_validate.validate(config_map(cfg.network), K8S_VERSION, strict=True)
    kubernetes_validate.validate(daemonset(_args(cfg)), K8S_VERSION, strict=True)


def test_a_script_change_rerolls_the_daemonset() -> None:
    cfg = defaults()
    annotation = daemonset(_args(cfg))["spec"]["template"]["metadata"]["annotations"]["gpuaas.io/script-sha256"]
    mounted = config_map(cfg.network)["data"]["ib-node-config.sh"]
    assert annotation == script_sha256() == hashlib.sha256(mounted.encode()).hexdigest()


def test_pod_wiring_matches_the_script() -> None:
    """The command runs the mounted key; readiness waits for the marker the script writes."""
    pod = daemonset(_args(defaults()))["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "script")
    key = next(iter(config_map(defaults().network)["data"]))
    assert container["command"] == ["bash", f"{mount['mountPath']}/{key}"]
    done = next(e["value"] for e in container["env"] if e["name"] == "IB_NODE_CONFIG_DONE")
    assert done == DONE_FILE and container["readinessProbe"]["exec"]["command"] == ["test", "-f", done]
    # Default IB_NODE_CONFIG_ROOT is /host: the hostPath mount provides /host/etc.
    assert {"name": "host-etc", "mountPath": "/host/etc"} in container["volumeMounts"]
    assert pod["hostPID"] is True, "nsenter --target 1 needs the host PID namespace"


# --------------------------------------------------------------------------------------------
# Under mocks


@pytest.mark.parametrize("stack_name", ["onprem", "aks"])
def test_runs_after_the_nic_cluster_policy(run_of: Callable[[str], Run], stack_name: str) -> None:
    run = run_of(stack_name)
    component = run.named("gpuaas-ib-node-config")
    assert component.type == "gpuaas:index:IbNodeConfig"
    assert component.parent == run.named("gpuaas").urn
    policy = run.named("gpuaas-nic-cluster-policy-policy")
    cm = run.named("gpuaas-ib-node-config-script")
    ds = run.named("gpuaas-ib-node-config-daemonset")
    assert cm.parent == component.urn and ds.parent == component.urn
    assert cm.inputs["metadata"]["name"] == ds.inputs["metadata"]["name"] == "ib-node-config"
    assert policy.urn in cm.dependencies and policy.urn in ds.dependencies
    assert cm.urn in ds.dependencies
