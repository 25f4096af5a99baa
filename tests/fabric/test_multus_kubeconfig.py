"""Multus' kubeconfig is refreshed when the token rotates (issue 11, item 11).

The refresher's script is run for real with bash, against a fake service-account directory and
a fake host CNI directory: it writes a kubeconfig the thin plugin can read, rewrites it when the
token or CA changes, and leaves it alone otherwise.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from components.fabric import multus, multus_kubeconfig
from components.k8s import Manifest
from components.model.config import StackConfig
from components.plan.offline import Run
from tests.network_cases import K8S_VERSION, aks, custom, defaults

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed: the refresher script cannot run here")


def _refresher(cfg: StackConfig) -> Manifest | None:
    """The refresher of ``cfg``: on-prem with ``platform.multus`` only."""
    return multus_kubeconfig.refresher(cfg.network, cfg.versions, cfg.onprem.multus if cfg.onprem else None)


def _run_once(
    tmp: Path, token: str, ca: bytes = b"-----BEGIN CERTIFICATE-----\nfake\n", host: str = "10.96.0.1"
) -> Path:
    sa = tmp / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(ca)
    out = tmp / "host-cni" / multus.KUBECONFIG_IN_CONF_DIR
    env = {
        "PATH": os.environ["PATH"],
        "SA_DIR": str(sa),
        "KUBECONFIG_FILE": str(out),
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": "443",
        "ONCE": "1",
    }
    assert BASH is not None
    subprocess.run([BASH, "-c", multus_kubeconfig.SCRIPT], env=env, check=True, capture_output=True, timeout=30)
    return out


def test_writes_the_kubeconfig_multus_reads(tmp_path: Path) -> None:
    out = _run_once(tmp_path, "token-1")
    doc = yaml.safe_load(out.read_text())
    assert doc["current-context"] == "multus-context"
    (cluster,) = doc["clusters"]
    assert cluster["cluster"]["server"] == "https://10.96.0.1:443", "net.JoinHostPort: no brackets around IPv4"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]).startswith(b"-----BEGIN")
    (user,) = doc["users"]
    assert user["user"]["token"] == "token-1"
    assert oct(out.stat().st_mode & 0o777) == "0o600", "a token: readable by root only, like Multus' own"


@pytest.mark.parametrize(
    ("host", "server"),
    [
        ("10.96.0.1", "https://10.96.0.1:443"),
        ("172.20.0.1", "https://172.20.0.1:443"),
        ("fd00:10:96::1", "https://[fd00:10:96::1]:443"),
        ("2001:db8::a", "https://[2001:db8::a]:443"),
    ],
)
def test_the_server_is_joined_as_go_joins_host_and_port(tmp_path: Path, host: str, server: str) -> None:
    """Go's net.JoinHostPort brackets a host only when it holds a colon; net/url refuses a
    bracketed IPv4 address ("invalid IP-literal", Go >= 1.24.8 / 1.25.2), and Multus' client with it.
    Multus' own client code loads these files in
    tests/e2e/test_multus_reads_the_api_with_the_refreshed_kubeconfig.py."""
    doc = yaml.safe_load(_run_once(tmp_path, "t", host=host).read_text())
    assert doc["clusters"][0]["cluster"]["server"] == server


def test_a_rotated_token_is_written_an_unchanged_one_is_not(tmp_path: Path) -> None:
    out = _run_once(tmp_path, "token-1")
    inode = out.stat().st_ino
    _run_once(tmp_path, "token-1")
    assert out.stat().st_ino == inode, "nothing changed: the file is not replaced"
    _run_once(tmp_path, "token-2")
    assert yaml.safe_load(out.read_text())["users"][0]["user"]["token"] == "token-2"
    assert out.stat().st_ino != inode, "replaced by rename (atomic for a concurrent CNI call)"
    _run_once(tmp_path, "token-2", ca=b"-----BEGIN CERTIFICATE-----\nrotated\n")
    ca = yaml.safe_load(out.read_text())["clusters"][0]["cluster"]["certificate-authority-data"]
    assert base64.b64decode(ca).endswith(b"rotated\n")
    assert sorted(p.name for p in out.parent.iterdir()) == ["multus.kubeconfig"], "no temp file left"


def test_overwrites_a_stale_file_from_the_entrypoint(tmp_path: Path) -> None:
    """The thin entrypoint's file, written once at its start, is replaced by a current one."""
    out = tmp_path / "host-cni" / multus.KUBECONFIG_IN_CONF_DIR
    out.parent.mkdir(parents=True)
    out.write_text('users:\n- name: multus\n  user:\n    token: "expired"\n')
    _run_once(tmp_path, "fresh")
    assert yaml.safe_load(out.read_text())["users"][0]["user"]["token"] == "fresh"


def test_daemonset_writes_where_multus_config_points() -> None:
    cfg = custom()
    ds = _refresher(cfg)
    assert ds is not None and cfg.onprem is not None and cfg.onprem.multus is not None
    kubernetes_validate.validate(ds, K8S_VERSION, strict=True)
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    host_path = volume["hostPath"]["path"] + env["KUBECONFIG_FILE"].removeprefix(mount["mountPath"])
    assert (
        host_path
        == multus.config(cfg.network.namespace, cfg.onprem.multus)["kubeconfig"]
        == "/var/lib/cni/conf/multus.d/multus.kubeconfig"
    )
    assert pod["serviceAccountName"] == "multus", "the operator's Multus ServiceAccount and its ClusterRole"
    assert pod["hostNetwork"] is True, "no CNI ADD for its own sandbox"
    assert "automountServiceAccountToken" not in pod, "the projected token is the point"
    assert pod["nodeSelector"] == dict(cfg.network.node_selector)
    assert container["command"][-1] == multus_kubeconfig.SCRIPT
    assert ds["metadata"]["namespace"] == cfg.network.namespace


def test_only_where_gpuaas_writes_the_multus_config(run_of: Callable[[str], Run]) -> None:
    assert _refresher(defaults()) is not None
    assert _refresher(aks()) is None
    run = run_of("onprem")
    rec = run.named("gpuaas-nic-cluster-policy-multus-kubeconfig")
    assert run.named("gpuaas-nic-cluster-policy-policy").urn in rec.dependencies
    assert not any(r.name.endswith("-multus-kubeconfig") for r in run_of("aks").records)


def test_a_rollout_of_the_refresher_needs_no_cni_add() -> None:
    """The kubelet runs no CNI ADD for a hostNetwork pod (the CRI runtime gives it the node's
    network namespace), and nothing else in the pod needs a pod network: no init container, no
    volume but the host's CNI directory (and the projected token the kubelet adds), no port.
    So while Multus' kubeconfig is broken — every CNI ADD on the node then fails — the refresher
    still starts and repairs it. tests/e2e/test_multus_thin_plugin_attaches_the_admitted_pod.py
    shows that repair with the real thin plugin: its ADD fails on the old file, the refresher's
    script (which is all the pod runs) rewrites it, the same ADD succeeds."""
    ds = _refresher(custom())
    assert ds is not None
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert "initContainers" not in pod and "ephemeralContainers" not in pod
    assert [sorted(v) for v in pod["volumes"]] == [["hostPath", "name"]]
    (container,) = pod["containers"]
    assert "ports" not in container and "readinessProbe" not in container and "livenessProbe" not in container
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
