"""The HAMi variant stack and the pods ``gpuaas-team-hami`` refuses, each beside its allowed twin.

One table for the CEL unit test (tests/tenancy/test_hami_admission_cel.py, cel-python on the
rendered policy) and the real API server (tests/e2e/test_hami_pods_are_admitted_only_as_hami_books_them.py),
so both prove the same cases. A case is ``(id, check, refused edit, allowed edit)``: both edits start
from :func:`hami_pod`, an allowed HAMi pod, and differ only in what the check is about.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

from components.loader import gpuaas_section, parse_config
from components.model import hami, resources
from components.model.config import StackConfig
from components.plan.offline import ROOT, stack_config
from components.queueing.admission import QUEUE_LABEL

HAMI_STACK: Final = ROOT / "tests" / "stacks" / "onprem-hami.yaml"
#: Team A of the tests: HAMi quota, ``privileged`` (so Pod Security leaves host paths and privileged
#: containers to gpuaas-team-hami).
TEAM: Final = "inference"
PAUSE: Final = "registry.k8s.io/pause:3.10"

Pod = dict[str, Any]
Edit = Callable[[Pod], None]


def hami_raw() -> dict[str, Any]:
    """The ``gpuaas:*`` keys of the HAMi variant stack, prefix stripped (a deep copy)."""
    return copy.deepcopy(gpuaas_section(stack_config("onprem", HAMI_STACK)))


def hami_cfg() -> StackConfig:
    return parse_config(hami_raw())


def hami_pod(name: str = "slice", ns: str = TEAM, slices: int = 1, memory_mib: int = 10240, cores: int = 25) -> Pod:
    """An allowed HAMi pod of team A: slices with their memory and SM share, HAMi's scheduler, its queue."""
    limits = {resources.HAMI_GPU: str(slices), resources.HAMI_MEMORY: str(memory_mib)}
    if cores:
        limits[resources.HAMI_CORES] = str(cores)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: ns}},
        "spec": {
            "schedulerName": hami.SCHEDULER_NAME,
            "containers": [
                {
                    "name": "main",
                    "image": PAUSE,
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": limits},
                }
            ],
        },
    }


def _spec(**fields: Any) -> Edit:
    return lambda p: p["spec"].update(copy.deepcopy(fields))


def _drop_scheduler(p: Pod) -> None:
    del p["spec"]["schedulerName"]


def _meta(key: str, **values: str) -> Edit:
    return lambda p: p["metadata"].setdefault(key, {}).update(values)


def _main(**fields: Any) -> Edit:
    return lambda p: p["spec"]["containers"][0].update(copy.deepcopy(fields))


def _env(name: str, value: str = "1") -> Edit:
    return _main(env=[{"name": name, "value": value}])


def _init_env(name: str) -> Edit:
    def edit(p: Pod) -> None:
        p["spec"]["initContainers"] = [{"name": "setup", "image": PAUSE, "env": [{"name": name, "value": "1"}]}]

    return edit


def _env_from(prefix: str | None) -> Edit:
    source: dict[str, Any] = {"configMapRef": {"name": "settings"}}
    if prefix is not None:
        source["prefix"] = prefix
    return _main(envFrom=[source])


def _host_path(path: str) -> Edit:
    def edit(p: Pod) -> None:
        p["spec"]["volumes"] = [{"name": "host", "hostPath": {"path": path}}]
        p["spec"]["containers"][0]["volumeMounts"] = [{"name": "host", "mountPath": "/host"}]

    return edit


def _sidecar(**fields: Any) -> Edit:
    def edit(p: Pod) -> None:
        p["spec"]["containers"].append({"name": "sidecar", "image": PAUSE, **copy.deepcopy(fields)})

    return edit


def _pct(p: Pod) -> None:
    p["spec"]["containers"][0]["resources"]["limits"][resources.HAMI_MEMORY_PERCENTAGE] = "50"


def _no_memory(p: Pod) -> None:
    del p["spec"]["containers"][0]["resources"]["limits"][resources.HAMI_MEMORY]


