"""ib-sriov-cni changes nothing it should not (issue 24, proof 3).

Isolation on-prem rests on the VF's GUID, which the host script sets from the GUID plan
(components/model/guids.py) and OpenSM lists in the team's partition; ib-sriov-cni programs no
P_Key (a NAD's ``pkey`` is informational) and sets a GUID only when it is handed one, from
``runtimeConfig.infinibandGUID`` or ``args.cni.guid`` (v1.3.0 ``cmd/ib-sriov-cni/main.go``,
``getGUIDFromConf``). For every team NAD of both stacks (and every IPAM mode), the NAD is run the
way a node runs it: Multus' own delegate handling (``types.LoadDelegateNetConf``,
``CreateCNIRuntimeConf``) and libcni's ADD, as Multus' ``confAdd`` calls it, execute the real
ib-sriov-cni binary (e2e/cni, from ../shared/upstream/src), whose probe runs its own
``getNetConfNetns`` and its sriov manager's ``ApplyVFConfig`` on upstream's fake sysfs with a
recording netlink in place of the kernel. Without an injected GUID its code sets none and the
VF keeps the host's; with one in ``cni-args`` (which admission refuses) it overrides the VF's
GUID — that refusal closes the path. ``infiniband-guid`` reaches the plugin only through a NAD
that declares the ``infinibandGUID`` capability: libcni drops it for gpuaas' NADs, and admission
refuses it anyway.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.model.guids import vf_guid
from components.model.resources import sriov_resource
from components.model.teams import OnPremPartition, Team
from components.model.types import colon_guid
from components.tenancy import networks
from e2e import cni
from tests import run_guards, tenancy_objects
from tests.conftest import offline_run, raw_stack

INJECTED = "02:00:00:00:00:00:0b:ad"


def _onprem(ipam: str) -> StackConfig:
    raw = raw_stack("onprem")
    raw["platform"]["fabric"]["ipam"] = ipam
    return parse_config(raw)


def _host_guid(cfg: StackConfig, team: Team) -> str:
    """What the host script gave the team's VF on the first node's first HCA (the GUID plan)."""
    assert cfg.onprem is not None and isinstance(team.partition, OnPremPartition)
    node = min(cfg.onprem.nodes, key=lambda n: n.id)
    return colon_guid(vf_guid(cfg.onprem.fabric.guid_scheme, node.id, 0, team.partition.vf_index))


def team_nads() -> list[tuple[str, Team, StackConfig, dict[str, Any]]]:
    """(label, team, config, NAD) for every NAD a team gets: the onprem stack as planned, and the
    NADs the other IPAM modes render. The aks stack has none (asserted below)."""
    out: list[tuple[str, Team, StackConfig, dict[str, Any]]] = []
    cfg = parse_config(raw_stack("onprem"))
    planned = [r.inputs for r in offline_run("onprem").records if r.inputs.get("kind") == "NetworkAttachmentDefinition"]
    teams = {t.ns: t for t in cfg.teams}
    out += [(f"onprem/{n['metadata']['name']}", teams[n["metadata"]["namespace"]], cfg, n) for n in planned]
    for ipam in ("static", "nv-ipam"):
        variant = _onprem(ipam)
        for team in variant.teams:
            for nad in (tenancy_objects.nad(variant, team), tenancy_objects.rdma_nad(variant, team)):
                if nad is not None:
                    out.append((f"onprem ipam={ipam}/{nad['metadata']['name']}", team, variant, nad))
    return out


NADS = team_nads()


def test_every_partitioned_team_has_a_nad_and_aks_has_none() -> None:
    cfg = parse_config(raw_stack("onprem"))
    planned = {label.split("/", 1)[1] for label, *_ in NADS if label.startswith("onprem/")}
    assert planned == {networks.nad_name(t) for t in cfg.teams if t.partition is not None} and planned
    aks = offline_run("aks").records
    assert not [r for r in aks if r.inputs.get("kind") == "NetworkAttachmentDefinition"], (
        "on AKS a partition is the node pool: no ib-sriov-cni, nothing for it to set"
    )


def test_ib_sriov_cni_reads_the_pkey_field_and_uses_it_nowhere() -> None:
    """The P_Key of a VF is the host's (the VF script writes it, OpenSM enforces it): in
    ib-sriov-cni's own sources the NAD's ``pkey`` is a field of its config type and nothing else."""
    src = run_guards.need_upstream("src/ib-sriov-cni-v1.3.0")  # every file checked against its blob id
    uses = [
        f"{p.relative_to(src)}:{n}: {line.strip()}"
        for p in sorted(src.rglob("*.go"))
        if not p.name.endswith("_test.go") and "/mocks/" not in str(p)
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"(?i)pkey", line)
    ]
    assert uses == ['pkg/types/types.go:29: PKey                string `json:"pkey"`'], uses


def _parsed(annotation: str, ns: str) -> dict[str, Any]:
    (element,) = cni.parse_networks([(ns, {cni.NETWORKS_ANNOTATION: annotation})])[0]["networks"]
    result: dict[str, Any] = element
    return result


def _run(
    tmp: Path, tools: Path, team: Team, nad: dict[str, Any], element: dict[str, Any], host_guid: str
) -> dict[str, Any]:
    """Multus' delegate handling and libcni's ADD of the real ib-sriov-cni (probe), as on a node
    where the kubelet gave the pod the VF 0000:af:06.0 of the team's partition resource."""
    bin_dir, report = tmp / "bin", tmp / "report.json"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "ib-sriov").unlink(missing_ok=True)
    (bin_dir / "ib-sriov").symlink_to(tools / "ib-sriov-cni")
    report.unlink(missing_ok=True)
    answer = cni.delegate(
        {
            "nadConfig": nad["spec"]["config"],
            "element": element,
            "deviceID": cni.PROBE_VFS[0],
            "resourceName": nad["metadata"]["annotations"][networks.RESOURCE_NAME_ANNOTATION],
            "ifName": "net1",
            "netns": "/proc/self/ns/net",
            "containerID": "c0ffee",
            "pod": {"namespace": team.ns, "name": "p", "uid": "00000000-0000-0000-0000-000000000001"},
            "binDir": str(bin_dir),
            "cacheDir": str(tmp / "cache"),
        },
        env=cni.probe_env(report, host_guid),
    )
    assert answer["stage"] == "done", answer
    probe: dict[str, Any] = json.loads(report.read_text())
    assert probe["stage"] == "done", probe
    probe["delegate"] = answer
    return probe


