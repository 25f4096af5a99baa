"""Admission guards for team pods (ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1).

**Networks** (every platform): a pod in a team namespace may attach only NADs of its own
namespace, and may not choose its own InfiniBand GUID. Multus ``namespaceIsolation`` alone is not
enough: it keeps ``default`` (and ``globalNamespaces``) open, and a pod can put ``cni-args``
(ib-sriov-cni reads ``guid`` there) or ``infiniband-guid`` in its network-selection element —
with SM partitions keyed by GUID, a chosen GUID is a way into another team's partition
(ib-kubernetes README, "predefined Guid in cni-args"). The annotation is a string and CEL has
no JSON parser, so the checks are string checks made sound by first limiting the alphabet:

1. printable ASCII, no backslash — so no JSON escape (``"n\\u0061mespace"``) and no non-ASCII
   letter that Go's case-insensitive key matching folds to ASCII (``ſ`` → ``s``, ``K`` → ``k``);
2. no ``cni-args`` / ``infiniband-guid`` key, any case (Go's encoding/json matches keys to struct
   fields case-insensitively);
3. JSON form: every key is one of :data:`ALLOWED_KEYS`, spelled exactly;
4. JSON form: every ``"namespace"`` value is the pod's own namespace;
5. text form (``a, ns/b@if``): an item with ``/`` names the pod's own namespace;
6. no ``v1.multus-cni.io/default-network`` annotation (a NAD as the pod's primary network).

Multus treats the annotation as JSON when it contains any of ``[{"`` (multus-cni
pkg/k8sclient ``parsePodNetworkAnnotation``); :data:`IS_JSON` mirrors that. :func:`networks_violations`
is a Python mirror of the same expressions, built from the same regular expressions, for tests.

**Node pool** (AKS): a team's partition is its ND pool, so a team pod that requests a GPU or RDMA
resource must select that pool (``nodeSelector`` ``kubernetes.azure.com/agentpool=<pool>``, or a required node affinity
pinning that label ``In [<pool>]`` in every term, as the verification Jobs do). One policy
with ``paramKind: ConfigMap``; its binding reads each namespace's ``gpuaas-scheduling`` ConfigMap
(:func:`components.teams.scheduling_config_map`) as the parameter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import pulumi

from components import k8s as kube
from components.config import StackConfig
from components.k8s import Manifest
from components.teams import PART_OF, POOL_LABEL, SCHEDULING, TEAM_LABEL

NETWORKS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/networks"
DEFAULT_NETWORK_ANNOTATION: Final = "v1.multus-cni.io/default-network"
NETWORKS_POLICY: Final = "gpuaas-team-networks"
POOL_POLICY: Final = "gpuaas-team-node-pool"

#: Network-selection element keys a tenant may use (nad-client NetworkSelectionElement subset).
ALLOWED_KEYS: Final = ("name", "namespace", "interface", "ips", "mac", "default-route")

# The regular expressions, shared by the CEL text and the Python mirror (RE2 and Python agree on
# these: ASCII classes, (?i), \s, \x escapes). CEL ``matches``/``findAll`` are unanchored.
RE_ALPHABET: Final = r"^[\t\n\r\x20-\x5b\x5d-\x7e]*$"
RE_IS_JSON: Final = r"[\[{\"]"
RE_FORBIDDEN_KEY: Final = r'(?i)"(cni-args|infiniband-guid)"\s*:'
RE_KEY: Final = r'"[^"]*"\s*:'
RE_ALLOWED_KEY: Final = r'^"(' + "|".join(re.escape(k) for k in ALLOWED_KEYS) + r')"\s*:$'
RE_NAMESPACE_KEY: Final = r'"namespace"\s*:'
RE_NAMESPACE_VALUE_PREFIX: Final = r'"namespace"\s*:\s*"'


def _raw(regex: str) -> str:
    """A CEL raw string literal of ``regex``."""
    if "'" in regex:
        raise ValueError(f"regex {regex!r} cannot be a single-quoted CEL raw string")
    return f"r'{regex}'"


NETWORKS_VAR: Final = (
    f"has(object.metadata.annotations) && '{NETWORKS_ANNOTATION}' in object.metadata.annotations"
    f" ? object.metadata.annotations['{NETWORKS_ANNOTATION}'] : ''"
)
IS_JSON: Final = f"variables.networks.matches({_raw(RE_IS_JSON)})"

#: (name, CEL expression that must be true, message) — the network policy's validations.
NETWORK_CHECKS: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "alphabet",
        f"variables.networks.matches({_raw(RE_ALPHABET)})",
        f"{NETWORKS_ANNOTATION} must be printable ASCII without backslash escapes",
    ),
    (
        "no-cni-args",
        f"!variables.networks.matches({_raw(RE_FORBIDDEN_KEY)})",
        f"{NETWORKS_ANNOTATION} may not set cni-args or infiniband-guid: the node assigns VF GUIDs, "
        "a GUID chosen by a pod could join another team's partition",
    ),
    (
        "allowed-keys",
        f"!variables.isJson || variables.networks.findAll({_raw(RE_KEY)}).all(k, k.matches({_raw(RE_ALLOWED_KEY)}))",
        f"{NETWORKS_ANNOTATION} may use only the keys {', '.join(ALLOWED_KEYS)}",
    ),
    (
        "json-namespace",
        f"!variables.isJson || variables.networks.findAll({_raw(RE_NAMESPACE_KEY)}).size() == "
        f"variables.networks.findAll({_raw(RE_NAMESPACE_VALUE_PREFIX)} + request.namespace + '\"').size()",
        f"{NETWORKS_ANNOTATION} may reference NetworkAttachmentDefinitions of the pod's own namespace only",
    ),
    (
        "text-namespace",
        "variables.isJson || variables.networks.split(',')"
        ".all(item, !item.contains('/') || item.trim().startsWith(request.namespace + '/'))",
        f"{NETWORKS_ANNOTATION} may reference NetworkAttachmentDefinitions of the pod's own namespace only",
    ),
    (
        "no-default-network",
        f"!has(object.metadata.annotations) || !('{DEFAULT_NETWORK_ANNOTATION}' in object.metadata.annotations)",
        f"{DEFAULT_NETWORK_ANNOTATION} is not allowed in team namespaces",
    ),
)


def networks_violations(annotations: dict[str, str], namespace: str) -> list[str]:
    """Python mirror of :data:`NETWORK_CHECKS`: the names of the checks a pod would fail."""
    networks = annotations.get(NETWORKS_ANNOTATION, "")
    is_json = re.search(RE_IS_JSON, networks) is not None
    ok = {
        "alphabet": re.search(RE_ALPHABET, networks) is not None,
        "no-cni-args": re.search(RE_FORBIDDEN_KEY, networks, re.ASCII) is None,
        "allowed-keys": not is_json
        or all(re.search(RE_ALLOWED_KEY, k, re.ASCII) for k in re.findall(RE_KEY, networks, re.ASCII)),
        "json-namespace": not is_json
        or len(re.findall(RE_NAMESPACE_KEY, networks, re.ASCII))
        == len(re.findall(RE_NAMESPACE_VALUE_PREFIX + namespace + '"', networks, re.ASCII)),
        "text-namespace": is_json
        or all("/" not in item or item.strip().startswith(namespace + "/") for item in networks.split(",")),
        "no-default-network": DEFAULT_NETWORK_ANNOTATION not in annotations,
    }
    return [name for name, _expr, _msg in NETWORK_CHECKS if not ok[name]]


def _team_namespaces(*extra: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}, *extra]}


def networks_policy() -> Manifest:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NETWORKS_POLICY, "labels": dict(PART_OF)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": _team_namespaces(),
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ],
            },
            "variables": [{"name": "networks", "expression": NETWORKS_VAR}, {"name": "isJson", "expression": IS_JSON}],
            "validations": [
                {"expression": expr, "message": msg, "reason": "Forbidden"} for _name, expr, msg in NETWORK_CHECKS
            ],
        },
    }


def _binding(policy: str, **spec: Any) -> Manifest:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": dict(PART_OF)},
        "spec": {"policyName": policy, "validationActions": ["Deny"], **spec},
    }


def networks_binding() -> Manifest:
    return _binding(NETWORKS_POLICY, matchResources={"namespaceSelector": _team_namespaces()})


_ACCEL = "r.startsWith('nvidia.com/') || r.startsWith('rdma/')"
WANTS_ACCELERATOR: Final = (
    "object.spec.containers.exists(c, has(c.resources) && ("
    f"(has(c.resources.requests) && c.resources.requests.exists(r, {_ACCEL})) || "
    f"(has(c.resources.limits) && c.resources.limits.exists(r, {_ACCEL}))))"
)
#: nodeSelector ``key=pool``, or a required node affinity every term of which pins ``key In [pool]``.
SELECTS_POOL: Final = (
    "(has(object.spec.nodeSelector) && params.data.nodeSelectorKey in object.spec.nodeSelector && "
    "object.spec.nodeSelector[params.data.nodeSelectorKey] == params.data.nodeSelectorValue) || "
    "(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
    "has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) && "
    "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.size() > 0 && "
    "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.all(t, "
    "has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == params.data.nodeSelectorKey && "
    "e.operator == 'In' && has(e.values) && e.values.size() > 0 && "
    "e.values.all(v, v == params.data.nodeSelectorValue))))"
)


def pool_policy() -> Manifest:
    """AKS: GPU/RDMA pods of a team must select the team's ND pool (its IB partition)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POOL_POLICY, "labels": dict(PART_OF)},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ],
            },
            "variables": [{"name": "wantsAccelerator", "expression": WANTS_ACCELERATOR}],
            "validations": [
                {
                    "expression": f"!variables.wantsAccelerator || ({SELECTS_POOL})",
                    "messageExpression": (
                        "'GPU/RDMA pods of this team run on its InfiniBand pool: select it with nodeSelector ' + "
                        "params.data.nodeSelectorKey + '=' + params.data.nodeSelectorValue + "
                        f"' (see ConfigMap {SCHEDULING})'"
                    ),
                    "reason": "Forbidden",
                }
            ],
        },
    }