def _keep(_p: Pod) -> None:
    """The allowed pod as it is."""


#: (id, check of gpuaas-team-hami, refused edit, allowed twin edit)
CASES: Final[list[tuple[str, str, Edit, Edit]]] = [
    ("no-scheduler", "scheduler", _drop_scheduler, _keep),
    ("default-scheduler", "scheduler", _spec(schedulerName="default-scheduler"), _keep),
    (
        "node-name",
        "node-name",
        _spec(nodeName="gpu-node-06"),
        _spec(nodeSelector={"kubernetes.io/hostname": "gpu-node-06"}),
    ),
    (
        "webhook-ignore-label",
        "webhook-label",
        _meta("labels", **{hami.WEBHOOK_IGNORE_LABEL: "ignore"}),
        _meta("labels", app="x"),
    ),
    (
        "forged-allocation",
        "annotations",
        _meta("annotations", **{"hami.io/vgpu-devices-to-allocate": "GPU-0,NVIDIA,10240,25:;"}),
        _meta("annotations", **{"hami.io/gpu-scheduler-policy": "binpack"}),
    ),
    (
        "forged-node",
        "annotations",
        _meta("annotations", **{"hami.io/vgpu-node": "gpu-node-06", "hami.io/bind-phase": "success"}),
        _meta("annotations", **{"hami.io/node-scheduler-policy": "spread"}),
    ),
    ("cuda-disable-control", "environment", _env("CUDA_DISABLE_CONTROL", "true"), _env("CUDA_LAUNCH_BLOCKING", "1")),
    ("ld-preload", "environment", _env("LD_PRELOAD", "/tmp/free.so"), _env("LD_LIBRARY_PATH", "/opt/lib")),
    ("memory-limit-env", "environment", _env("CUDA_DEVICE_MEMORY_LIMIT_0", "80g"), _env("CUDA_VISIBLE_DEVICES", "0")),
    ("sm-limit-env", "environment", _env("CUDA_DEVICE_SM_LIMIT", "100"), _env("CUDA_MODULE_LOADING", "LAZY")),
    (
        "visible-devices",
        "environment",
        _env("NVIDIA_VISIBLE_DEVICES", "all"),
        _env("NVIDIA_DRIVER_CAPABILITIES", "compute"),
    ),
    ("core-policy-off", "environment", _env(hami.CORE_POLICY_ENV, "disable"), _env(hami.CORE_POLICY_ENV, "default")),
    ("init-container-env", "environment", _init_env("LD_PRELOAD"), _init_env("LD_BIND_NOW")),
    ("env-from-unprefixed", "environment", _env_from(None), _env_from("APP_")),
    ("env-from-cuda-prefix", "environment", _env_from("CUDA_"), _env_from("APP_CUDA_")),
    ("host-lib", "host-paths", _host_path(hami.LIB_PATH), _host_path("/usr/local/cuda")),
    ("host-inside-lib", "host-paths", _host_path(f"{hami.LIB_PATH}/containers"), _host_path("/usr/local/bin")),
    ("host-above-lib", "host-paths", _host_path("/usr/local"), _host_path("/usr/share")),
    ("host-root", "host-paths", _host_path("/"), _host_path("/srv")),
    ("host-lock", "host-paths", _host_path("/tmp"), _host_path("/tmp2")),
    ("host-not-canonical", "host-paths", _host_path("/usr//local/vgpu"), _host_path("/usr/lib/x86_64-linux-gnu")),
    ("host-trailing-slash", "host-paths", _host_path("/usr/local/vgpu/"), _host_path("/var/lib/models")),
    (
        "privileged",
        "privileged",
        _main(securityContext={"privileged": True}),
        _main(securityContext={"privileged": False}),
    ),
    (
        "privileged-sidecar",
        "privileged",
        _sidecar(securityContext={"privileged": True}),
        _sidecar(securityContext={"runAsNonRoot": True, "runAsUser": 1000}),
    ),
    ("no-memory", "memory-stated", _no_memory, _keep),
    ("memory-percentage", "no-percentage", _pct, _keep),
]
