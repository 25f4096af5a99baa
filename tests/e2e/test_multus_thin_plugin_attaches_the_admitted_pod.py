"""The real Multus thin plugin attaches an admitted team pod, and only what was admitted (issue 24, proof 4).

``multus`` (k8snetworkplumbingwg/multus-cni v4.3.0 ``cmd/multus``, built from ../shared/upstream/src
by the ``cni`` tool set) runs with ``CNI_COMMAND=ADD`` and ``DEL`` as a container runtime calls it:
the Multus config gpuaas deploys (the onprem plan's NicClusterPolicy, only its host paths moved to
the test's directories), the kubeconfig the refresher's script writes, with Multus' ServiceAccount
token (its RBAC as the operator grants it, tests/e2e/node_side.py), against the real API server,
for a pod a member of team A created. The node around it is made up where it must be: a pod
network namespace and the kubelet's device-plugin checkpoint (Multus reads the VF the kubelet gave
the pod from it for a NAD with ``resourceName``), in a private mount namespace
(e2e/cni.py ``NodeNamespaces``); the delegates — the cluster network's plugin and ib-sriov-cni,
which needs the hardware — are ``cni-standin``, which records what Multus hands it.

The same run shows why the refresher must not wait for a CNI ADD: with the file the refresher
wrote before this fix (bracketed IPv4), the thin plugin's ADD fails before any delegate runs —
every pod sandbox on the node would fail — and the refresher's script alone, which needs no pod
network, repairs it (tests/fabric/test_multus_kubeconfig.py: the refresher is hostNetwork, and
nothing else in its pod needs a network).

This one case needs root and ``unshare``; where they are missing it skips with the reason (it is
on the suite's list of machine-dependent skips, ``tests/run_guards.py`` "network namespaces").
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.fabric import multus
from components.loader import parse_config
from components.model.config import StackConfig
from components.model.resources import sriov_resource
from components.model.teams import OnPremPartition
from components.queueing.admission import QUEUE_LABEL
from components.tenancy.networks import nad_name
from e2e import cni
from e2e.kube import Identity
from tests import run_guards
from tests.conftest import raw_stack
from tests.e2e.conftest import AppliedStack
from tests.e2e.node_side import grant_multus, run_refresher, token
from tests.e2e.settle import gone

CFG: StackConfig = parse_config(raw_stack("onprem"))
TEAM = next(t for t in CFG.teams if isinstance(t.partition, OnPremPartition))
assert isinstance(TEAM.partition, OnPremPartition)
RESOURCE = sriov_resource(TEAM.partition.pkey)
NETWORK_NS = CFG.network.namespace
POD = "thin-plugin-pod"
CONTAINER_ID = "5eed0000c0ffee"
STANDIN = "gpuaas-standin"


def member() -> Identity:
    return Identity(f"member-of-{TEAM.name}@example.com", tuple(TEAM.groups))


class Node:
    """What a node gives the thin plugin: its config, its kubeconfig, its plugins, its pod."""

    def __init__(self, stack: AppliedStack, tools: Path, root: Path, pod: dict[str, Any]) -> None:
        self.stack, self.tools, self.root, self.pod = stack, tools, root, pod
        self.conf_dir, self.bin_dir, self.record = root / "net.d", root / "bin", root / "calls"
        for d in (self.conf_dir, self.bin_dir, self.record):
            d.mkdir(parents=True)
        for name in (STANDIN, "ib-sriov"):
            (self.bin_dir / name).symlink_to(tools / "cni-standin")
        # The cluster network Multus delegates eth0 to, found by name among confDir's files.
        cluster = CFG.onprem.multus.cluster_network  # type: ignore[union-attr]
        self.cluster_conf = self.conf_dir / "10-cluster.conflist"
        self.cluster_conf.write_text(
            json.dumps({"cniVersion": "0.3.1", "name": cluster, "plugins": [{"type": STANDIN}]})
        )
        self.kubeconfig = self.conf_dir / multus.KUBECONFIG_IN_CONF_DIR
        self.conf = self.multus_conf()

    def multus_conf(self) -> dict[str, Any]:
        """The Multus config of the onprem plan's NicClusterPolicy, with its host paths moved here."""
        (ncp,) = [r.inputs for r in self.stack.run.records if r.inputs.get("kind") == "NicClusterPolicy"]
        conf: dict[str, Any] = json.loads(ncp["spec"]["secondaryNetwork"]["multus"]["config"])
        moved = {"kubeconfig": str(self.kubeconfig), "confDir": str(self.conf_dir), "binDir": str(self.bin_dir)}
        assert conf["kubeconfig"].startswith(conf["confDir"]) and "binDir" not in conf
        if "readinessindicatorfile" in conf:
            moved["readinessindicatorfile"] = str(self.cluster_conf)
        assert conf["namespaceIsolation"] is True and conf["type"] == "multus"
        return {**conf, **moved}

    def refresh(self) -> None:
        """The refresher's script, as its pod runs it on this node (writing Multus' kubeconfig)."""
        cp = self.stack.cp
        written = run_refresher(
            self.root / "refresher",
            token(self.stack.kube, NETWORK_NS),
            cp.ca_file.read_bytes(),
            "127.0.0.1",
            cp.api_port,
        )
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(written, self.kubeconfig)

    def env(self, command: str) -> dict[str, str]:
        meta = self.pod["metadata"]
        return {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": CONTAINER_ID,
            "CNI_IFNAME": "eth0",
            "CNI_ARGS": (
                f"IgnoreUnknown=1;K8S_POD_NAMESPACE={meta['namespace']};K8S_POD_NAME={meta['name']};"
                f"K8S_POD_INFRA_CONTAINER_ID={CONTAINER_ID};K8S_POD_UID={meta['uid']}"
            ),
            "CNI_PATH": str(self.bin_dir),
            "GPUAAS_STANDIN_RECORD": str(self.record),
        }

    def calls(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.record.iterdir())]


