"""The network guards of team pods: own-namespace NADs only, no chosen GUID, annotations kept as admitted.

Why each check exists and how the string checks are made sound is in
:mod:`components.tenancy.admission`'s docstring; :func:`networks_violations` and
:func:`networks_update_violations` mirror the CEL in Python for the tests.
"""

from __future__ import annotations

import re
from typing import Final

from components.k8s import Manifest
from components.tenancy import policy

NETWORKS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/networks"
DEFAULT_NETWORK_ANNOTATION: Final = "v1.multus-cni.io/default-network"
NETWORKS_POLICY: Final = "gpuaas-team-networks"
NETWORKS_IMMUTABLE_POLICY: Final = "gpuaas-team-networks-immutable"
#: Network-selection element keys a tenant may use (nad-client NetworkSelectionElement subset).
ALLOWED_KEYS: Final = ("name", "namespace", "interface", "ips", "mac", "default-route")

# The regular expressions, shared by the CEL text and the Python mirror (RE2 and Python agree on
# these: ASCII classes, (?i), \s, \x escapes). CEL ``matches``/``findAll`` are unanchored.
RE_ALPHABET: Final = r"^[\t\n\r\x20-\x5b\x5d-\x7e]*$"
RE_IS_JSON: Final = r"[\[{\"]"
RE_FORBIDDEN_KEY: Final = r'(?i)"(cni-args|infiniband-guid)"\s*:'
#: One JSON string and, where it is a key, its colon. Whole strings found from the left stay in
#: step with JSON's quote pairs (no backslash: every ``"`` opens or closes one); a pattern for keys
#: alone also matched across two strings of a list (``", ":`` in ``["10.0.0.1", "::1"]``).
RE_STRING_TOKEN: Final = r'"[^"]*"\s*:?'
RE_ALLOWED_KEY: Final = r'^"(' + "|".join(re.escape(k) for k in ALLOWED_KEYS) + r')"\s*:$'
RE_NAMESPACE_KEY: Final = r'"namespace"\s*:'
#: A ``namespace`` member Multus reads as the pod's own: its name, ``""`` or ``null`` (Multus sets
#: an empty namespace to the pod's). The namespace goes between the two parts (a DNS label: no
#: regex syntax in it).
RE_OWN_NAMESPACE_VALUE: Final = (r'"namespace"\s*:\s*("(', r')?"|null)')


def own_namespace_value(namespace: str) -> str:
    """:data:`RE_OWN_NAMESPACE_VALUE` for ``namespace``."""
    return RE_OWN_NAMESPACE_VALUE[0] + namespace + RE_OWN_NAMESPACE_VALUE[1]


#: Go's unicode.IsSpace: what Multus' strings.TrimSpace and CEL's ``trim()`` (cel-go
#: ext/strings.go, strings.TrimSpace) remove. Python's str.strip() also removes U+001C-U+001F.
GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


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
        f"!variables.isJson || variables.networks.matches({_raw(RE_ALPHABET)})",
        f"{NETWORKS_ANNOTATION} in JSON form must be printable ASCII without backslash escapes",
    ),
    (
        "no-cni-args",
        f"!variables.networks.matches({_raw(RE_FORBIDDEN_KEY)})",
        f"{NETWORKS_ANNOTATION} may not set cni-args or infiniband-guid: the node assigns VF GUIDs, "
        "a GUID chosen by a pod could join another team's partition",
    ),
    (
        "allowed-keys",
        f"!variables.isJson || variables.networks.findAll({_raw(RE_STRING_TOKEN)})"
        f".all(t, !t.endsWith(':') || t.matches({_raw(RE_ALLOWED_KEY)}))",
        f"{NETWORKS_ANNOTATION} may use only the keys {', '.join(ALLOWED_KEYS)}",
    ),
    (
        "json-namespace",
        f"!variables.isJson || variables.networks.findAll({_raw(RE_NAMESPACE_KEY)}).size() == "
        f"variables.networks.findAll({_raw(RE_OWN_NAMESPACE_VALUE[0])} + request.namespace + "
        f"{_raw(RE_OWN_NAMESPACE_VALUE[1])}).size()",
        f"{NETWORKS_ANNOTATION} may reference NetworkAttachmentDefinitions of the pod's own namespace only",
    ),
    (
        "text-namespace",
        "variables.isJson || variables.networks.split(',')"
        ".all(item, !item.contains('/') || item.split('/')[0].trim() in ['', request.namespace])",
        f"{NETWORKS_ANNOTATION} may reference NetworkAttachmentDefinitions of the pod's own namespace only",
    ),
    (
        "no-default-network",
        f"!has(object.metadata.annotations) || !('{DEFAULT_NETWORK_ANNOTATION}' in object.metadata.annotations)",
        f"{DEFAULT_NETWORK_ANNOTATION} is not allowed in team namespaces",
    ),
)


