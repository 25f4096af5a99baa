"""The SR-IOV host side: GUID plan shards, and the VF script run for real against a fake sysfs.

The fake sysfs has what the script reads and writes: ``class/infiniband/<hca>/device`` with
``sriov_numvfs``, ``net/<netdev>``, ``virtfn<n>`` links to PCI functions whose
``infiniband/*/node_guid`` holds the current GUID, MLNX_OFED's ``sriov/<n>/{node,port,policy}``
on even HCAs (odd HCAs take the ``ip link`` path through a recording ``nsenter``), and the
driver's ``bind``/``unbind``.
"""

from __future__ import annotations

import copy
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components import sriov_host
from components.config import Node, OnPremPlatform, StackConfig
from components.guids import node_guids
from components.loader import parse_config
from components.types import colon_guid
from tests.conftest import raw_stack

RECORDER = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
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

    def build(self, numvfs: int = 0, current: Callable[[int, int], str] = lambda h, vf: "0000:0000:0000:0000") -> None:
        hcas = self.onprem.groups_by_name[self.node.node_group].hcas
        (self.sys / "bus/pci/drivers/mlx5_core").mkdir(parents=True)
        for h, hca in enumerate(hcas):
            dev = self.hca_dir(hca)
            (dev / "net" / f"ibp{h}s0").mkdir(parents=True)
            (dev / "sriov_numvfs").write_text(f"{numvfs}\n")
            for vf in range(self.onprem.fabric.vfs_per_hca):
                guid_file = self.node_guid_file(h, vf)
                guid_file.parent.mkdir(parents=True)
                guid_file.write_text(current(h, vf) + "\n")
                (dev / f"virtfn{vf}").symlink_to(self.sys / "bus/pci/devices" / self.bdf(h, vf))
                if h % 2 == 0:
                    (dev / "sriov" / str(vf)).mkdir(parents=True)

    def write_plan(self, cfg: StackConfig) -> None:
        plan_dir = self.tmp / "plan"
        plan_dir.mkdir(exist_ok=True)
        for shard in sriov_host.guid_shards(cfg).values():  # what the projected volume shows
            for name, text in shard.items():
                (plan_dir / name).write_text(text)

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
            "NODE_NAME": self.node.name,
        }

    def run(self, cfg: StackConfig) -> subprocess.CompletedProcess[str]:
        self.write_plan(cfg)
        return subprocess.run(
            ["bash", "-c", sriov_host.CONFIGURE_VFS],
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
    """The checked-in onprem stack (optionally another GUID base) and a fake host for one of its nodes."""
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
    assert not any((fake.hca_dir("mlx5_0") / "sriov/0").iterdir())


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


def test_the_running_pod_applies_a_changed_plan_and_stops_on_sigterm(tmp_path: Path) -> None:
    """A plan change reaches a running pod through its volume: no restart, no DaemonSet roll."""
    cfg, fake = _fake(tmp_path, "gpu-node-05")
    assert cfg.onprem is not None
    fake.build()
    fake.write_plan(cfg)
    proc = subprocess.Popen(
        ["bash", "-c", sriov_host.CONFIGURE_VFS],
        env={**fake.env(), "PERIOD": "0.1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        node_file = fake.hca_dir("mlx5_0") / "sriov/0/node"
        _wait_for(lambda: node_file.exists() and node_file.read_text() == "02:00:00:00:00:00:50:00\n")
        moved = _stack("0x0400000000000000")  # another GUID base: every VF's GUID changes
        fake.write_plan(moved)
        _wait_for(lambda: node_file.read_text() == "04:00:00:00:00:00:50:00\n")
        # The last VF of the last HCA (odd: the ip link path), then the script only prints.
        _wait_for(lambda: any("port_guid 04:00:00:00:00:00:57:05" in c for c in fake.calls()))
        time.sleep(0.5)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err  # SIGTERM ends the pod at once, cleanly
    assert out.count("VF plan of gpu-node-05 applied") == 2


def _wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


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
    p["nodeGroups"] = [g for g in p["nodeGroups"] if g["name"] in names]
    return raw


def test_every_shard_fits_a_config_map_and_every_node_is_in_one() -> None:
    cfg = parse_config(_fleet(3000, hcas=16))
    assert cfg.onprem is not None
    shards = sriov_host.guid_shards(cfg)
    assert len(shards) > 2, "3000 nodes x 16 HCAs must not fit one ConfigMap"
    seen: list[str] = []
    for name, data in shards.items():
        assert len(name) <= 253 and name.startswith(sriov_host.GUIDS_CONFIG_MAP + "-")
        assert sum(len(k) + len(v) for k, v in data.items()) <= sriov_host.MAX_PLAN_BYTES
        seen += data
    assert sorted(seen) == sorted(n.name for n in cfg.onprem.nodes)


def test_shards_do_not_depend_on_the_vf_count() -> None:
    few = _fleet(600)
    many = copy.deepcopy(few)
    many["platform"]["fabric"].update({"vfsPerHca": 16, "firmwareMaxVfs": 16})
    a, b = (sriov_host.guid_shards(parse_config(r)) for r in (few, many))
    assert list(a) == list(b)
    assert {n: sorted(d) for n, d in a.items()} == {n: sorted(d) for n, d in b.items()}


def test_adding_nodes_changes_no_other_shard() -> None:
    before = sriov_host.guid_shards(parse_config(_fleet(1500)))
    after = sriov_host.guid_shards(parse_config(_fleet(1600)))
    grown = {n for n in after if after[n] != before.get(n)}
    for name in grown:
        if name in before:
            assert set(before[name]) < set(after[name]), "a shard only gains the new nodes"
    untouched = set(before) - grown
    assert untouched, "the first shards of each group stay byte-identical"


def test_daemonset_mounts_every_shard_and_rolls_only_for_a_new_script() -> None:
    cfg = parse_config(_fleet(3000, hcas=16))
    shards = sriov_host.guid_shards(cfg)
    ds = sriov_host.daemonset(cfg)
    (volume,) = ds["spec"]["template"]["spec"]["volumes"]
    assert [s["configMap"]["name"] for s in volume["projected"]["sources"]] == list(shards)
    other = _fleet(3000, hcas=16)
    other["platform"]["nodes"][-1]["id"] = 60_000  # a new shard, and one node's plan moves
    moved = sriov_host.daemonset(parse_config(other))
    assert moved["spec"]["template"]["metadata"] == ds["spec"]["template"]["metadata"], "no roll for plan changes"
    assert len(moved["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"]) == len(shards) + 1
    annotation = sriov_host.CONFIG_HASH_ANNOTATION
    assert ds["spec"]["template"]["metadata"]["annotations"][annotation] == sriov_host.config_hash(
        sriov_host.CONFIGURE_VFS
    )