def pool_binding() -> Manifest:
    return _binding(
        POOL_POLICY,
        paramRef={"name": SCHEDULING, "parameterNotFoundAction": "Deny"},
        matchResources={"namespaceSelector": _team_namespaces({"key": POOL_LABEL, "operator": "Exists"})},
    )


def admission_objects(cfg: StackConfig) -> dict[str, Manifest]:
    """Every admission object by role: the network guard, and on AKS the pool guard."""
    out = {"networks-policy": networks_policy(), "networks-binding": networks_binding()}
    if cfg.aks is not None:
        out.update({"pool-policy": pool_policy(), "pool-binding": pool_binding()})
    return out


class Admission(pulumi.ComponentResource):
    """The team admission policies and their bindings (cluster-scoped, a constant count)."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("gpuaas:index:Admission", name, None, opts)
        objects = admission_objects(cfg)
        policies: dict[str, pulumi.CustomResource] = {}
        for role, manifest in objects.items():
            if role.endswith("-policy"):
                policies[role] = kube.apply(f"{name}-{role}", manifest, kube.child(self, list(depends_on)))
        for role, manifest in objects.items():
            if role.endswith("-binding"):
                policy = policies[role.replace("-binding", "-policy")]
                kube.apply(f"{name}-{role}", manifest, kube.child(self, [policy, *depends_on]))
        self.register_outputs({"policies": sorted(m["metadata"]["name"] for m in objects.values())})
