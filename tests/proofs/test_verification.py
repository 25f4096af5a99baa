"""Verification workloads: targets, thresholds, manifests (schema, Pod Security baseline), scripts, plan."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from components import k8s as kube
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import AKS_POOL_LABEL, GPU, rdma_shared_resource, sriov_resource
from components.plan.offline import Run, run_program
from components.proofs import burn_in, ib_write_bw, isolation, nccl, pods, verification
from components.proofs import scripts as proof_scripts
from components.proofs import targets as v
from components.tenancy import network_admission, networks
from tests.conftest import qualified, raw_stack

K8S_VERSION = "1.33.0"
BASH = shutil.which("bash")


def aks_with_pools() -> StackConfig:
    raw = raw_stack("aks")
    raw["verification"] = {"aksPools": True}
    return parse_config(raw)


def all_manifests(cfg: StackConfig) -> Iterator[tuple[v.Target, str, dict[str, Any]]]:
    source = verification.BENCH_SCRIPT.read_text()
    for t in v.targets(cfg):
        for role, m in verification.manifests(cfg, t, source).items():
            yield t, role, m


def pod_specs(cfg: StackConfig) -> Iterator[tuple[str, dict[str, Any]]]:
    for _t, role, m in all_manifests(cfg):
        if m["kind"] == "Job":
            yield role, m["spec"]["template"]["spec"]


# --------------------------------------------------------------------------------------------
# Targets and thresholds


def test_onprem_target_is_the_verify_team_on_its_partition(cfg_of: Callable[[str], StackConfig]) -> None:
    (t,) = v.targets(cfg_of("onprem"))
    assert (t.key, t.namespace, t.prefix) == ("vision", "vision", "verify")
    assert t.rdma_resource == sriov_resource(0x0001) == "nvidia.com/sriov8001"
    assert (t.network, t.link_rate_gbps) == (networks.nad_name(cfg_of("onprem").teams[0]), 400) == ("ib-vision", 400)
    assert t.socket_ifname == "eth0"  # ipam: static — net1 has no address in an Indexed Job's pods
    assert t.vf_env == "PCIDEVICE_NVIDIA_COM_SRIOV8001"
    assert (t.pool, t.tolerations) == (None, ())


@pytest.mark.parametrize(("ipam", "ifname"), [("static", "eth0"), ("nv-ipam", "net1")])
def test_nccl_sockets_use_net1_where_the_team_network_has_addresses(ipam: str, ifname: str) -> None:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["ipam"] = ipam
    cfg = parse_config(raw)
    (t,) = v.targets(cfg)
    pod = nccl.nccl_job(cfg, t, "x")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == ifname == t.socket_ifname


def test_network_annotation_passes_the_admission_guard(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    for role, m in verification.manifests(cfg, t, "").items():
        if m["kind"] == "Job":
            assert (
                network_admission.networks_violations(m["spec"]["template"]["metadata"]["annotations"], t.namespace)
                == []
            ), role


def test_aks_target_runs_on_the_teams_pool(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("aks")
    (t,) = v.targets(cfg)
    assert (t.key, t.namespace, t.pool, t.link_rate_gbps) == ("training", "training", "ndh100a", 400)
    assert t.rdma_resource == rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name)
    assert (t.network, t.vf_env, t.socket_ifname) == (None, None, "eth0")
    assert t.tolerations == (
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    )


def test_aks_pools_add_one_target_per_pool() -> None:
    found = v.targets(aks_with_pools())
    assert [(t.key, t.namespace, t.prefix) for t in found] == [
        ("training", "training", "verify"),
        ("pool-ndh100a", v.POOL_NAMESPACE, "verify-ndh100a"),
        ("pool-ndh100b", v.POOL_NAMESPACE, "verify-ndh100b"),
    ]


def test_no_verify_team_no_targets(cfg_of: Callable[[str], StackConfig]) -> None:
    raw = raw_stack("onprem")
    for team in raw["teams"]:
        team.pop("verify", None)
    assert v.targets(parse_config(raw)) == []


def test_thresholds_are_fractions_of_the_link_rate(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    # 0.90 × 400 Gb/s; 0.85 × 400/8 GB/s.
    assert v.ib_min_gbps(cfg, t) == 360.0
    assert v.nccl_min_busbw_gbytes(cfg, t) == 42.5
    assert v.gbits_to_gbytes(200) == 25.0


@pytest.mark.parametrize(
    ("taint", "toleration"),
    [
        (
            "nvidia.com/gpu=present:NoSchedule",
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        ),
        ("dedicated:NoExecute", {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}),
        ("sku=gpu", {"key": "sku", "operator": "Equal", "value": "gpu"}),
    ],
)
def test_taint_to_toleration(taint: str, toleration: dict[str, str]) -> None:
    assert kube.taint_toleration(taint) == toleration


@pytest.mark.parametrize(
    ("resource", "env"),
    [("nvidia.com/sriov8001", "PCIDEVICE_NVIDIA_COM_SRIOV8001"), ("intel.com/my-vf", "PCIDEVICE_INTEL_COM_MY_VF")],
)
def test_pcidevice_env_follows_the_device_plugin(resource: str, env: str) -> None:
    assert v.pcidevice_env(resource) == env


# --------------------------------------------------------------------------------------------
# Manifests


@pytest.mark.parametrize("which", ["onprem", "aks", "aks-pools"])
def test_manifests_are_valid_kubernetes(which: str, cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = aks_with_pools() if which == "aks-pools" else cfg_of(which)
    objs = [m for _t, _r, m in all_manifests(cfg)] + [pods.pool_namespace()]
    assert objs
    for obj in objs:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


BASELINE_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}


def baseline_violations(pod: dict[str, Any]) -> list[str]:
    """Pod Security Standards, ``baseline`` (kubernetes.io/docs/concepts/security/pod-security-standards)."""
    bad = [f"{k}: true" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    bad += [f"hostPath volume {vol['name']}" for vol in pod.get("volumes", []) if "hostPath" in vol]
    psc = pod.get("securityContext", {})
    if psc.get("seccompProfile", {}).get("type") == "Unconfined":
        bad.append("pod seccomp Unconfined")
    for c in pod.get("initContainers", []) + pod["containers"]:
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            bad.append(f"{c['name']}: privileged")
        added = set(sc.get("capabilities", {}).get("add", []))
        if added - BASELINE_CAPS:
            bad.append(f"{c['name']}: adds {sorted(added - BASELINE_CAPS)}")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{c['name']}: procMount")
        if sc.get("seccompProfile", {}).get("type") == "Unconfined":
            bad.append(f"{c['name']}: seccomp Unconfined")
        if sc.get("windowsOptions", {}).get("hostProcess"):
            bad.append(f"{c['name']}: hostProcess")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            bad.append(f"{c['name']}: hostPort")
    return bad


@pytest.mark.parametrize("which", ["onprem", "aks", "aks-pools"])
def test_pods_pass_pod_security_baseline(which: str, cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = aks_with_pools() if which == "aks-pools" else cfg_of(which)
    specs = list(pod_specs(cfg))
    assert specs
    for role, pod in specs:
        assert baseline_violations(pod) == [], role
        for c in pod["containers"]:
            assert "IPC_LOCK" not in c.get("securityContext", {}).get("capabilities", {}).get("add", [])


def test_baseline_checker_catches_what_it_should() -> None:
    sc = {"privileged": True, "capabilities": {"add": ["IPC_LOCK", "CHOWN"]}}
    pod = {
        "hostNetwork": True,
        "containers": [{"name": "c", "securityContext": sc}],
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
    }
    assert baseline_violations(pod) == [
        "hostNetwork: true",
        "hostPath volume h",
        "c: privileged",
        "c: adds ['IPC_LOCK']",
    ]


def test_nccl_job_is_an_indexed_pair_on_two_nodes(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    m = verification.manifests(cfg, t, "print('bench')\n")
    job, svc = m["nccl"], m["nccl-service"]
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed",
        2,
        2,
        0,
    )
    pod = spec["template"]["spec"]
    # Headless Service named as the pods' subdomain, selecting them: <job>-0.<svc> resolves.
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"] == "verify-nccl"
    labels = spec["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= labels.items()
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "verify-nccl-0.verify-nccl"
    assert (env["WORLD_SIZE"], env["NCCL_DEBUG"], env["NCCL_SOCKET_IFNAME"]) == ("2", "INFO", "eth0")
    assert env["MIN_BUSBW_GBPS"] == "42.5" and env["VF_ENV"] == "PCIDEVICE_NVIDIA_COM_SRIOV8001"
    res = pod["containers"][0]["resources"]
    assert res["limits"][GPU] == "1" and res["limits"]["nvidia.com/sriov8001"] == "1"
    nets = json.loads(spec["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    assert nets == [{"name": "ib-vision", "namespace": "vision", "interface": "net1"}]
    assert pod["containers"][0]["image"] == f"{cfg.versions.pytorch_image}:{cfg.versions.pytorch}"
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"


def test_ib_pair_server_service_client(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    m = verification.manifests(cfg, t, "")
    server, svc, client = m["ib-server"], m["ib-service"], m["ib-client"]
    server_labels = server["spec"]["template"]["metadata"]["labels"]
    client_labels = client["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= server_labels.items()
    assert not svc["spec"]["selector"].items() <= client_labels.items()
    assert svc["spec"]["ports"][0]["port"] == ib_write_bw.PERFTEST_PORT
    cenv = {e["name"]: e["value"] for e in client["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert cenv["IB_SERVER"] == svc["metadata"]["name"] and cenv["IB_MIN_GBPS"] == "360"
    for job in (server, client):
        c = job["spec"]["template"]["spec"]["containers"][0]
        assert c["image"] == f"{cfg.versions.perftest_image}@{cfg.versions.perftest_digest}"
        assert c["resources"]["limits"] == {"cpu": "2", "memory": "4Gi", "nvidia.com/sriov8001": "1"}
        assert "k8s.v1.cni.cncf.io/networks" in job["spec"]["template"]["metadata"]["annotations"]
    assert "--report_gbits" in ib_write_bw.IB_SERVER_SH and "--report_gbits" in ib_write_bw.IB_CLIENT_SH


def test_aks_pods_tolerate_and_select_their_pool(cfg_of: Callable[[str], StackConfig]) -> None:
    for role, pod in pod_specs(cfg_of("aks")):
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": AKS_POOL_LABEL, "operator": "In", "values": ["ndh100a"]}]}]
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu", role
        c = pod["containers"][0]
        assert "rdma/hcashared" in c["resources"]["limits"]
        env = {e["name"]: e["value"] for e in c["env"]}
        assert "VF_ENV" not in env
        if role == "nccl":
            assert env["NCCL_SOCKET_IFNAME"] == "eth0"


def test_config_map_carries_the_benchmark_verbatim(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    source = verification.BENCH_SCRIPT.read_text()
    cm = verification.manifests(cfg, t, source)["scripts"]
    assert cm["data"]["allreduce_bench.py"] == source
    assert set(cm["data"]) == {"allreduce_bench.py", "rdma-device.sh", "ib-server.sh", "ib-client.sh", "nccl.sh"}


def test_a_script_change_changes_the_pod_template(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    a, b = verification.manifests(cfg, t, "a"), verification.manifests(cfg, t, "b")
    assert a["nccl"]["spec"]["template"] != b["nccl"]["spec"]["template"]  # → Pulumi replaces the Job
    assert a["nccl-service"] == b["nccl-service"]


def test_other_teams_leave_a_targets_objects_unchanged() -> None:
    raw = raw_stack("onprem")
    before = {m["metadata"]["name"]: m for t, _r, m in all_manifests(parse_config(raw)) if t.key == "vision"}
    raw["teams"][1]["verify"] = True  # language
    raw["teams"].reverse()
    after_cfg = parse_config(raw)
    assert [t.key for t in v.targets(after_cfg)] == ["language", "vision"]
    after = {m["metadata"]["name"]: m for t, _r, m in all_manifests(after_cfg) if t.key == "vision"}
    assert after == before


def test_the_three_nccl_runs() -> None:
    script = nccl.nccl_sh()
    assert "run gdr 29500 NCCL_NET_GDR_LEVEL=SYS NCCL_NET_GDR_READ=1 --" in script
    assert "run rdma 29501 NCCL_NET_GDR_LEVEL=LOC --" in script
    assert "run tcp 29502 NCCL_IB_DISABLE=1 --" in script
    # TCP runs at a few GB/s: all_reduce only, up to 256 MiB; the RDMA runs take the bench defaults (to 1 GiB).
    (tcp,) = [line for line in script.splitlines() if line.startswith("run tcp")]
    assert tcp.endswith(f"--ops all_reduce --max-bytes {256 * 1024 * 1024}")
    assert "--max-bytes" not in next(line for line in script.splitlines() if line.startswith("run gdr"))
    # Only the GPUDirect run is judged against the threshold and must show GDRDMA.
    judged = [line for line in script.splitlines() if "--min-busbw-gbps" in line]
    assert len(judged) == 1 and judged[0].startswith("run gdr") and "--require-gdrdma" in judged[0]


# --------------------------------------------------------------------------------------------
# The scripts, run with bash against fake tools and a fake sysfs


needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def _stage(tmp_path: Path, tools: dict[str, str]) -> tuple[Path, dict[str, str]]:
    scripts = tmp_path / "scripts"
    bindir = tmp_path / "bin"
    scripts.mkdir()
    bindir.mkdir()
    for name, text in proof_scripts.scripts("").items():
        (scripts / name).write_text(text.replace(pods.SCRIPTS_DIR, str(scripts)))
    for name, text in tools.items():
        tool = bindir / name
        tool.write_text("#!/bin/bash\n" + text)
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "SYSFS": str(tmp_path / "sys"), "HOME": str(tmp_path)}
    return scripts, env


def _sriov_sysfs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sys/bus/pci/devices/0000:3b:00.2/infiniband/mlx5_12").mkdir(parents=True)
    return {"VF_ENV": "PCIDEVICE_NVIDIA_COM_SRIOV8001", "PCIDEVICE_NVIDIA_COM_SRIOV8001": "0000:3b:00.2,0000:3c:00.2"}


PERFTEST_OUT = """\
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8388608    5000             {bw:.2f}             {bw:.2f}              0.005848
---------------------------------------------------------------------------------------
"""


def _fake_perftest(bw: float) -> str:
    out = PERFTEST_OUT.format(bw=bw)
    return f'[ "$2" = mlx5_12 ] || {{ echo "wrong device $2" >&2; exit 3; }}\ncat <<"EOF"\n{out}EOF\n'


@needs_bash
@pytest.mark.parametrize(("bw", "rc", "passed"), [(392.4, 0, True), (300.0, 1, False)])
def test_ib_client_judges_the_bw_average(tmp_path: Path, bw: float, rc: int, passed: bool) -> None:
    scripts, env = _stage(tmp_path, {"ib_write_bw": _fake_perftest(bw)})
    env |= _sriov_sysfs(tmp_path) | {"IB_SERVER": "verify-ib-server", "IB_MIN_GBPS": "360", "IB_ATTEMPTS": "1"}
    done = subprocess.run([BASH or "bash", str(scripts / "ib-client.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == rc, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("IB_WRITE_BW_RESULT ")]
    result = json.loads(line.split(" ", 1)[1])
    assert result == {"device": "mlx5_12", "bw_average_gbps": bw, "min_gbps": 360, "passed": passed}


@needs_bash
def test_rdma_device_without_sriov_takes_the_first_active_ib_port(tmp_path: Path) -> None:
    scripts, env = _stage(tmp_path, {})
    for dev, layer, state in [
        ("mlx5_an0", "Ethernet", "4: ACTIVE"),
        ("mlx5_ib0", "InfiniBand", "1: DOWN"),
        ("mlx5_ib1", "InfiniBand", "4: ACTIVE"),
    ]:
        port = tmp_path / "sys/class/infiniband" / dev / "ports/1"
        port.mkdir(parents=True)
        (port / "link_layer").write_text(layer + "\n")
        (port / "state").write_text(state + "\n")
    cmd = f". {scripts}/rdma-device.sh && rdma_device"
    done = subprocess.run([BASH or "bash", "-c", cmd], env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "mlx5_ib1"), done.stderr


@needs_bash
def test_rdma_device_fails_clearly_without_the_vf(tmp_path: Path) -> None:
    scripts, env = _stage(tmp_path, {})
    env["VF_ENV"] = "PCIDEVICE_NVIDIA_COM_SRIOV8001"
    done = subprocess.run(
        [BASH or "bash", "-c", f". {scripts}/rdma-device.sh && rdma_device"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and "did not get the partition's SR-IOV resource" in done.stderr


FAKE_PYTHON = """\
label=""; for a in "$@"; do [ "$prev" = --label ] && label="$a"; prev="$a"; done
gdr="${NCCL_NET_GDR_LEVEL:-} ${NCCL_NET_GDR_READ:-}"
echo "$label $gdr ${NCCL_IB_DISABLE:-} $MASTER_PORT $NCCL_IB_HCA" >> "$HOME/calls"
echo "NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0/GDRDMA" > "${NCCL_DEBUG_FILE//%h.%p/x.1}"
[ "$label" != "${FAIL_RUN:-}" ]
"""


@needs_bash
@pytest.mark.parametrize(("fail", "rc"), [("", 0), ("tcp", 1), ("gdr", 1)])
def test_nccl_script_runs_three_times_and_fails_if_any_run_fails(tmp_path: Path, fail: str, rc: int) -> None:
    scripts, env = _stage(tmp_path, {"python3": FAKE_PYTHON})
    env |= _sriov_sysfs(tmp_path) | {"JOB_COMPLETION_INDEX": "0", "MIN_BUSBW_GBPS": "42.5", "FAIL_RUN": fail}
    done = subprocess.run([BASH or "bash", str(scripts / "nccl.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == rc, done.stdout + done.stderr
    calls = (tmp_path / "calls").read_text().split("\n")
    assert calls[:3] == ["gdr SYS 1  29500 =mlx5_12", "rdma LOC   29501 =mlx5_12", "tcp   1 29502 =mlx5_12"]
    runs = [json.loads(x.split(" ", 1)[1]) for x in done.stdout.splitlines() if x.startswith("VERIFY_RUN ")]
    assert [(r["label"], r["rc"] != 0) for r in runs] == [(x, x == fail) for x in ("gdr", "rdma", "tcp")]
    assert "via NET/IB/0/GDRDMA" in done.stdout  # the NCCL log is copied into the pod log


@needs_bash
def test_scripts_parse(tmp_path: Path) -> None:
    for name, text in proof_scripts.scripts("").items():
        if name.endswith(".sh"):
            done = subprocess.run([BASH or "bash", "-n"], input=text, capture_output=True, text=True)
            assert done.returncode == 0, (name, done.stderr)


# --------------------------------------------------------------------------------------------
# Plan


def test_plan_has_the_proofs_as_children_of_verification(run_of: Callable[[str], Run]) -> None:
    run = run_of("onprem")
    comp = run.named("gpuaas-verification")
    assert comp.type == "gpuaas:index:Verification"
    children = {r.name: r for r in run.records if r.parent == comp.urn and "-isolation-" not in r.name}
    assert sorted(children) == sorted(
        f"gpuaas-verification-vision-{role}"
        for role in ("scripts", "ib-service", "ib-server", "ib-client", "nccl-service", "nccl")
    )
    for r in children.values():
        assert r.inputs["metadata"]["namespace"] == "vision"
        assert r.inputs["metadata"]["name"].startswith("verify-")
    nccl = children["gpuaas-verification-vision-nccl"]
    assert nccl.type == "kubernetes:batch/v1:Job"
    assert nccl.inputs["spec"]["completionMode"] == "Indexed"
    assert run.outputs["verificationJobs"] == {
        "vision": {
            "ib_write_bw": "vision/verify-ib-client",
            "nccl": "vision/verify-nccl",
            **{f"isolation:{s}": f"vision/isolation-vision-to-{s}" for s in OTHERS},
        }
    }
    probes = {r.name: r for r in run.records if r.name.startswith("gpuaas-verification-isolation-")}
    assert sorted(probes) == sorted(
        f"gpuaas-verification-isolation-vision-to-{s}-{role}"
        for s in OTHERS
        for role in ("client", "server", "service")
    )
    assert {r.inputs["metadata"]["namespace"] for r in probes.values()} == {"vision", *OTHERS}
    assert not any(r.type == "kubernetes:batch/v1:CronJob" for r in run.records)  # burn-in is off by default


# --------------------------------------------------------------------------------------------
# Negative proofs: isolation probes


def _with(which: str, **verification: Any) -> StackConfig:
    raw = raw_stack(which)
    raw["verification"] = {**raw.get("verification", {}), **verification}
    return parse_config(raw)


#: The onprem sample's teams other than vision (its one verifying team), each in its own partition.
OTHERS = ("inference", "language", "platform-qa", "research", "speech")


def test_default_probes_go_from_each_verifying_target_into_every_other_partition(
    cfg_of: Callable[[str], StackConfig],
) -> None:
    probes = isolation.isolation_probes(cfg_of("onprem"))
    assert [(p.client.key, p.server.key) for p in probes] == [("vision", s) for s in OTHERS]
    p = probes[0]
    assert (p.client_domain, p.server_domain) == ("P_Key 0x0001", "P_Key 0x0005")
    # The server is a team without verify: its target exists for the probe alone.
    assert (p.server.namespace, p.server.rdma_resource, p.server.network) == (
        "inference",
        "nvidia.com/sriov8005",
        "ib-inference",
    )
    (a,) = isolation.isolation_probes(cfg_of("aks"))
    assert (a.client.key, a.server.key, a.server.pool) == ("training", "finetune", "ndh100b")


def test_aks_pools_probe_each_pool_against_every_other_pool() -> None:
    got = [(p.client.key, p.server.key) for p in isolation.isolation_probes(aks_with_pools())]
    assert got == [("training", "finetune"), ("pool-ndh100a", "pool-ndh100b"), ("pool-ndh100b", "pool-ndh100a")]


def test_configured_pairs_replace_the_default_and_an_empty_list_runs_none() -> None:
    cfg = _with(
        "onprem", isolationPairs=[{"client": "vision", "server": "speech"}, {"client": "language", "server": "vision"}]
    )
    assert [(p.client.key, p.server.key) for p in isolation.isolation_probes(cfg)] == [
        ("vision", "speech"),
        ("language", "vision"),
    ]
    assert isolation.isolation_probes(_with("onprem", isolationPairs=[])) == []


def test_probes_do_not_move_when_teams_are_reordered() -> None:
    raw = raw_stack("onprem")
    before = [(p.client.key, p.server.key) for p in isolation.isolation_probes(parse_config(raw))]
    raw["teams"].reverse()
    assert [(p.client.key, p.server.key) for p in isolation.isolation_probes(parse_config(raw))] == before


def test_default_probe_skips_a_team_whose_quota_admits_no_rdma_device() -> None:
    raw = raw_stack("onprem")
    inference = next(t for t in raw["teams"] if t["name"] == "inference")
    inference["quota"]["rdma"] = 0
    got = [(p.client.key, p.server.key) for p in isolation.isolation_probes(parse_config(raw))]
    assert got == [("vision", s) for s in OTHERS if s != "inference"]


def test_one_partition_only_has_nothing_to_probe() -> None:
    raw = raw_stack("aks")
    raw["teams"] = [t for t in raw["teams"] if t["name"] == "training"]
    assert isolation.isolation_probes(parse_config(raw)) == []


def test_probe_pods_each_in_their_own_namespace_with_their_own_network(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    p = isolation.isolation_probes(cfg)[0]  # vision into inference
    m = isolation.probe_manifests(cfg, p)
    client, server, svc = m["client"], m["server"], m["service"]
    for job, t in ((client, p.client), (server, p.server)):
        tmpl = job["spec"]["template"]
        assert job["metadata"]["namespace"] == t.namespace
        nets = json.loads(tmpl["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
        assert nets == [{"name": t.network, "namespace": t.namespace, "interface": "net1"}]
        assert tmpl["metadata"]["annotations"] == pods.network_annotation(t)  # the one helper
        assert network_admission.networks_violations(tmpl["metadata"]["annotations"], t.namespace) == []
        c = tmpl["spec"]["containers"][0]
        assert c["resources"]["limits"] == {"cpu": "1", "memory": "1Gi", t.rdma_resource: "1"}
        assert c["image"] == v.perftest_image(cfg)
        assert job["spec"]["backoffLimit"] == 0 and job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        (apart,) = tmpl["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert apart["namespaces"] == ["inference", "vision"]
        assert apart["labelSelector"]["matchLabels"].items() <= tmpl["metadata"]["labels"].items()
    # Its twin: the client asking for the server's network (the cross-partition attach the probe must not
    # need) is what admission refuses in the client's namespace.
    assert network_admission.networks_violations(pods.network_annotation(p.server), p.client.namespace) != []
    assert client["spec"]["template"]["spec"]["containers"][0]["command"][2] == isolation.ISOLATION_CLIENT_SH
    assert server["spec"]["template"]["spec"]["containers"][0]["command"][2] == isolation.ISOLATION_SERVER_SH
    # The client learns the server's address over the pod network, through the server's Service.
    assert svc["metadata"]["namespace"] == "inference"
    assert svc["spec"]["selector"].items() <= server["spec"]["template"]["metadata"]["labels"].items()
    assert not svc["spec"]["selector"].items() <= client["spec"]["template"]["metadata"]["labels"].items()
    env = {e["name"]: e["value"] for e in client["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ISO_SERVER"] == "isolation-vision-to-inference-server.inference.svc"
    assert (env["ISO_CLIENT"], env["ISO_TARGET"], env["VF_ENV"]) == (
        "vision",
        "inference",
        "PCIDEVICE_NVIDIA_COM_SRIOV8001",
    )
    assert isolation.probe_job_names(p) == {
        "client": "vision/isolation-vision-to-inference",
        "server": "inference/isolation-vision-to-inference-server",
    }


@pytest.mark.parametrize("which", ["onprem", "aks", "aks-pools"])
def test_probe_objects_are_valid_kubernetes_and_baseline(which: str, cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = aks_with_pools() if which == "aks-pools" else cfg_of(which)
    probes = isolation.isolation_probes(cfg)
    assert probes
    for p in probes:
        for obj in isolation.probe_manifests(cfg, p).values():
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
            if obj["kind"] == "Job":
                assert baseline_violations(obj["spec"]["template"]["spec"]) == []


def test_aks_probe_pods_run_on_their_own_pools(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("aks")
    (p,) = isolation.isolation_probes(cfg)
    for role, pool in (("client", "ndh100a"), ("server", "ndh100b")):
        pod = isolation.probe_manifests(cfg, p)[role]["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": AKS_POOL_LABEL, "operator": "In", "values": [pool]}]}]
        assert "k8s.v1.cni.cncf.io/networks" not in isolation.probe_manifests(cfg, p)[role]["spec"]["template"][
            "metadata"
        ].get("annotations", {})


def test_perftest_is_pinned_by_digest_and_a_mirror_tag_is_kept(cfg_of: Callable[[str], StackConfig]) -> None:
    # Upstream publishes only `latest` (issue 11 item 4: the old default tag v1.0.0 never existed).
    cfg = cfg_of("onprem")
    assert v.perftest_image(cfg) == f"ghcr.io/azure/aks-rdma-infiniband/ibtools@{cfg.versions.perftest_digest}"
    assert cfg.versions.perftest is None
    raw = raw_stack("onprem")
    raw["versions"] = {"perftestImage": "registry.example.com/gpuaas/ibtools", "perftest": "20260714"}
    mirrored = parse_config(raw)
    assert v.perftest_image(mirrored) == f"registry.example.com/gpuaas/ibtools:20260714@{cfg.versions.perftest_digest}"
    raw["versions"]["perftestDigest"] = None
    assert v.perftest_image(parse_config(raw)) == "registry.example.com/gpuaas/ibtools:20260714"


def test_long_names_are_shortened_to_a_label() -> None:
    name = pods.bounded("isolation-" + "a" * 40 + "-to-" + "b" * 40)
    assert len(name) <= 63 and name.startswith("isolation-aaaa") and not name.endswith("-")
    assert pods.bounded("isolation-x-to-y") == "isolation-x-to-y"
    assert pods.bounded("a" * 70) != pods.bounded("a" * 71)


# The scripts against fake perftest runs: what each outcome prints and exits with.

PROBE_EXCHANGE = """\
 local address: LID 0x2f QPN 0x0127 PSN 0x8a3c1 RKey 0x1fff00 VAddr 0x007f3c2a000000
 remote address: LID 0x31 QPN 0x0129 PSN 0x51e0f RKey 0x1fff00 VAddr 0x007f8a44000000
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
"""
PROBE_BLOCKED = (
    PROBE_EXCHANGE
    + """\
 Completion with error at client
 Failed status 12: wr_id 0 syndrom 0x81
