"""Network-selection annotations for differential fuzzing, and what Multus' answer means.

:class:`AnnotationGenerator` writes ``k8s.v1.cni.cncf.io/networks`` (and now and then
``v1.multus-cni.io/default-network``) values from the grammar of every form Multus v4.3.0 accepts
(``pkg/k8sclient/k8sclient.go``, ``parsePodNetworkAnnotation``: JSON when the value holds any of
``[{"``, else a comma list of ``[ns/]name[@iface]``) and its edges: key order, duplicate keys, case
variants and Unicode case folds of keys, escapes, whitespace of every kind in every gap, nesting,
every field of ``NetworkSelectionElement`` and unknown ones, empty items, stray separators, non-ASCII.

:func:`multus_verdict` reads Multus' own parse (from ``cni-harness``) of one pod: ``unsafe`` when
it would attach anything but the pod's own namespace's NADs, hand the CNI a GUID, cni-args or a
device, or replace the cluster network; ``fails`` when Multus refuses the annotation (the pod's
sandbox never comes up, so either admission verdict is safe); ``clean`` otherwise.

:func:`outside_tenant_grammar` is the documented limit of the JSON form (README "Tenancy guards"),
written here with Python's own JSON parser, not with the policy's expressions: printable ASCII
without backslashes, keys spelled exactly as one of :data:`DOCUMENTED_KEYS`, every ``namespace``
the pod's own (or empty, or null: Multus then uses the pod's). A clean annotation outside it is
refused by design (a string check cannot see through escapes or Go's case-insensitive keys).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any

NETWORKS = "k8s.v1.cni.cncf.io/networks"
DEFAULT_NETWORK = "v1.multus-cni.io/default-network"
#: The keys a tenant may use in the JSON form (README "Tenancy guards"), as documented; the
#: policy's own list is not read here.
DOCUMENTED_KEYS = frozenset({"name", "namespace", "interface", "ips", "mac", "default-route"})
#: Multus' namespace for a default-network reference without one (types.LoadNetConf's default;
#: gpuaas' Multus config sets no ``multusNamespace``).
MULTUS_NAMESPACE = "kube-system"
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_PRINTABLE_ASCII = re.compile(r"[\t\n\r\x20-\x5b\x5d-\x7e]*")
# Go's unicode.IsSpace (strings.TrimSpace) and not: U+FEFF and U+200B are not spaces.
_SPACES = (" ", "\t", "\n", "\r", "  ", "\u00a0", "\u2003", "\u0085", "\u3000", "\v", "\f")
_NOT_SPACES = ("\ufeff", "\u200b")


@dataclasses.dataclass(frozen=True)
class Case:
    namespace: str
    annotations: dict[str, str]
    form: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    kind: str  # "unsafe", "fails" or "clean"
    reason: str


class AnnotationGenerator:
    """Annotations for a pod of one of ``teams`` (namespace -> its NAD names)."""

    def __init__(self, rng: random.Random, teams: dict[str, list[str]], shared: list[str]) -> None:
        self.rng = rng
        self.teams = teams
        self.shared = shared  # namespaces every pod may not use but Multus' isolation leaves open

    # -- pieces -------------------------------------------------------------------------------
    def pick(self, *options: Any, weights: list[float] | None = None) -> Any:
        return self.rng.choices(options, weights=weights)[0]

    def ws(self) -> str:
        if self.rng.random() < 0.6:
            return ""
        return "".join(
            self.rng.choice((*_SPACES, *_NOT_SPACES) if self.rng.random() < 0.05 else _SPACES)
            for _ in range(self.rng.randint(1, 2))
        )

    def json_ws(self) -> str:
        return self.pick("", " ", "\n", "\t", "\r\n", "  ", weights=[6, 3, 1, 1, 1, 1])

    def namespace(self, own: str) -> str:
        others = [t for t in self.teams if t != own]
        return str(
            self.pick(
                own,
                self.rng.choice(others),
                self.rng.choice(self.shared),
                "",
                own.upper(),
                own + "x",
                "x" + own,
                own.replace("i", "\u0456", 1) if "i" in own else own + "\u0301",
                "my_ns",
                weights=[40, 20, 10, 4, 3, 2, 2, 2, 1],
            )
        )

    def name(self, ns: str) -> str:
        own = self.teams.get(ns) or ["ib-" + ns]
        others = [n for t, nads in self.teams.items() if t != ns for n in nads]
        return str(
            self.pick(
                self.rng.choice(own),
                self.rng.choice(others),
                "net-" + str(self.rng.randint(0, 99)),
                "IB-" + ns.upper(),
                "ib_x",
                "-ib",
                "ib-",
                "a" * 64,
                "a.b",
                "\u00efb-" + ns,
                "",
                weights=[60, 14, 10, 1, 1, 1, 1, 1, 1, 1, 1],
            )
        )

    def iface(self) -> str:
        return str(
            self.pick(
                "net1",
                "ib0",
                "",
                "\u00e9th",
                "a" * 15,
                "a" * 16,
                "x y",
                "x/y",
                "a\\b",
                "\u00e9" * 8,
                "eth;0",
                weights=[30, 10, 4, 3, 3, 3, 2, 2, 2, 2, 2],
            )
        )

    # -- text form ----------------------------------------------------------------------------
    def text_item(self, own: str) -> str:
        roll = self.rng.random()
        if roll < 0.04:
            return self.ws()  # an empty item
        item = ""
        ns = own
        if roll < 0.55:
            ns = self.namespace(own)
            item += ns + self.ws() + "/" + self.ws()
            if self.rng.random() < 0.03:
                item += self.namespace(own) + "/"  # a second slash
        item += self.name(ns if ns in self.teams else own)
        if self.rng.random() < 0.3:
            item += self.ws() + "@" + self.ws() + self.iface()
            if self.rng.random() < 0.03:
                item += "@" + self.iface()
        return self.ws() + item + self.ws()

    def text(self, own: str) -> str:
        items = [self.text_item(own) for _ in range(self.rng.choice((1, 1, 1, 2, 2, 3, 4)))]
        sep = self.pick(",", ", ", " ,", ",\n", weights=[5, 3, 1, 1])
        value = sep.join(items)
        if self.rng.random() < 0.03:
            value = self.pick(",", " , ") + value
        if self.rng.random() < 0.03:
            value += ","
        return value

    # -- JSON form ----------------------------------------------------------------------------
    def json_string(self, s: str, escape: float = 0.03) -> str:
        out = []
        for ch in s:
            if self.rng.random() < escape and ch.isalnum():
                out.append(self.pick(f"\\u{ord(ch):04x}", f"\\u{ord(ch):04X}"))
            else:
                out.append(json.dumps(ch)[1:-1] if ch in '"\\' or ord(ch) < 0x20 else ch)
        if self.rng.random() < escape / 3:
            out.append("\\/x")
        return '"' + "".join(out) + '"'

    def key(self, k: str) -> str:
        roll = self.rng.random()
        if roll < 0.04:
            k = self.pick(k.upper(), k.capitalize(), k.swapcase())
        elif roll < 0.06:
            # Unicode letters Go's encoding/json folds to ASCII ones (ſ -> s, K (U+212A) -> k).
            k = k.replace("s", "\u017f", 1).replace("k", "\u212a", 1)
        return self.json_string(k)

    def ips(self) -> str:
        pool = ("10.0.0.5", "10.0.0.5/24", "fd00::5/64", "::1", "::ffff:10.1.1.1", "::", "bad-ip", "")
        weights = [3, 3, 3, 3, 2, 1, 0.5, 0.5]
        ips = self.rng.choices(pool, weights=weights, k=self.rng.randint(1, 3))
        return "[" + ", ".join(json.dumps(ip) for ip in ips) + "]"

    def member_value(self, k: str, own: str, ns: str) -> str:
        if k == "name":
            return self.json_string(self.name(ns))
        if k == "namespace":
            return str(self.pick(self.json_string(ns), "null", '""', weights=[14, 1, 1]))
        if k == "interface":
            return self.json_string(self.iface())
        if k == "ips":
            return self.ips()
        if k == "default-route":
            return json.dumps([self.pick("10.0.0.1", "::1", "fd00::1", "bad", weights=[3, 2, 2, 1])])
        if k == "mac":
            return json.dumps(
                self.pick("02:00:00:00:00:01", "bad", "", "02:00:00:00:00:00:00:01", weights=[6, 1, 1, 2])
            )
        if k == "cni-args":
            return str(
                self.pick(
                    '{"guid": "02:00:00:00:00:00:00:01"}', "{}", "null", '{"pkey": "0x8001"}', '{"a": {"b": [1, "x"]}}'
                )
            )
        if k == "infiniband-guid":
            return json.dumps(
                self.rng.choice(
                    (
                        "02:00:00:00:00:00:00:01",
                        "",
                        "bad",
                        "00:00:10:49:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:00:01",
                    )
                )
            )
        if k == "deviceID":
            return json.dumps(self.rng.choice(("0000:af:06.1", "")))
        return str(self.pick('"x"', "1", "true", "null", "[]", "{}", '{"rate": 1}', '[{"hostPort": 80}]'))

    def element(self, own: str) -> str:
        ns = own
        members: list[tuple[str, str]] = []
        if self.rng.random() < 0.55:
            ns = self.namespace(own)
        keys: list[str] = []
        if self.rng.random() < 0.92:
            keys.append("name")
        if ns != own or self.rng.random() < 0.5:
            keys.append("namespace")
        for k, p in (
            ("interface", 0.25),
            ("ips", 0.15),
            ("mac", 0.08),
            ("default-route", 0.06),
            ("cni-args", 0.06),
            ("infiniband-guid", 0.06),
            ("deviceID", 0.04),
            ("interfaceRequest", 0.03),
            ("portMappings", 0.02),
            ("bandwidth", 0.02),
            ("ipam-claim-reference", 0.02),
            ("foo", 0.03),
        ):
            if self.rng.random() < p:
                keys.append(k)
        if keys and self.rng.random() < 0.06:
            keys.append(self.rng.choice(keys))  # a key twice
        self.rng.shuffle(keys)
        for k in keys:
            ns_for_value = self.namespace(own) if (k == "namespace" and keys.count("namespace") > 1) else ns
            members.append((self.key(k), self.member_value(k, own, ns_for_value)))
        w = self.json_ws
        return "{" + w() + ("," + w()).join(f"{k}{w()}:{w()}{v}" for k, v in members) + w() + "}"

    def json_form(self, own: str) -> str:
        roll = self.rng.random()
        if roll < 0.03:
            return self.element(own)  # an object, not a list
        if roll < 0.05:
            return str(self.pick("[null]", "[]", '"ib-x"', "null", "[[]]", '[{"name": "ib-x"}] x', "[{}]"))
        n = self.pick(1, 2, 3, 0, weights=[6, 3, 1, 0.3])
        w = self.json_ws
        return "[" + w() + ("," + w()).join(self.element(own) for _ in range(n)) + w() + "]"

    # -- a case -------------------------------------------------------------------------------
    def case(self) -> Case:
        own = self.rng.choice(list(self.teams))
        roll = self.rng.random()
        annotations: dict[str, str] = {}
        if roll < 0.03:
            form = "none"
        elif roll < 0.05:
            form, annotations[NETWORKS] = "empty", self.pick("", " ")
        elif roll < 0.45:
            form, annotations[NETWORKS] = "text", self.text(own)
        else:
            form, annotations[NETWORKS] = "json", self.json_form(own)
        if self.rng.random() < 0.05:
            form += "+default-network"
            annotations[DEFAULT_NETWORK] = str(
                self.pick(
                    self.rng.choice(self.teams[own]),
                    f"{own}/{self.rng.choice(self.teams[own])}",
                    "k8s-pod-network",
                    json.dumps([{"name": "k8s-pod-network"}]),
                    "",
                    "a,b",
                )
            )
        return Case(own, annotations, form)


# --------------------------------------------------------------------------------------------
# What Multus' parse means


def _injected(element: dict[str, Any]) -> list[str]:
    out = []
    if element.get("cni-args"):
        out.append(f"cni-args {json.dumps(element['cni-args'])}")
    if element.get("infiniband-guid"):
        out.append(f"infiniband-guid {element['infiniband-guid']}")
    if element.get("deviceID"):
        out.append(f"deviceID {element['deviceID']}")
    return out


def _networks_verdict(namespace: str, parsed: dict[str, Any]) -> Verdict:
    if parsed.get("panic"):
        return Verdict("fails", f"Multus panics ({parsed['panic']})")
    if parsed.get("error"):
        return Verdict("fails", f"Multus refuses it: {parsed['error']}")
    if parsed.get("noNetwork"):
        return Verdict("clean", "no network attachment")
    unsafe = []
    for e in parsed["networks"] or []:
        ref = f"{e.get('namespace', '')}/{e.get('name', '')}"
        if e.get("namespace") != namespace:
            unsafe.append(f"attaches {ref}, not a NAD of {namespace}")
        unsafe += [f"hands {x} to the CNI for {ref}" for x in _injected(e)]
    if unsafe:
        return Verdict("unsafe", "; ".join(unsafe))
    bad = [e.get("name", "") for e in parsed["networks"] or [] if not _OBJECT_NAME.fullmatch(e.get("name", ""))]
    if bad:
        return Verdict("fails", f"no NAD can be named {bad[0]!r}: Multus' lookup fails")
    names = ", ".join(f"{e['namespace']}/{e['name']}" for e in parsed["networks"] or [])
    return Verdict("clean", f"attaches {names or 'nothing'}")


def _default_network_verdict(parsed: dict[str, Any]) -> Verdict:
    if parsed.get("panic") or parsed.get("error") or parsed.get("noNetwork"):
        return Verdict(
            "fails", f"Multus refuses the default network ({parsed.get('panic') or parsed.get('error') or 'empty'})"
        )
    nets = parsed["networks"] or []
    if len(nets) != 1:
        return Verdict("fails", "Multus refuses more than one default network")
    e = nets[0]
    return Verdict("unsafe", f"replaces the pod's cluster network with {e.get('namespace')}/{e.get('name')}")


def multus_verdict(case: Case, networks: dict[str, Any], default: dict[str, Any] | None) -> Verdict:
    """``networks``: Multus' parse of the pod; ``default``: of its default-network annotation as
    Multus reads it (a pod in :data:`MULTUS_NAMESPACE`), None without one."""
    verdicts = [_networks_verdict(case.namespace, networks)]
    if default is not None:
        verdicts.append(_default_network_verdict(default))
    for kind in ("unsafe", "fails"):
        hits = [v.reason for v in verdicts if v.kind == kind]
        if hits:
            return Verdict(kind, "; ".join(hits))
    return verdicts[0]


def outside_tenant_grammar(value: str, namespace: str) -> str | None:
    """Why a value Multus parses cleanly is outside the documented tenant grammar, or None."""
    if not any(c in value for c in '[{"'):
        return None  # the comma form: every spelling Multus accepts is in
    if not _PRINTABLE_ASCII.fullmatch(value):
        return "the JSON form holds a character outside printable ASCII, or a backslash"
    pairs: list[tuple[str, Any]] = []

    def hook(kv: list[tuple[str, Any]]) -> dict[str, Any]:
        pairs.extend(kv)
        return dict(kv)

    try:
        json.loads(value, object_pairs_hook=hook)
    except ValueError as e:
        return f"Python's JSON parser refuses it ({e})"
    for k, v in pairs:
        if k not in DOCUMENTED_KEYS:
            return f"key {k!r} is not one of {', '.join(sorted(DOCUMENTED_KEYS))}"
        if k == "namespace" and v not in (namespace, "", None):
            return f"a namespace key names {v!r}"
    return None
