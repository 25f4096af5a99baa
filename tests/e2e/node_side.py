"""What the node-side e2e tests share: Multus' identity as the Network Operator grants it, and the
refresher's kubeconfig as its script writes it on a node.

**Multus' RBAC.** The operator creates the ``multus`` ServiceAccount, ClusterRole and
ClusterRoleBinding from its state manifests (Mellanox/network-operator v26.4.1, commit 85afd6d9,
``manifests/state-multus-cni/0010-cluter_role.yml`` blob e755890d, ``0020-service_account.yml``
blob 37ffc347, ``0030-cluter_role_binding.yml`` blob e9e23773). Those manifests are not in
../shared/upstream (the chart there holds no state manifests); the rules below are written from
them as they are at that tag, not from the chart. No operator runs in the suite, so the tests
create these three objects as the operator would. What ties the rules to ../shared/upstream: the
operator's own ClusterRole in the chart (``charts/network-operator-v26.4.1/templates/role.yaml``)
has no ``escalate`` verb, so the API server lets the operator create the ``multus`` role only if it
holds every permission in it — :func:`operator_cluster_role` and the test that does so.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import yaml

from components.fabric import multus, multus_kubeconfig
from e2e.kube import Identity, Kube

SERVICE_ACCOUNT: Final = multus_kubeconfig.SERVICE_ACCOUNT
#: network-operator v26.4.1 manifests/state-multus-cni/0010-cluter_role.yml, rules as written there.
MULTUS_CLUSTER_ROLE_RULES: Final[list[dict[str, Any]]] = [
    {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    },
    {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "update"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims", "resourceclaims/status", "resourceslices"],
        "verbs": ["get", "list"],
    },
]


#: The chart's template of the operator's ClusterRole (controller-gen output; one Helm expression, the name).
OPERATOR_ROLE: Final = "charts/network-operator-v26.4.1/templates/role.yaml"


def operator_cluster_role(template: Path, name: str) -> dict[str, Any]:
    """The chart's operator ClusterRole, rendered: its licence comment dropped, its name set."""
    text = template.read_text().split("*/}}", 1)[1]
    text = text.replace('{{ include "network-operator.fullname" . }}', name)
    assert "{{" not in text, f"{template}: a Helm expression this renderer does not know"
    role: dict[str, Any] = yaml.safe_load(text)
    role["metadata"] = {"name": name}
    return role


def multus_identity(namespace: str) -> Identity:
    """The ServiceAccount's user and groups, as the API server authenticates its token."""
    return Identity(
        f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


def grant_multus(kube: Kube, namespace: str) -> None:
    """The operator's ``multus`` ServiceAccount, ClusterRole and binding (0010-0030), applied."""
    kube.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace}}
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "multus"},
            "rules": MULTUS_CLUSTER_ROLE_RULES,
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "multus"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "multus"},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}],
        }
    )


def token(kube: Kube, namespace: str, service_account: str = SERVICE_ACCOUNT) -> str:
    """A bound token for the ServiceAccount (TokenRequest), as the kubelet projects one."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
    answer = kube.request("POST", path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    return str(answer["status"]["token"])


def run_refresher(
    workdir: Path, sa_token: str, ca: bytes, host: str, port: int | str, script: str = multus_kubeconfig.SCRIPT
) -> Path:
    """The refresher's script, once, against a fake host: its projected token and CA in a
    directory, the host's CNI directory another; the environment the kubelet gives its pod.
    Returns the kubeconfig it wrote where Multus reads it."""
    bash = shutil.which("bash")
    assert bash is not None, "bash is needed to run the refresher's script"
    sa = workdir / "serviceaccount"
    sa.mkdir(parents=True, exist_ok=True)
    (sa / "token").write_text(sa_token)
    (sa / "ca.crt").write_bytes(ca)
    out = workdir / "host-cni" / multus.KUBECONFIG_IN_CONF_DIR
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SA_DIR": str(sa),
        "KUBECONFIG_FILE": str(out),
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "ONCE": "1",
    }
    subprocess.run([bash, "-c", script], env=env, check=True, capture_output=True, timeout=30)
    return out


def server_of(kubeconfig: Path) -> str:
    """The ``server:`` line of a kubeconfig file, as written."""
    for line in kubeconfig.read_text().splitlines():
        if line.strip().startswith("server:"):
            return line.split("server:", 1)[1].strip()
    raise AssertionError(f"{kubeconfig} has no server line")


def ca_data(kubeconfig: Path) -> bytes:
    for line in kubeconfig.read_text().splitlines():
        if line.strip().startswith("certificate-authority-data:"):
            return base64.b64decode(line.split(":", 1)[1].strip())
    raise AssertionError(f"{kubeconfig} has no certificate-authority-data")
