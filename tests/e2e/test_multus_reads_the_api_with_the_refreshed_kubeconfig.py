"""The refresher's kubeconfig works for Multus (issue 24, proof 2; issue 21, item 1).

The refresher's own script (components/fabric/multus_kubeconfig.py) runs against a fake host with
a token of Multus' ServiceAccount — RBAC as the Network Operator grants it (tests/e2e/node_side.py
says from where) — and the real API server's CA; Multus' own client code (``k8sclient.GetK8sClient``,
what the thin plugin's CmdAdd calls first, then ``multus.GetPod`` and ``GetNetAttachDef``: e2e/cni
``cni-harness``, built from ../shared/upstream/src) loads the file and reads a team's pod and NAD
from that server. Beside it, the refusals that show the test can fail: the bracketed IPv4 server
the script wrote before this fix is refused by Multus' client (Go's net/url: "invalid
IP-literal", which client-go reports as "host must be a URL or a host:port pair"), and a token
without Multus' RBAC is refused by the API server. An IPv6 service address keeps its brackets and
Multus' client accepts the file. With the script of before, the first three tests fail.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.tenancy.networks import nad_name
from e2e import cni
from e2e.kube import ApiError, Identity, Kube
from tests import run_guards
from tests.conftest import raw_stack
from tests.e2e.conftest import AppliedStack
from tests.e2e.node_side import (
    MULTUS_CLUSTER_ROLE_RULES,
    OPERATOR_ROLE,
    ca_data,
    grant_multus,
    multus_identity,
    operator_cluster_role,
    run_refresher,
    server_of,
    token,
)
from tests.e2e.settle import gone

CFG: StackConfig = parse_config(raw_stack("onprem"))
TEAM = next(t for t in CFG.teams if t.partition is not None)
NETWORK_NS = CFG.network.namespace
POD = "multus-reads-me"


def member() -> Identity:
    return Identity(f"member-of-{TEAM.name}@example.com", tuple(TEAM.groups))


@pytest.fixture(scope="module")
def stack(onprem: AppliedStack, cni_tools: Path) -> Iterator[AppliedStack]:
    kube = onprem.kube
    grant_multus(kube, NETWORK_NS)
    kube.wait_for(f"default ServiceAccount in {TEAM.ns}", lambda: kube.get("v1", "ServiceAccount", "default", TEAM.ns))
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": TEAM.ns, "annotations": {cni.NETWORKS_ANNOTATION: nad_name(TEAM)}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ]
        },
    }
    kube.wait_for("the team member's pod is admitted", lambda: _create(kube, pod), timeout=60)
    yield onprem
    gone(kube, "v1", "Pod", POD, TEAM.ns)  # out of the team's quota before the next module's pods


def _create(kube: Kube, pod: dict[str, Any]) -> bool:
    if kube.get("v1", "Pod", POD, TEAM.ns) is not None:
        return True
    kube.create(pod, as_=member())
    return True


def _port(stack: AppliedStack) -> int:
    return stack.cp.api_port


def test_multus_reads_the_pod_and_nad_with_the_refreshers_file(stack: AppliedStack, tmp_path: Path) -> None:
    kube = stack.kube
    kubeconfig = run_refresher(
        tmp_path, token(kube, NETWORK_NS), stack.cp.ca_file.read_bytes(), "127.0.0.1", _port(stack)
    )
    assert server_of(kubeconfig) == f"https://127.0.0.1:{_port(stack)}", "net.JoinHostPort: no brackets for IPv4"
    assert ca_data(kubeconfig) == stack.cp.ca_file.read_bytes()
    answer = cni.multus_client(kubeconfig, TEAM.ns, POD, nad_name(TEAM))
    assert answer["stage"] == "done", answer
    assert answer["pod"]["name"] == POD and answer["pod"]["annotations"][cni.NETWORKS_ANNOTATION] == nad_name(TEAM)
    assert answer["nad"]["name"] == nad_name(TEAM) and '"type": "ib-sriov"' in answer["nad"]["config"]


def test_the_bracketed_ipv4_file_of_before_is_refused_by_multus(stack: AppliedStack, tmp_path: Path) -> None:
    """What the script wrote until this fix (``https://[<IPv4>]:<port>``): Multus' client cannot be
    built from it, so every CNI ADD on the node failed."""
    kube = stack.kube
    good = run_refresher(tmp_path, token(kube, NETWORK_NS), stack.cp.ca_file.read_bytes(), "127.0.0.1", _port(stack))
    old = tmp_path / "old.kubeconfig"
    old.write_text(good.read_text().replace(f"https://127.0.0.1:{_port(stack)}", f"https://[127.0.0.1]:{_port(stack)}"))
    answer = cni.multus_client(old, TEAM.ns, POD)
    # client-go (rest.DefaultServerURL) on net/url's "invalid IP-literal":
    assert answer["stage"] == "client", answer
    assert f'host must be a URL or a host:port pair: "https://[127.0.0.1]:{_port(stack)}"' in answer["error"]
    assert cni.multus_client(good, TEAM.ns, POD)["stage"] == "done", "the same file with the address joined right"


def test_without_multus_rbac_the_api_server_refuses_the_read(stack: AppliedStack, tmp_path: Path) -> None:
    """The read works because of the operator's ClusterRole: the same file with the token of a
    ServiceAccount that has none (``default`` of the operator's namespace) is forbidden."""
    kube = stack.kube
    kube.wait_for("default ServiceAccount", lambda: kube.get("v1", "ServiceAccount", "default", NETWORK_NS))
    unbound = token(kube, NETWORK_NS, "default")
    kubeconfig = run_refresher(tmp_path, unbound, stack.cp.ca_file.read_bytes(), "127.0.0.1", _port(stack))
    answer = cni.multus_client(kubeconfig, TEAM.ns, POD)
    assert answer["stage"] == "pod" and "forbidden" in answer["error"], answer
    who = multus_identity(NETWORK_NS)
    assert kube.can_i("get", "pods", TEAM.ns, who) and kube.can_i("update", "pods", TEAM.ns, who, sub="status")
    assert kube.can_i("get", "network-attachment-definitions", TEAM.ns, who, group="k8s.cni.cncf.io")
    assert not kube.can_i("get", "secrets", TEAM.ns, who), "Multus' role reads no secret"
    assert not kube.can_i("patch", "pods", TEAM.ns, who), "nor changes a pod's spec or annotations"


def test_an_ipv6_service_address_keeps_its_brackets_and_multus_takes_it(stack: AppliedStack, tmp_path: Path) -> None:
    """With ``KUBERNETES_SERVICE_HOST=::1`` the server is ``https://[::1]:<port>`` and Multus'
    client is built from it; the read then fails only to connect (nothing listens there: the
    suite's API server is IPv4), never to parse the address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free on IPv4; nothing of ours listens on ::1
    kube = stack.kube
    kubeconfig = run_refresher(tmp_path, token(kube, NETWORK_NS), stack.cp.ca_file.read_bytes(), "::1", port)
    assert server_of(kubeconfig) == f"https://[::1]:{port}"
    answer = cni.multus_client(kubeconfig, TEAM.ns, POD)
    assert answer["stage"] == "pod", answer
    assert f"[::1]:{port}" in answer["error"] and "host must be a URL" not in answer["error"], answer


def test_the_operator_may_grant_multus_these_rules(stack: AppliedStack) -> None:
    """The rules written from the operator's state manifests are within what the chart's operator
    ClusterRole holds: the API server's RBAC escalation check lets the operator's ServiceAccount
    create a ClusterRole with them, and refuses one rule more (deleting nodes, which it lacks)."""
    kube = stack.kube
    role = operator_cluster_role(run_guards.need_upstream(OPERATOR_ROLE), "gpuaas-e2e-network-operator")
    kube.apply(role)
    sa = "gpuaas-e2e-network-operator"
    kube.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": NETWORK_NS}})
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": sa},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NETWORK_NS}],
        }
    )
    operator = Identity(
        f"system:serviceaccount:{NETWORK_NS}:{sa}",
        ("system:serviceaccounts", f"system:serviceaccounts:{NETWORK_NS}", "system:authenticated"),
    )

    def multus_role(rules: list[dict[str, Any]]) -> dict[str, Any]:
        meta = {"name": "gpuaas-e2e-multus-as-the-operator-grants-it"}
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta, "rules": rules}

    kube.wait_for(
        "the operator's role in effect",
        lambda: kube.can_i("create", "clusterroles", None, operator, group="rbac.authorization.k8s.io"),
    )
    kube.create(multus_role(MULTUS_CLUSTER_ROLE_RULES), as_=operator, dry_run=True)
    more = [*MULTUS_CLUSTER_ROLE_RULES, {"apiGroups": [""], "resources": ["nodes"], "verbs": ["delete"]}]
    with pytest.raises(ApiError) as refused:
        kube.create(multus_role(more), as_=operator, dry_run=True)
    assert (
        refused.value.status == 403
        and "attempting to grant RBAC permissions not currently held" in refused.value.message
    )
