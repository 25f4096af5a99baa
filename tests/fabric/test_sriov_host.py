"""The SR-IOV host side: GUID plan shards, and the VF script run for real against a fake sysfs.

The fake sysfs has what the script reads and writes: ``class/infiniband/<hca>/device`` with
``sriov_numvfs``, ``sriov_totalvfs``, ``net/<netdev>``, ``virtfn<n>`` links to PCI functions whose
``infiniband/*/node_guid`` holds the current GUID and ``infiniband/*/ports/1/pkeys/0`` the P_Key
at index 0, MLNX_OFED's ``sriov/<n>/{node,port,policy}`` on even HCAs (odd HCAs take the
``ip link`` path through a recording ``nsenter``), and the driver's ``bind``/``unbind``.

The SR-IOV device plugin is a real process with its own name (what the script looks for in
``/proc``): it records what it discovers at start, as the real one does, and a supervisor thread
plays the kubelet and starts it again when it exits.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.fabric import guid_plan, sriov_host, vf_script
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.guids import MAX_PLAN_BYTES, node_guids
from components.model.platform import Node, OnPremPlatform
from components.model.types import colon_guid
from tests.conftest import raw_stack

#: ``nsenter --target 1 --mount -- ip link set <pf> vf <n> node_guid <g> port_guid <g> state auto``:
#: recorded, and the VF then shows the GUID as the kernel would after the script's rebind.
RECORDER = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
args=("$@")
for dev in "$SYSFS"/class/infiniband/*/device; do
  [ -e "$dev/net/${args[7]}" ] || continue
  bdf=$(basename "$(readlink -f "$dev/virtfn${args[9]}")")
  for f in "$SYSFS"/bus/pci/devices/"$bdf"/infiniband/*/node_guid; do echo "${args[11]}" > "$f"; done
done
"""


