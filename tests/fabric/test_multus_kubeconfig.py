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
from components.plan.offline import Run
from tests.network_cases import K8S_VERSION, aks, custom, defaults

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed: the refresher script cannot run here")


def _run_once(tmp: Path, token: str, ca: bytes = b"-----BEGIN CERTIFICATE-----\nfake\n") -> Path:
    sa = tmp / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(ca)
    out = tmp / "host-cni" / multus.KUBECONFIG_IN_CONF_DIR
    env = {
        "PATH": os.environ["PATH"],
        "SA_DIR": str(sa),
        "KUBECONFIG_FILE": str(out),
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
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
    assert cluster["cluster"]["server"] == "https://[10.96.0.1]:443", "the thin entrypoint's server form"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]).startswith(b"-----BEGIN")
    (user,) = doc["users"]
    assert user["user"]["token"] == "token-1"
    assert oct(out.stat().st_mode & 0o777) == "0o600", "a token: readable by root only, like Multus' own"


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
    ds = multus_kubeconfig.refresher(cfg)
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
        == multus.config(cfg, cfg.onprem.multus)["kubeconfig"]
        == "/var/lib/cni/conf/multus.d/multus.kubeconfig"
    )
    assert pod["serviceAccountName"] == "multus", "the operator's Multus ServiceAccount and its ClusterRole"
    assert "automountServiceAccountToken" not in pod, "the projected token is the point"
    assert pod["nodeSelector"] == dict(cfg.network.node_selector)
    assert container["command"][-1] == multus_kubeconfig.SCRIPT
    assert ds["metadata"]["namespace"] == cfg.network.namespace


def test_only_where_gpuaas_writes_the_multus_config(run_of: Callable[[str], Run]) -> None:
    assert multus_kubeconfig.refresher(defaults()) is not None
    assert multus_kubeconfig.refresher(aks()) is None
    run = run_of("onprem")
    rec = run.named("gpuaas-nic-cluster-policy-multus-kubeconfig")
    assert run.named("gpuaas-nic-cluster-policy-policy").urn in rec.dependencies
    assert not any(r.name.endswith("-multus-kubeconfig") for r in run_of("aks").records)
