"""The node's own code in the e2e suite: the ``cni`` tool set (e2e/cni) and how to run it.

``cni-harness`` calls upstream's code (Multus' network-selection parser, its client from a
kubeconfig, its delegate handling with libcni) on a JSON request and answers in JSON; ``multus`` is
the real thin plugin; ``ib-sriov-cni`` is the real plugin with a probe that runs its config handling
on upstream's fake sysfs and a recording netlink; ``cni-standin`` records the calls a delegate gets.
All of them are built from the sources in ``$GPUAAS_UPSTREAM/src`` (default ../shared/upstream/src)
by ``python -m e2e.toolchain build cni``; where those are absent the build stops, naming the folder.

:class:`NodeNamespaces` gives the thin plugin what a node gives it and this machine must not be
touched for: a pod network namespace and the kubelet's device-plugin checkpoint, in a private
mount namespace (root and ``unshare`` needed; :func:`namespaces_unavailable` says why not).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from e2e import toolchain
from e2e.processes import die_with_parent

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"
#: Where Multus reads the kubelet's device-plugin checkpoint when no pod-resources socket is there
#: (multus-cni v4.3.0 pkg/checkpoint/checkpoint.go, pkg/kubeletclient/kubeletclient.go).
CHECKPOINT = Path("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")
#: The VFs of upstream's fake sysfs that the ib-sriov-cni probe runs on (ib-sriov-cni v1.3.0
#: pkg/utils/testing.go, ``CreateTmpSysFs``): PF ib0 at 0000:af:00.1 with these two VFs.
PROBE_VFS = ("0000:af:06.0", "0000:af:06.1")


class ToolError(RuntimeError):
    """A tool of the set exited non-zero: its command, status and stderr."""


@functools.cache
def bin_dir() -> Path:
    """The tool set's bin directory, built first if the cache lacks it (SystemExit if it cannot be).
    Once per process: the cache key checks the upstream sources and asks go for its version."""
    return toolchain.build(toolchain.TOOLSETS["cni"])


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update(extra or {})
    return env


def harness(request: Mapping[str, Any], env: Mapping[str, str] | None = None, timeout: float = 600) -> Any:
    """One request to ``cni-harness``; its JSON answer."""
    res = subprocess.run(
        [str(bin_dir() / "cni-harness")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(env),
    )
    if res.returncode != 0:
        raise ToolError(f"cni-harness {request.get('op')}: exit {res.returncode}: {res.stderr[-2000:]}")
    return json.loads(res.stdout)


def parse_networks(cases: list[tuple[str, dict[str, str]]]) -> list[dict[str, Any]]:
    """Multus' ``k8sclient.GetPodNetwork`` for each (namespace, annotations): what it parsed."""
    answer = harness({"op": "networks", "cases": [{"namespace": ns, "annotations": a} for ns, a in cases]})
    results: list[dict[str, Any]] = answer["results"]
    return results


def multus_client(kubeconfig: Path, namespace: str, pod: str, nad: str = "") -> dict[str, Any]:
    """Multus' client from ``kubeconfig`` (``k8sclient.GetK8sClient``), then ``multus.GetPod`` and
    ``GetNetAttachDef`` with it: ``stage`` is where it stopped (``client``, ``pod``, ``nad``, ``done``)."""
    req = {"op": "client", "kubeconfig": str(kubeconfig), "namespace": namespace, "podName": pod, "nad": nad}
    answer: dict[str, Any] = harness(req)
    return answer