@dataclass
class FakeNode:
    tmp: Path
    onprem: OnPremPlatform
    node: Node

    @property
    def sys(self) -> Path:
        return self.tmp / "sys"

    def hca_dir(self, hca: str) -> Path:
        return self.sys / "class/infiniband" / hca / "device"

    def bdf(self, h: int, vf: int) -> str:
        return f"0000:{h + 1:02x}:{vf // 8:02x}.{vf % 8}"

    def node_guid_file(self, h: int, vf: int) -> Path:
        return self.sys / "bus/pci/devices" / self.bdf(h, vf) / f"infiniband/mlx5_vf{h}_{vf}/node_guid"

    def pkey_file(self, h: int, vf: int) -> Path:
        return self.node_guid_file(h, vf).parent / "ports/1/pkeys/0"

    def build(
        self,
        numvfs: int = 0,
        current: Callable[[int, int], str] = lambda h, vf: "0000:0000:0000:0000",
        totalvfs: int = 16,
        pkey: Callable[[int, int], str] = lambda h, vf: "0xffff",
    ) -> None:
        hcas = self.onprem.groups_by_name[self.node.node_group].hcas
        (self.sys / "bus/pci/drivers/mlx5_core").mkdir(parents=True)
        for h, hca in enumerate(hcas):
            dev = self.hca_dir(hca)
            (dev / "net" / f"ibp{h}s0").mkdir(parents=True)
            (dev / "sriov_numvfs").write_text(f"{numvfs}\n")
            (dev / "sriov_totalvfs").write_text(f"{totalvfs}\n")
            for vf in range(self.onprem.fabric.vfs_per_hca):
                guid_file = self.node_guid_file(h, vf)
                guid_file.parent.mkdir(parents=True)
                if h % 2 == 0:
                    # MLNX_OFED: the VF's node GUID is what sriov/<n>/node says (after the rebind).
                    (dev / "sriov" / str(vf)).mkdir(parents=True)
                    (dev / "sriov" / str(vf) / "node").write_text(current(h, vf) + "\n")
                    guid_file.symlink_to(dev / "sriov" / str(vf) / "node")
                else:
                    guid_file.write_text(current(h, vf) + "\n")
                self.pkey_file(h, vf).parent.mkdir(parents=True)
                self.pkey_file(h, vf).write_text(pkey(h, vf) + "\n")
                (dev / f"virtfn{vf}").symlink_to(self.sys / "bus/pci/devices" / self.bdf(h, vf))

    def write_plan(self, cfg: StackConfig) -> None:
        plan_dir = self.tmp / "plan"
        plan_dir.mkdir(exist_ok=True)
        for shard in guid_plan.guid_shards(cfg).values():  # what the projected volume shows
            for name, text in shard.items():
                (plan_dir / name).write_text(text)
        (self.tmp / "pkeys").write_text(guid_plan.pkey_table(cfg))

    def env(self) -> dict[str, str]:
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "nsenter").write_text(RECORDER)
        (bin_dir / "nsenter").chmod(0o755)
        return {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "CALLS": str(self.tmp / "calls.log"),
            "SYSFS": str(self.sys),
            "READY": str(self.tmp / "ready"),
            "PLAN_DIR": str(self.tmp / "plan"),
            "PKEYS": str(self.tmp / "pkeys"),
            "STATE": str(self.tmp / "run/vf-state"),
            "DEVICE_PLUGIN": self.plugin_name,
            "NODE_NAME": self.node.name,
        }

    @property
    def plugin_name(self) -> str:
        """The fake device plugin's process name: unique, so parallel tests never signal each other."""
        return "dp" + uuid.uuid5(uuid.NAMESPACE_URL, str(self.tmp)).hex[:12]

    def run(self, cfg: StackConfig) -> subprocess.CompletedProcess[str]:
        self.write_plan(cfg)
        return subprocess.run(
            ["bash", "-c", vf_script.CONFIGURE_VFS],
            env={**self.env(), "ONESHOT": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def calls(self) -> list[str]:
        log = self.tmp / "calls.log"
        return log.read_text().splitlines() if log.exists() else []


def _sysfs_form(guid: int) -> str:
    raw = f"{guid:016x}"
    return ":".join(raw[i : i + 4] for i in range(0, 16, 4))


def _stack(base: str | None = None) -> StackConfig:
    raw = raw_stack("onprem")
    if base is not None:
        raw["platform"]["fabric"]["guidScheme"]["base"] = base
    return parse_config(raw)


def _fake(tmp_path: Path, node_name: str, base: str | None = None) -> tuple[StackConfig, FakeNode]:
    """The tests' onprem stack (optionally another GUID base) and a fake host for one of its nodes."""
    cfg = _stack(base)
    assert cfg.onprem is not None
    node = next(n for n in cfg.onprem.nodes if n.name == node_name)
    return cfg, FakeNode(tmp_path, cfg.onprem, node)


@pytest.mark.parametrize("base", [None, "0xfe00000000000000"], ids=["default-base", "high-bit-base"])
def test_script_writes_exactly_the_planned_guids(tmp_path: Path, base: str | None) -> None:
    cfg, fake = _fake(tmp_path, "gpu-node-05", base)
    assert cfg.onprem is not None
    fake.build()
    result = fake.run(cfg)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ready").exists()
    want = node_guids(cfg.onprem, fake.node)
    ip_link = []
    for h, (hca, guids) in enumerate(want.items()):
        assert fake.hca_dir(hca).joinpath("sriov_numvfs").read_text().strip() == str(len(guids))
        assert f"{hca}: sriov_numvfs -> {len(guids)}" in result.stdout
        for vf, guid in enumerate(guids):
            if h % 2 == 0:
                sriov = fake.hca_dir(hca) / "sriov" / str(vf)
                assert (sriov / "node").read_text() == colon_guid(guid) + "\n"
                assert (sriov / "port").read_text() == colon_guid(guid) + "\n"
                assert (sriov / "policy").read_text() == "Follow\n"
            else:
                ip_link.append(
                    f"nsenter --target 1 --mount -- ip link set ibp{h}s0 vf {vf} node_guid {colon_guid(guid)} "
                    f"port_guid {colon_guid(guid)} state auto"
                )
    assert fake.calls() == ip_link
    last = fake.bdf(len(want) - 1, cfg.onprem.fabric.vfs_per_hca - 1)
    assert (fake.sys / "bus/pci/drivers/mlx5_core/bind").read_text() == last + "\n"


def test_script_leaves_configured_vfs_alone(tmp_path: Path) -> None:
    cfg, fake = _fake(tmp_path, "gpu-node-02")
    assert cfg.onprem is not None
    want = list(node_guids(cfg.onprem, fake.node).values())
    fake.build(numvfs=cfg.onprem.fabric.vfs_per_hca, current=lambda h, vf: _sysfs_form(want[h][vf]))
    result = fake.run(cfg)
    assert result.returncode == 0, result.stderr
    assert "sriov_numvfs ->" not in result.stdout and "GUID" not in result.stdout
    assert fake.calls() == []
    assert not (fake.sys / "bus/pci/drivers/mlx5_core/bind").exists()
    assert sorted(p.name for p in (fake.hca_dir("mlx5_0") / "sriov/0").iterdir()) == ["node"], "no GUID written"


def test_script_fails_on_a_missing_hca(tmp_path: Path) -> None:
    cfg, fake = _fake(tmp_path, "gpu-node-01")
    assert cfg.onprem is not None
    fake.build()
    (fake.sys / "class/infiniband/mlx5_7/device/sriov_numvfs").unlink()
    for p in sorted((fake.sys / "class/infiniband/mlx5_7").rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    (fake.sys / "class/infiniband/mlx5_7").rmdir()
    result = fake.run(cfg)
    assert result.returncode == 1
    assert "mlx5_7: no such RDMA device on gpu-node-01" in result.stderr
    assert not (tmp_path / "ready").exists()


class Pod:
    """The VF script running as the DaemonSet's pod would: in a loop, its output in a file."""

    def __init__(self, fake: FakeNode, period: str = "0.1", env: dict[str, str] | None = None) -> None:
        self.log = fake.tmp / f"pod-{uuid.uuid4().hex[:6]}.log"
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(
            ["bash", "-c", vf_script.CONFIGURE_VFS],
            env={**fake.env(), "PERIOD": period, **(env or {})},
            stdout=self._out,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        self.proc.terminate()
        rc = self.proc.wait(timeout=10)
        self._out.close()
        return rc


def test_the_running_pod_applies_a_changed_plan_and_stops_on_sigterm(tmp_path: Path) -> None:
    """A plan change reaches a running pod through its volume: no restart, no DaemonSet roll."""
    cfg, fake = _fake(tmp_path, "gpu-node-05")
    assert cfg.onprem is not None
    fake.build()
    fake.write_plan(cfg)
    pod = Pod(fake)
    try:
        node_file = fake.hca_dir("mlx5_0") / "sriov/0/node"
        _wait_for(lambda: pod.output().count("VF plan of gpu-node-05 applied") == 1)
        assert node_file.read_text() == "02:00:00:00:00:00:50:00\n"
        fake.write_plan(_stack("0x0400000000000000"))  # another GUID base: every VF's GUID changes
        # Waits for the condition, not for a fixed time: the machine may be loaded.
        _wait_for(lambda: pod.output().count("VF plan of gpu-node-05 applied") == 2)
        assert node_file.read_text() == "04:00:00:00:00:00:50:00\n"
        # The last VF of the last HCA (odd: the ip link path) got its new GUID.
        assert any("port_guid 04:00:00:00:00:00:57:05" in c for c in fake.calls())
        calls = len(fake.calls())
        _passes(fake, 2)
    finally:
        rc = pod.stop()
    assert rc == 0, pod.output()  # SIGTERM ends the pod at once, cleanly
    assert len(fake.calls()) == calls, "periodic re-checks of a configured host change nothing"
    assert pod.output().count("VF plan of gpu-node-05 applied") == 2


def _passes(fake: FakeNode, n: int) -> None:
    """Wait until the running script has made ``n`` more passes (it touches its ready file in each)."""
    ready = fake.tmp / "ready"
    for _ in range(n):
        _wait_for(ready.exists)
        before = ready.stat().st_mtime_ns
        _wait_for(lambda before=before: ready.stat().st_mtime_ns != before)


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# The SR-IOV device plugin: restarted once the VFs are final, and again after every change


FAKE_PLUGIN = """#!/bin/bash
# Discovers once, at start, like sriovdp: per HCA the VFs up to sriov_numvfs and their pkeys/0.
seen=""
for dev in "$SYSFS"/class/infiniband/*/device; do
  n=$(cat "$dev/sriov_numvfs")
  for ((vf = 0; vf < n; vf++)); do
    bdf=$(basename "$(readlink -f "$dev/virtfn$vf")")
    seen+=" $(cat "$SYSFS"/bus/pci/devices/"$bdf"/infiniband/*/ports/1/pkeys/0)"
  done
done
echo "discovered$seen" >> "$DISCOVERIES"
trap 'exit 0' TERM
while :; do sleep 0.05; done
"""


class Kubelet:
    """Runs the fake device plugin and starts it again whenever it exits (``restartPolicy: Always``)."""

    def __init__(self, fake: FakeNode) -> None:
        self.discoveries = fake.tmp / "discoveries.log"
        self.discoveries.touch()
        binary = fake.tmp / "bin" / fake.plugin_name  # its process name is what the script looks for
        binary.parent.mkdir(exist_ok=True)
        bash = shutil.which("bash")
        assert bash is not None
        binary.write_text(FAKE_PLUGIN.replace("/bin/bash", bash, 1))
        binary.chmod(0o755)
        self._cmd = [str(binary)]
        self._env = {**os.environ, "SYSFS": str(fake.sys), "DISCOVERIES": str(self.discoveries)}
        self._stop = threading.Event()
        self.starts = 0
        self._proc = self._start()
        self._thread = threading.Thread(target=self._supervise, daemon=True)
        self._thread.start()

    def _start(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        return subprocess.Popen(self._cmd, env=self._env)

    def _supervise(self) -> None:
        while not self._stop.is_set():
            if self._proc.poll() is not None:
                self._proc = self._start()
            time.sleep(0.05)

    def seen(self) -> list[str]:
        """What each start of the plugin discovered: the P_Keys of its VFs, in HCA and VF order."""
        return self.discoveries.read_text().splitlines()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._proc.terminate()
        self._proc.wait(timeout=10)


@pytest.fixture
def kubelet_for() -> Iterator[Callable[[FakeNode], Kubelet]]:
    """Start a :class:`Kubelet`; each is stopped (its fake plugin too) however the test ends."""
    started: list[Kubelet] = []

    def start(fake: FakeNode) -> Kubelet:
        started.append(Kubelet(fake))
        return started[-1]

    yield start
    for kubelet in started:
        kubelet.stop()


def _program_pkeys(fake: FakeNode, key_of_vf: Callable[[int], str]) -> None:
    """What the subnet manager does: each VF's P_Key table gets its partition's key at index 0."""
    hcas = fake.onprem.groups_by_name[fake.node.node_group].hcas
    for h in range(len(hcas)):
        for vf in range(fake.onprem.fabric.vfs_per_hca):
            fake.pkey_file(h, vf).write_text(key_of_vf(vf) + "\n")


def test_device_plugin_restarts_once_vfs_and_partitions_are_final_and_after_every_change(
    tmp_path: Path, kubelet_for: Callable[[FakeNode], Kubelet]
) -> None:
    cfg, fake = _fake(tmp_path, "gpu-node-05")
    assert cfg.onprem is not None
    fake.build()  # boot: no VFs yet, and the plugin is already running
    fake.write_plan(cfg)
    kubelet = kubelet_for(fake)
    _wait_for(lambda: kubelet.seen() == ["discovered"])
    team_key = {0: "0x8001", 1: "0x8002", 2: "0x8003", 3: "0x8004", 4: "0x8005", 5: "0x8006"}
    want = "discovered" + " ".join(["", *[team_key[vf] for vf in range(6)]] * 8).replace("  ", " ")
    pod = Pod(fake)
    try:
        # VFs exist, but the SM has not programmed them yet: the plugin is left alone.
        _wait_for(lambda: "VF plan of gpu-node-05 applied" in pod.output())
        _wait_for(lambda: "48 VF(s) not final, e.g. mlx5_0/VF0:pkeys/0=0xffff,want=0x8001(vision)" in pod.output())
        _passes(fake, 2)  # two more whole passes of the script: it had its chance to act, and did not
        assert kubelet.seen() == ["discovered"]

        _program_pkeys(fake, lambda vf: team_key[vf])  # the SM's sweep
        _wait_for(lambda: len(kubelet.seen()) == 2)
        assert kubelet.seen()[-1] == want, "restarted once, and it found every VF under its team's key"
        _passes(fake, 2)
        assert len(kubelet.seen()) == 2, "a plugin that saw the final state is not restarted again"

        # A partition change: vision moves to P_Key 0x0007. Until the SM has programmed it, wait.
        raw = raw_stack("onprem")
        raw["teams"][0]["partition"]["pkey"] = "0x0007"
        fake.write_plan(parse_config(raw))
        _wait_for(lambda: "want=0x8007(vision)" in pod.output())
        assert len(kubelet.seen()) == 2
        team_key[0] = "0x8007"
        _program_pkeys(fake, lambda vf: team_key[vf])
        _wait_for(lambda: len(kubelet.seen()) == 3)
        assert kubelet.seen()[-1].split()[1] == "0x8007"

        # A driver reload (or mlxfwreset) drops the VFs: recreated, and the plugin restarted again.
        (fake.hca_dir("mlx5_3") / "sriov_numvfs").write_text("0\n")
        _wait_for(lambda: "mlx5_3: sriov_numvfs -> 6" in pod.output())
        _wait_for(lambda: len(kubelet.seen()) == 4)
        assert kubelet.seen()[-1].count("0x8007") == 8
    finally:
        rc = pod.stop()
        starts = kubelet.starts
    assert rc == 0

    # The VF pod itself restarts (a DaemonSet roll): the plugin already saw this state, so stays.
    again = Pod(fake)
    try:
        _wait_for(lambda: "VF plan of gpu-node-05 applied" in again.output())
        _passes(fake, 2)
    finally:
        again.stop()
    assert starts == 4 and len(kubelet.seen()) == 4, again.output()


def test_without_partitions_the_plugin_restarts_once_the_vfs_exist(
    tmp_path: Path, kubelet_for: Callable[[FakeNode], Kubelet]
) -> None:
    """No team VF to wait for (no partition yet): VFs that exist are final."""
    raw = raw_stack("onprem")
    for t in raw["teams"]:
        t.pop("partition")
        t.pop("verify", None)
        t["quota"].pop("rdma", None)
    cfg = parse_config(raw)
    assert cfg.onprem is not None and guid_plan.pkey_table(cfg) == ""
    node = next(n for n in cfg.onprem.nodes if n.name == "gpu-node-02")
    fake = FakeNode(tmp_path, cfg.onprem, node)
    fake.build()
    fake.write_plan(cfg)
    kubelet = kubelet_for(fake)
    _wait_for(lambda: kubelet.seen() == ["discovered"])
    pod = Pod(fake)
    try:
        _wait_for(lambda: len(kubelet.seen()) == 2)
        assert kubelet.seen()[-1].count("0xffff") == 48
    finally:
        pod.stop()


def _fake_proc_entry(proc: Path, pid: int, comm: str, start_ticks: int) -> None:
    """``/proc/<pid>/{comm,stat}`` as the kernel writes them (stat field 22: start time in clock ticks)."""
    entry = proc / str(pid)
    entry.mkdir(parents=True)
    (entry / "comm").write_text(comm + "\n")
    fields = ["S", *["0"] * 18, str(start_ticks), *["0"] * 30]  # fields 3..52; index 19 is field 22
    (entry / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")


def test_a_plugin_started_again_within_the_settling_tick_is_left_alone(tmp_path: Path) -> None:
    """Issue #21, item 21: the script compared 10 ms tick values with ``-le``, so a plugin the kubelet
    started again within the tick the VFs settled in was killed again. Now exactly the plugins running
    when the VFs settled are restarted, by pid and start time.

    A fake ``/proc`` (``PROC``) holds two real processes under the plugin's name, both started in the
    very tick the node's uptime says it is: the one there when the VFs settle is restarted, the one
    that appears after (the kubelet's new start) is not, however many passes follow.
    """
    raw = raw_stack("onprem")
    for t in raw["teams"]:
        t.pop("partition")
        t.pop("verify", None)
        t["quota"].pop("rdma", None)
    cfg = parse_config(raw)
    assert cfg.onprem is not None
    node = next(n for n in cfg.onprem.nodes if n.name == "gpu-node-02")
    fake = FakeNode(tmp_path, cfg.onprem, node)
    fake.build()
    fake.write_plan(cfg)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "uptime").write_text("123.45 0.00\n")  # boot_ticks() of the old script: 12345 at 100 Hz
    tick = 12345
    stale = subprocess.Popen(["sleep", "600"])
    fresh = subprocess.Popen(["sleep", "600"])
    pod: Pod | None = None
    try:
        _fake_proc_entry(proc, stale.pid, fake.plugin_name, tick)
        pod = Pod(fake, env={"PROC": str(proc)})
        _wait_for(lambda: "VFs of gpu-node-02 final" in pod.output())
        _wait_for(lambda: stale.poll() is not None)  # restarted: it discovered the VFs before they were final
        assert f"restarting the SR-IOV device plugin (pid {stale.pid})" in pod.output()
        # The kubelet's new start, in the same tick; the old one is gone from /proc.
        shutil.rmtree(proc / str(stale.pid))
        _fake_proc_entry(proc, fresh.pid, fake.plugin_name, tick)
        _passes(fake, 3)
        assert fresh.poll() is None, "a plugin that started after the VFs settled was killed"
        assert f"(pid {fresh.pid})" not in pod.output()
    finally:
        if pod is not None:
            pod.stop()
        for p in (stale, fresh):
            p.kill()
            p.wait(timeout=10)


# --------------------------------------------------------------------------------------------
# Hosts that are not as planned


def test_fails_clearly_when_firmware_allows_fewer_vfs(tmp_path: Path) -> None:
    cfg, fake = _fake(tmp_path, "gpu-node-01")
    fake.build(totalvfs=4)
    result = fake.run(cfg)
    assert result.returncode == 1
    assert "mlx5_0: the firmware allows 4 VFs (sriov_totalvfs) but the plan needs 6" in result.stderr
    assert "NUM_OF_VFS" in result.stderr and "platform.fabric.vfsPerHca" in result.stderr
    assert fake.hca_dir("mlx5_0").joinpath("sriov_numvfs").read_text() == "0\n", "nothing written"
    assert not (tmp_path / "ready").exists()
    fake_ok = FakeNode(tmp_path / "ok", fake.onprem, fake.node)
    fake_ok.build(totalvfs=6)  # exactly enough
    assert fake_ok.run(cfg).returncode == 0


def test_a_pf_without_netdev_is_configured_through_sysfs_or_reported(tmp_path: Path) -> None:
    """No netdev (IPoIB not loaded) only matters where the ip-link way is the only way."""
    cfg, fake = _fake(tmp_path, "gpu-node-05")
    fake.build()
    for h in (0, 1):  # mlx5_0 has MLNX_OFED's sriov sysfs, mlx5_1 does not
        (fake.hca_dir(f"mlx5_{h}") / "net" / f"ibp{h}s0").rmdir()
    result = fake.run(cfg)
    assert result.returncode == 1
    assert (fake.hca_dir("mlx5_0") / "sriov/5/node").read_text() == "02:00:00:00:00:00:50:05\n"
    assert "mlx5_1 VF 0: cannot set GUID 02:00:00:00:00:00:51:00: no MLNX_OFED sriov/0 sysfs and no PF netdev" in (
        result.stderr
    )
    assert "mlx5_7 VF 5 (" in result.stdout, "the other HCAs are still configured"
    assert not (tmp_path / "ready").exists(), "not Ready while a VF lacks its GUID"
    (fake.hca_dir("mlx5_1") / "net" / "ibp1s0").mkdir()  # the netdev appears: the next pass completes
    again = fake.run(cfg)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "ready").exists()


def test_a_node_outside_the_plan_idles_ready(tmp_path: Path) -> None:
    cfg = _stack()
    assert cfg.onprem is not None
    stranger = Node(name="cpu-node-9", id=999, node_group="h100-full")
    fake = FakeNode(tmp_path, cfg.onprem, stranger)
    (fake.sys).mkdir()
    result = fake.run(cfg)
    assert result.returncode == 0 and "not one of platform.nodes" in result.stdout
    assert (tmp_path / "ready").exists()


# --------------------------------------------------------------------------------------------
# Shards


def _fleet(nodes: int, hcas: int = 8, groups: int = 2) -> dict[str, Any]:
    raw = raw_stack("onprem")
    p = raw["platform"]
    names = [g["name"] for g in p["nodeGroups"]][:groups]
    for g in p["nodeGroups"]:
        g["hcas"] = [f"mlx5_{i}" for i in range(hcas)]
    p["fabric"]["guidScheme"] = {"hcaBits": max(4, (hcas - 1).bit_length())}
    p["nodes"] = [{"name": f"node-{i:05d}", "id": i + 1, "nodeGroup": names[i % groups]} for i in range(nodes)]
    for t in raw["teams"]:
        t["quota"] = {"cpu": "1", "memory": "1Gi"}
        t.pop("queue", None)  # its limits refer to the quota just dropped
        t["verify"] = False  # the groups kept may hold no whole-GPU pair (components/rules/proofs.py)
    p["nodeGroups"] = [g for g in p["nodeGroups"] if g["name"] in names]
    return raw


def test_every_shard_fits_a_config_map_and_every_node_is_in_one() -> None:
    cfg = parse_config(_fleet(3000, hcas=16))
    assert cfg.onprem is not None
    shards = guid_plan.guid_shards(cfg)
    assert len(shards) > 2, "3000 nodes x 16 HCAs must not fit one ConfigMap"
    seen: list[str] = []
    for name, data in shards.items():
        assert len(name) <= 253 and name.startswith(guid_plan.GUIDS_CONFIG_MAP + "-")
        assert sum(len(k) + len(v) for k, v in data.items()) <= MAX_PLAN_BYTES
        seen += data
    assert sorted(seen) == sorted(n.name for n in cfg.onprem.nodes)


def test_shards_do_not_depend_on_the_vf_count() -> None:
    few = _fleet(600)
    many = copy.deepcopy(few)
    many["platform"]["fabric"].update({"vfsPerHca": 16, "firmwareMaxVfs": 16})
    a, b = (guid_plan.guid_shards(parse_config(r)) for r in (few, many))
    assert list(a) == list(b)
    assert {n: sorted(d) for n, d in a.items()} == {n: sorted(d) for n, d in b.items()}


def test_adding_nodes_changes_no_other_shard() -> None:
    before = guid_plan.guid_shards(parse_config(_fleet(1500)))
    after = guid_plan.guid_shards(parse_config(_fleet(1600)))
    grown = {n for n in after if after[n] != before.get(n)}
    for name in grown:
        if name in before:
            assert set(before[name]) < set(after[name]), "a shard only gains the new nodes"
    untouched = set(before) - grown
    assert untouched, "the first shards of each group stay byte-identical"


def test_daemonset_mounts_every_shard_and_rolls_only_for_a_new_script() -> None:
    cfg = parse_config(_fleet(3000, hcas=16))
    shards = guid_plan.guid_shards(cfg)
    ds = sriov_host.daemonset(cfg)
    volume, pkeys, state = ds["spec"]["template"]["spec"]["volumes"]
    assert pkeys == {"name": "pkeys", "configMap": {"name": guid_plan.PKEYS_CONFIG_MAP}}
    assert state["hostPath"] == {"path": "/run/gpuaas", "type": "DirectoryOrCreate"}
    assert [s["configMap"]["name"] for s in volume["projected"]["sources"]] == list(shards)
    other = _fleet(3000, hcas=16)
    other["platform"]["nodes"][-1]["id"] = 60_000  # a new shard, and one node's plan moves
    moved = sriov_host.daemonset(parse_config(other))
    assert moved["spec"]["template"]["metadata"] == ds["spec"]["template"]["metadata"], "no roll for plan changes"
    assert len(moved["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"]) == len(shards) + 1
    annotation = guid_plan.CONFIG_HASH_ANNOTATION
    assert ds["spec"]["template"]["metadata"]["annotations"][annotation] == guid_plan.config_hash(
        vf_script.CONFIGURE_VFS
    )


def test_pkey_table_lists_each_team_vf_with_its_full_member_key() -> None:
    cfg = _stack()
    table = guid_plan.pkey_table(cfg)
    assert table.splitlines()[:2] == ["0 0x8001 vision", "1 0x8002 language"]
    assert len(table.splitlines()) == 6
    cm = guid_plan.pkeys_config_map(cfg)
    assert cm["metadata"]["name"] == "gpuaas-vf-pkeys" and cm["data"] == {"pkeys": table}
    (container,) = sriov_host.daemonset(cfg)["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PKEYS"] == "/etc/gpuaas/vf-pkeys/pkeys" and env["STATE"] == "/run/gpuaas/vf-state"


@pytest.mark.parametrize("driver", ["host", "container"])
def test_vf_pods_start_after_a_containerized_driver(driver: str) -> None:
    """With the DOCA driver container, VFs made on the inbox modules would vanish when it swaps them."""
    raw = raw_stack("onprem")
    raw["network"] = {**raw.get("network", {}), "ofedDriver": driver}
    selector = sriov_host.daemonset(parse_config(raw))["spec"]["template"]["spec"]["nodeSelector"]
    assert selector["feature.node.kubernetes.io/pci-15b3.present"] == "true"
    assert selector.get("network.nvidia.com/operator.mofed.wait") == ("false" if driver == "container" else None)