def _guid_calls(probe: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["call"], c["arg"]) for c in probe["calls"] if "GUID" in c["call"]]


@pytest.mark.parametrize(("label", "team", "cfg", "nad"), NADS, ids=[n[0] for n in NADS])
def test_no_guid_without_an_injected_one_and_an_injected_one_overrides(
    label: str, team: Team, cfg: StackConfig, nad: dict[str, Any], cni_tools: Path, tmp_path: Path
) -> None:
    host = _host_guid(cfg, team)
    assert isinstance(team.partition, OnPremPartition)
    assert nad["metadata"]["annotations"][networks.RESOURCE_NAME_ANNOTATION] == sriov_resource(team.partition.pkey)
    name, ns = nad["metadata"]["name"], nad["metadata"]["namespace"]

    # Admitted: the NAD by name, nothing injected.
    plain = _run(tmp_path, cni_tools, team, nad, _parsed(name, ns), host)
    assert plain["guid"] == "" and _guid_calls(plain) == [], plain["calls"]
    assert plain["vfGUIDAfter"] == host, "the VF keeps the GUID the host script set"
    assert plain["deviceID"] == cni.PROBE_VFS[0] and plain["master"] == "ib0", "the kubelet's VF, found in sysfs"
    assert json.loads(nad["spec"]["config"])["pkey"] == plain["pkeyField"], "read, and set on nothing"
    assert {c["call"] for c in plain["calls"]} <= {"LinkByName", "LinkSetVfState"}, plain["calls"]

    # Refused by admission (cni-args): ib-sriov-cni's own code would override the VF's GUID.
    args = json.dumps([{"name": name, "cni-args": {"guid": INJECTED}}])
    forced = _run(tmp_path, cni_tools, team, nad, _parsed(args, ns), host)
    assert forced["guid"] == INJECTED
    assert _guid_calls(forced) == [("LinkSetVfNodeGUID", INJECTED), ("LinkSetVfPortGUID", INJECTED)]
    assert forced["vfGUIDAfter"] == INJECTED != host and forced["hostIFGUID"] == host

    # Refused by admission (infiniband-guid): libcni drops it, the NAD declares no such capability...
    ib_guid = json.dumps([{"name": name, "infiniband-guid": INJECTED}])
    dropped = _run(tmp_path, cni_tools, team, nad, _parsed(ib_guid, ns), host)
    assert dropped["delegate"]["capabilityArgs"]["infinibandGUID"] == INJECTED, "Multus hands it to libcni"
    assert "infinibandGUID" not in dropped["stdin"] and dropped["guid"] == "" and dropped["vfGUIDAfter"] == host
    # ... and a NAD that declared it would get the pod's GUID on its VF.
    declaring = json.loads(json.dumps(nad))
    conf = json.loads(declaring["spec"]["config"])
    conf["capabilities"] = {**conf.get("capabilities", {}), "infinibandGUID": True}
    declaring["spec"]["config"] = json.dumps(conf)
    taken = _run(tmp_path, cni_tools, team, declaring, _parsed(ib_guid, ns), host)
    assert taken["guid"] == INJECTED and taken["vfGUIDAfter"] == INJECTED