@pytest.fixture(scope="module")
def admitted_pod(onprem: AppliedStack, cni_tools: Path) -> Iterator[dict[str, Any]]:
    kube = onprem.kube
    grant_multus(kube, NETWORK_NS)
    kube.wait_for(f"default ServiceAccount in {TEAM.ns}", lambda: kube.get("v1", "ServiceAccount", "default", TEAM.ns))
    kube.wait_for(
        f"quota status in {TEAM.ns}",
        lambda: (kube.get("v1", "ResourceQuota", "gpuaas-team-quota", TEAM.ns) or {}).get("status", {}).get("hard"),
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "namespace": TEAM.ns,
            "annotations": {cni.NETWORKS_ANNOTATION: nad_name(TEAM)},
            # An RDMA pod goes through its team's queue (gpuaas-team-queue-pods; Kueue's pod
            # integration gates it on a cluster, and no Kueue runs here).
            "labels": {QUEUE_LABEL: TEAM.name},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {RESOURCE: "1"}},
                }
            ]
        },
    }
    created = kube.create(pod, as_=member())
    yield created
    gone(kube, "v1", "Pod", POD, TEAM.ns)  # out of the team's quota before the next module's pods


def test_thin_plugin_add_and_del_for_an_admitted_pod(
    onprem: AppliedStack, cni_tools: Path, admitted_pod: dict[str, Any], tmp_path: Path
) -> None:
    why = cni.namespaces_unavailable()
    if why is not None:
        run_guards.skip_machine("network namespaces", f"the thin plugin's pod network and mount namespaces: {why}")
    node = Node(onprem, cni_tools, tmp_path, admitted_pod)
    vf = cni.PROBE_VFS[0]
    checkpoint = {
        "Data": {
            "PodDeviceEntries": [
                {
                    "PodUID": admitted_pod["metadata"]["uid"],
                    "ContainerName": "main",
                    "ResourceName": RESOURCE,
                    "DeviceIDs": {"0": [vf]},
                    "AllocResp": "",
                }
            ],
            "RegisteredDevices": {RESOURCE: list(cni.PROBE_VFS)},
        },
        "Checksum": 0,
    }
    multus_bin = str(cni_tools / "multus")
    stdin = json.dumps(node.conf)
    with cni.node_namespaces(checkpoint) as ns:
        add = node.env("ADD") | {"CNI_NETNS": str(ns.netns)}

        # The file of before: Multus' client cannot be built, every ADD fails, no delegate runs.
        cp = onprem.cp
        node.kubeconfig.parent.mkdir(parents=True)
        node.refresh()
        node.kubeconfig.write_text(
            node.kubeconfig.read_text().replace(
                f"https://127.0.0.1:{cp.api_port}", f"https://[127.0.0.1]:{cp.api_port}"
            )
        )
        broken = ns.run([multus_bin], add, stdin)
        assert broken.returncode != 0 and "host must be a URL or a host:port pair" in broken.stdout + broken.stderr
        assert node.calls() == [], "no delegate ran"

        # The refresher's script rewrites it (no CNI needed for that); the same ADD succeeds.
        node.refresh()
        ok = ns.run([multus_bin], add, stdin)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        result = json.loads(ok.stdout)
        status = json.loads(
            (onprem.kube.get("v1", "Pod", POD, TEAM.ns) or {})["metadata"]["annotations"][cni.NETWORK_STATUS_ANNOTATION]
        )
        added = node.calls()

        deleted = ns.run([multus_bin], node.env("DEL") | {"CNI_NETNS": str(ns.netns)}, stdin)
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        calls = node.calls()

    # ADD: the cluster network on eth0, then exactly the admitted NAD on net1, with the kubelet's VF.
    assert [(c["command"], c["ifName"], c["stdin"]["name"]) for c in added] == [
        ("ADD", "eth0", CFG.onprem.multus.cluster_network),  # type: ignore[union-attr]
        ("ADD", "net1", nad_name(TEAM)),
    ]
    ib = added[1]
    assert ib["netns"] == str(ns.netns) and ib["stdin"]["type"] == "ib-sriov"
    assert ib["stdin"]["deviceID"] == vf, "the VF the kubelet allocated (the checkpoint), not one the pod chose"
    assert ib["stdin"]["pkey"] == json.loads(_nad(onprem)["spec"]["config"])["pkey"]
    assert "args" not in ib["stdin"] and "infinibandGUID" not in json.dumps(ib["stdin"]), "nothing injected"
    assert f"K8S_POD_NAME={POD}" in ib["args"] and f"K8S_POD_NAMESPACE={TEAM.ns}" in ib["args"]
    assert result["interfaces"][0]["name"] == "eth0"
    # Multus wrote the pod's network status as its ServiceAccount (pods/status, the operator's role).
    assert [(s["name"], s.get("interface"), s.get("ips")) for s in status] == [
        (CFG.onprem.multus.cluster_network, "eth0", ["198.51.100.1"]),  # type: ignore[union-attr]
        (f"{TEAM.ns}/{nad_name(TEAM)}", "net1", ["192.0.2.1"]),
    ]
    # DEL: both delegates, the same way back.
    assert sorted((c["command"], c["ifName"]) for c in calls[len(added) :]) == [("DEL", "eth0"), ("DEL", "net1")]

    # What Multus handed ib-sriov, given to the real ib-sriov-cni: it sets no GUID on the VF.
    report = tmp_path / "probe.json"
    probe = cni.run_ib_sriov_probe(cni_tools, ib, report, vf_guid="02:00:00:00:00:01:00:00")
    assert probe["guid"] == "" and probe["vfGUIDAfter"] == "02:00:00:00:00:01:00:00", probe


def _nad(onprem: AppliedStack) -> dict[str, Any]:
    nad = onprem.kube.get("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", nad_name(TEAM), TEAM.ns)
    assert nad is not None
    return nad
