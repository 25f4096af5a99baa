"""One Kueue manager process on loopback: what both ways the e2e runs Kueue share.

:class:`e2e.kueue.KueueManager` runs the manager with the Configuration the real chart rendered
(its webhooks registered with the API server); the tests' ``Kueue`` (tests/e2e/kueue_manager.py)
with the Configuration gpuaas renders, against a bare control plane. Either way the process is
the pinned ``kueue`` binary (tool set ``kueue``) with a Configuration file and a kubeconfig of
the chart's ServiceAccount; its ports are loopback ones picked per run; the kubelet's part is
played by copying the Secret Kueue's cert rotator fills into the ``certDir`` (on a cluster that
Secret is a volume of the manager's pod, and the rotator waits for its files before the manager
reports ready: cert-controller rotator.go ``ensureCertsMounted``).
"""

from __future__ import annotations

import base64
import subprocess
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from components.queueing import queues
from e2e.kube import Kube
from e2e.processes import die_with_parent, free_port, log_tail

#: The Secret the chart ships empty and Kueue's cert rotator fills (``kueue.fullname`` of release ``kueue``).
CERT_SECRET: Final = f"{queues.RELEASE}-webhook-server-cert"


class KueueProcess:
    """The manager's process, its loopback ports, its cert directory and its log."""

    def __init__(self, workdir: Path, *, metrics: bool = False) -> None:
        """``metrics``: a loopback port for the metrics endpoint too (:attr:`metrics_port`)."""
        self.workdir = workdir
        self.health_port, self.webhook_port = free_port(), free_port()
        self.metrics_port = free_port() if metrics else None
        self.certs = workdir / "certs"
        self.log = workdir / "kueue.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self, bin_dir: Path, configuration: Mapping[str, Any], kubeconfig: Path) -> None:
        """Start ``kueue --config=...`` signed in with ``kubeconfig``, its output into :attr:`log`."""
        config = self.workdir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(dict(configuration), sort_keys=False))
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [str(bin_dir / "kueue"), f"--config={config}", "--zap-log-level=2"],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
                preexec_fn=die_with_parent,
                cwd=self.workdir,
            )

    def copy_certs(self, kube: Kube, namespace: str) -> bool:
        """Play the kubelet: the Secret the cert rotator filled, into :attr:`certs` (a file is
        rewritten only when the Secret changed it: the rotator may rotate)."""
        secret = kube.get("v1", "Secret", CERT_SECRET, namespace) or {}
        data = secret.get("data") or {}
        if not {"tls.crt", "tls.key"} <= set(data):
            return False
        self.certs.mkdir(exist_ok=True)
        for key, value in data.items():
            raw = base64.b64decode(value)
            target = self.certs / key
            if not target.is_file() or target.read_bytes() != raw:
                target.write_bytes(raw)
        return True

    def alive(self) -> bool:
        """Started and running; an exited manager raises with the end of its log."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"kueue exited ({self.proc.returncode}):\n{self.tail()}")
        return self.proc is not None

    def ready(self) -> bool:
        """The manager answers ``/readyz`` (its webhook server and controllers are up)."""
        if not self.alive():
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def tail(self, lines: int = 60) -> str:
        return log_tail(self.log, lines)

    def terminate(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 20 s); a later :meth:`launch` starts another."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