def delegate(request: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Multus' delegate handling of one NAD and selection element, then libcni's ADD of the plugin
    in ``request["binDir"]`` (see cmd/cni-harness)."""
    answer: dict[str, Any] = harness({"op": "delegate", **request}, env=env)
    return answer


def probe_env(report: Path, vf_guid: str) -> dict[str, str]:
    """The environment that turns ``ib-sriov-cni`` into its probe (testdata/overlay/ib-sriov-cni)."""
    return {"GPUAAS_IBSRIOV_PROBE": json.dumps({"report": str(report), "vfGUID": vf_guid})}


def run_ib_sriov_probe(tools: Path, call: Mapping[str, Any], report: Path, vf_guid: str) -> dict[str, Any]:
    """The real ib-sriov-cni (its probe) on one delegate call as ``cni-standin`` recorded it: the
    same stdin and CNI variables, the probe's own network namespace in place of the pod's."""
    env = {
        "CNI_COMMAND": str(call["command"]),
        "CNI_CONTAINERID": str(call["containerID"]),
        "CNI_NETNS": "/proc/self/ns/net",
        "CNI_IFNAME": str(call["ifName"]),
        "CNI_ARGS": str(call["args"]),
        "CNI_PATH": str(call["path"]),
        **probe_env(report, vf_guid),
    }
    res = subprocess.run(
        [str(tools / "ib-sriov-cni")], input=call["raw"], capture_output=True, text=True, timeout=60, env=_env(env)
    )
    if res.returncode != 0 and not report.is_file():
        raise ToolError(f"ib-sriov-cni probe: exit {res.returncode}: {res.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(report.read_text())
    return answer


# --------------------------------------------------------------------------------------------
# A node's namespaces for the thin plugin


def namespaces_unavailable() -> str | None:
    """Why this machine cannot give the thin plugin a pod network namespace, or None if it can."""
    if os.geteuid() != 0:
        return "not root: creating network and mount namespaces needs CAP_SYS_ADMIN"
    missing = [t for t in ("unshare", "nsenter", "mount") if shutil.which(t) is None]
    if missing:
        return f"{', '.join(missing)} not installed (util-linux)"
    probe = 'f=$(mktemp) && unshare --net="$f" true && umount "$f"; rc=$?; rm -f "$f"; exit $rc'
    res = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", probe],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if res.returncode != 0:
        return f"unshare --mount --net refused here: {res.stderr.strip() or res.returncode}"
    return None


_HOLDER = r"""
set -eu
mount -t tmpfs -o mode=0755 gpuaas-e2e-var-lib /var/lib
mkdir -p "$(dirname "$CHECKPOINT")"
cp "$CHECKPOINT_SRC" "$CHECKPOINT"
touch "$NETNS"
unshare --net="$NETNS" true
echo ready > "$READY"
exec sleep 3600
"""


class NodeNamespaces:
    """A private mount namespace with a tmpfs over /var/lib holding ``checkpoint`` where the
    kubelet keeps its device-plugin checkpoint, and a pod network namespace bound to :attr:`netns`.
    Nothing of it is visible outside; it ends with :meth:`close` (or the process that made it)."""

    def __init__(self, workdir: Path, checkpoint: Mapping[str, Any]) -> None:
        self.workdir = workdir
        self.netns = workdir / "pod-netns"
        src = workdir / "checkpoint.json"
        src.write_text(json.dumps(checkpoint))
        ready = workdir / "holder-ready"
        env = _env(
            {"CHECKPOINT": str(CHECKPOINT), "CHECKPOINT_SRC": str(src), "NETNS": str(self.netns), "READY": str(ready)}
        )
        self._log = (workdir / "holder.log").open("wb")
        self._popen = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", _HOLDER],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + 30
        while not ready.is_file():
            if self._popen.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise ToolError(f"the node namespaces did not come up: {(workdir / 'holder.log').read_text()}")
            time.sleep(0.05)

    def run(
        self, argv: list[str], env: Mapping[str, str], stdin: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` in the mount namespace (the host's network namespace: the API server stays reachable)."""
        return subprocess.run(
            ["nsenter", f"--target={self._popen.pid}", "--mount", "--", *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(env),
        )

    def close(self) -> None:
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(signal.SIGTERM)
            try:
                self._popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait(timeout=10)
        self._log.close()


@contextlib.contextmanager
def node_namespaces(checkpoint: Mapping[str, Any]) -> Iterator[NodeNamespaces]:
    with tempfile.TemporaryDirectory(prefix="gpuaas-node-") as tmp:
        ns = NodeNamespaces(Path(tmp), checkpoint)
        try:
            yield ns
        finally:
            ns.close()