scnt=100, ccnt=0
"""
)
PROBE_LEAK = PROBE_EXCHANGE + " 65536      100              97.51              97.44              0.185861\n"
PROBE_OTHER = PROBE_EXCHANGE + " Completion with error at client\n Failed status 10: wr_id 0 syndrom 0x88\n"
PROBE_UNREACHABLE = " Couldn't connect to isolation-vision-to-inference-server.inference.svc:18515\n"


def _fake_probe_tool(out: str, rc: int) -> str:
    return f'cat <<"EOF"\n{out}EOF\nexit {rc}\n'


def _run_probe(tmp_path: Path, out: str, rc: int) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    scripts, env = _stage(tmp_path, {"ib_write_bw": _fake_probe_tool(out, rc), "sleep": "exit 0\n"})
    (scripts / "probe.sh").write_text(isolation.ISOLATION_CLIENT_SH)
    env |= _sriov_sysfs(tmp_path) | {"ISO_CLIENT": "vision", "ISO_TARGET": "inference", "ISO_ATTEMPTS": "2"}
    env["ISO_SERVER"] = "isolation-vision-to-inference-server.inference.svc"
    done = subprocess.run([BASH or "bash", str(scripts / "probe.sh")], env=env, capture_output=True, text=True)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("ISOLATION_RESULT ")]
    return done, json.loads(line.split(" ", 1)[1])


@needs_bash
def test_probe_passes_only_on_the_partition_error(tmp_path: Path) -> None:
    done, result = _run_probe(tmp_path, PROBE_BLOCKED, 1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (result["verdict"], result["passed"], result["device"]) == ("blocked", True, "mlx5_12")
    assert result["reason"].startswith("Failed status 12: wr_id 0 syndrom 0x81 (IBV_WC_RETRY_EXC_ERR")
    assert "Failed status 12" in done.stdout  # the error itself is in the log


@needs_bash
@pytest.mark.parametrize(
    ("out", "rc", "verdict", "said"),
    [
        (PROBE_LEAK, 0, "leak", "RDMA writes completed"),
        (PROBE_LEAK, 1, "leak", "RDMA writes completed"),  # a result row is enough, whatever the exit status
        (PROBE_OTHER, 1, "inconclusive", "not with the partition error: Completion with error"),
        (PROBE_UNREACHABLE, 1, "inconclusive", "never answered over the pod network"),
    ],
)
def test_probe_fails_on_anything_else(tmp_path: Path, out: str, rc: int, verdict: str, said: str) -> None:
    done, result = _run_probe(tmp_path, out, rc)
    assert done.returncode == 1
    assert (result["verdict"], result["passed"]) == (verdict, False)
    assert said in result["reason"]
    assert ("ISOLATION BROKEN" in done.stderr) == (verdict == "leak")


@needs_bash
@pytest.mark.parametrize(("rc", "exit_code", "completed"), [(1, 0, False), (0, 1, True)])
def test_probe_server_fails_loudly_when_the_test_completed(
    tmp_path: Path, rc: int, exit_code: int, completed: bool
) -> None:
    scripts, env = _stage(tmp_path, {"ib_write_bw": _fake_probe_tool(PROBE_EXCHANGE, rc)})
    (scripts / "server.sh").write_text(isolation.ISOLATION_SERVER_SH)
    env |= _sriov_sysfs(tmp_path) | {"ISO_CLIENT": "vision"}
    done = subprocess.run([BASH or "bash", str(scripts / "server.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == exit_code, done.stdout + done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("ISOLATION_SERVER ")]
    assert json.loads(line.split(" ", 1)[1])["completed"] is completed


# --------------------------------------------------------------------------------------------
# Burn-in


def test_burn_in_is_off_by_default(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    (t,) = v.targets(cfg)
    assert burn_in.burn_in_manifests(cfg, t, "", burn_in.burn_in_groups(cfg, t)) == {}


def test_burn_in_runs_the_nccl_proof_per_node_group_at_the_lowest_priority() -> None:
    cfg = _with("onprem", burnIn={"enabled": True, "schedule": "0 2 * * 6"})
    (t,) = v.targets(cfg)
    groups = [g for g, _l, _v in burn_in.burn_in_groups(cfg, t)]
    assert groups and all(sum(n.node_group == g for n in cfg.platform.nodes) >= 2 for g in groups)  # type: ignore[union-attr]
    m = burn_in.burn_in_manifests(cfg, t, "src", burn_in.burn_in_groups(cfg, t))
    g = groups[0]
    cron, svc = m[f"burn-in-{g}"], m[f"burn-in-{g}-service"]
    assert cron["spec"]["schedule"] == "0 2 * * 6" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == burn_in.BURN_IN_PRIORITY_CLASS
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpuaas.io/node-group", "operator": "In", "values": [g]}]}]
    assert pod["subdomain"] == svc["metadata"]["name"] and svc["spec"]["clusterIP"] == "None"
    labels = cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    # Not selected by the one-off proof's Service, and not paired with its pods.
    assert not nccl.nccl_service(t)["spec"]["selector"].items() <= labels.items()
    env = pod["containers"][0]["env"]
    assert env[0] == {
        "name": "JOB_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}},
    }
    assert {"name": "MASTER_ADDR", "value": f"$(JOB_NAME)-0.{svc['metadata']['name']}"} in env
    assert pod["containers"][0]["command"] == ["/bin/bash", f"{pods.SCRIPTS_DIR}/nccl.sh"]  # the same proof
    pc = burn_in.burn_in_priority_class(cfg)
    assert (pc["value"], pc["preemptionPolicy"], pc["globalDefault"]) == (-1000, "Never", False)


@pytest.mark.parametrize("strategy", ["mixed", "single"])
def test_burn_in_runs_only_on_groups_that_offer_the_whole_gpu_its_pods_ask_for(strategy: str) -> None:
    """The burn-in is the NCCL pair, one ``nvidia.com/gpu`` per pod: a MIG group (mixed strategy:
    its GPUs are advertised as ``nvidia.com/mig-<profile>`` only) or a time-sliced group (renamed to
    ``nvidia.com/gpu.shared``) has no node that can hold it, however many nodes it has (found on the
    simulated fleet: such a CronJob's pods stay Pending). With ``single`` a MIG group advertises
    ``nvidia.com/gpu`` and may run it."""
    raw = raw_stack("onprem")
    raw["verification"] = {"burnIn": {"enabled": True}}
    raw["gpuOperator"]["migStrategy"] = strategy
    raw["platform"]["nodes"] += [
        {"name": "gpu-node-07", "id": 7, "nodeGroup": "h100-mig"},
        {"name": "gpu-node-08", "id": 8, "nodeGroup": "h100-shared"},
    ]
    if strategy == "single":  # single needs one profile per GPU
        raw["platform"]["nodeGroups"][0]["mig"] = {"layout": "all-1g.10gb"}
        for team in raw["teams"]:
            if "mig" in team["quota"]:
                team["quota"]["mig"] = {}
                team["quota"]["gpus"] = 0
    cfg = parse_config(raw)
    (t,) = v.targets(cfg)
    groups = sorted(g for g, _l, _v in burn_in.burn_in_groups(cfg, t))
    assert groups == (["h100-full"] if strategy == "mixed" else ["h100-full", "h100-mig"])


@pytest.mark.parametrize("which", ["onprem", "aks-pools"])
def test_burn_in_objects_are_valid_kubernetes(which: str) -> None:
    raw = raw_stack("aks" if which == "aks-pools" else "onprem")
    raw["verification"] = {"burnIn": {"enabled": True}} | ({"aksPools": True} if which == "aks-pools" else {})
    cfg = parse_config(raw)
    objs = [burn_in.burn_in_priority_class(cfg)]
    for t in v.targets(cfg):
        objs += list(burn_in.burn_in_manifests(cfg, t, "src", burn_in.burn_in_groups(cfg, t)).values())
    assert len(objs) > 1
    for obj in objs:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    aks_groups = [burn_in.burn_in_groups(cfg, t) for t in v.targets(cfg)]
    if which == "aks-pools":
        assert aks_groups[1] == [("ndh100a", AKS_POOL_LABEL, "ndh100a")]


def test_burn_in_in_the_plan() -> None:
    raw = raw_stack("onprem")
    raw["verification"] = {"burnIn": {"enabled": True}}
    run = run_program("onprem", config=qualified(raw))
    kinds = {r.type for r in run.records if r.name.startswith("gpuaas-verification")}
    assert {"kubernetes:batch/v1:CronJob", "kubernetes:scheduling.k8s.io/v1:PriorityClass"} <= kinds


@pytest.mark.parametrize("elastic", [True, False])
def test_isolation_probe_jobs_go_through_their_own_teams_queue_when_elastic(elastic: bool) -> None:
    """Each end of a probe is a Job in its own team's namespace: elastic, it names that team's
    LocalQueue (the server's is B's), or Kueue would not count it and the admission would treat
    it as outside the queue; not elastic, there is no Kueue and no label."""
    from components.queueing.admission import QUEUE_LABEL

    raw = raw_stack("onprem")
    raw.setdefault("queues", {})["elastic"] = elastic
    cfg = parse_config(raw)
    probes = isolation.isolation_probes(cfg)
    assert probes
    for p in probes:
        objs = isolation.probe_manifests(cfg, p)
        for role, t in (("server", p.server), ("client", p.client)):
            labels = objs[role]["metadata"]["labels"]
            assert objs[role]["metadata"]["namespace"] == t.namespace
            if elastic:
                assert t.queue is not None and labels[QUEUE_LABEL] == t.queue, (p.id, role)
            else:
                assert QUEUE_LABEL not in labels, (p.id, role)
        assert p.server.queue != p.client.queue or not elastic