def go_trim(s: str) -> str:
    """Go's strings.TrimSpace (and CEL's ``trim()``)."""
    return s.strip(GO_SPACE)


def networks_violations(annotations: dict[str, str], namespace: str) -> list[str]:
    """Python mirror of :data:`NETWORK_CHECKS`: the names of the checks a pod would fail."""
    networks = annotations.get(NETWORKS_ANNOTATION, "")
    is_json = re.search(RE_IS_JSON, networks) is not None
    tokens = re.findall(RE_STRING_TOKEN, networks, re.ASCII)
    ok = {
        "alphabet": not is_json or re.search(RE_ALPHABET, networks) is not None,
        "no-cni-args": re.search(RE_FORBIDDEN_KEY, networks, re.ASCII) is None,
        "allowed-keys": not is_json
        or all(not t.endswith(":") or re.search(RE_ALLOWED_KEY, t, re.ASCII) for t in tokens),
        "json-namespace": not is_json
        or len(re.findall(RE_NAMESPACE_KEY, networks, re.ASCII))
        == len(re.findall(own_namespace_value(namespace), networks, re.ASCII)),
        "text-namespace": is_json
        or all("/" not in item or go_trim(item.split("/")[0]) in ("", namespace) for item in networks.split(",")),
        "no-default-network": DEFAULT_NETWORK_ANNOTATION not in annotations,
    }
    return [name for name, _expr, _msg in NETWORK_CHECKS if not ok[name]]


def networks_policy() -> Manifest:
    return policy.policy(
        NETWORKS_POLICY,
        namespaces=policy.team_namespaces(),
        rules=[policy.resource_rule("", "v1", ["CREATE"], ["pods"])],
        variables=[{"name": "networks", "expression": NETWORKS_VAR}, {"name": "isJson", "expression": IS_JSON}],
        validations=policy.validations(NETWORK_CHECKS),
    )


def networks_binding() -> Manifest:
    return policy.binding(NETWORKS_POLICY, policy.team_namespaces())


# --------------------------------------------------------------------------------------------
# Networks stay as admitted (UPDATE)


#: The annotations Multus reads at every sandbox set-up; neither may change after CREATE.
IMMUTABLE_ANNOTATIONS: Final = (
    ("networks-unchanged", NETWORKS_ANNOTATION),
    ("default-network-unchanged", DEFAULT_NETWORK_ANNOTATION),
)


def _has_annotation(obj: str, key: str) -> str:
    return f"(has({obj}.metadata.annotations) && '{key}' in {obj}.metadata.annotations)"


def _unchanged(key: str) -> str:
    """CEL: ``key`` is on both objects with one value, or on neither."""
    new, old = _has_annotation("object", key), _has_annotation("oldObject", key)
    same = f"object.metadata.annotations['{key}'] == oldObject.metadata.annotations['{key}']"
    return f"{new} == {old} && (!{new} || {same})"


#: (name, CEL expression that must be true, message) — the UPDATE policy's validations.
IMMUTABLE_CHECKS: Final[tuple[tuple[str, str, str], ...]] = tuple(
    (
        name,
        _unchanged(key),
        f"{key} cannot be added, changed or removed after the pod is created: Multus reads it again at every "
        "sandbox set-up; delete the pod and create it with the networks it needs",
    )
    for name, key in IMMUTABLE_ANNOTATIONS
)


def networks_update_violations(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Python mirror of :data:`IMMUTABLE_CHECKS`: the names of the checks an UPDATE would fail."""
    return [name for name, key in IMMUTABLE_ANNOTATIONS if (key in old, old.get(key)) != (key in new, new.get(key))]


def networks_immutable_policy() -> Manifest:
    """UPDATE of a team pod (or its status) may not touch the network annotations."""
    return policy.policy(
        NETWORKS_IMMUTABLE_POLICY,
        namespaces=policy.team_namespaces(),
        rules=[policy.resource_rule("", "v1", ["UPDATE"], ["pods", "pods/status"])],
        validations=policy.validations(IMMUTABLE_CHECKS),
    )


def networks_immutable_binding() -> Manifest:
    return policy.binding(NETWORKS_IMMUTABLE_POLICY, policy.team_namespaces())
