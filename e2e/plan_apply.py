"""Apply an offline plan to a real API server, in install order, and compare what it stored.

The offline plan (:mod:`components.plan.offline`) records every Kubernetes object the program
registers, in registration order (= install order: the program registers in the order of
``components/platform.py``). Here each object goes to the API server with server-side apply;
Helm releases are not objects (the charts are not reachable offline), so the CRDs their charts
would install come from ``../shared/upstream`` instead, at the chart versions we pin.

``stored_differences`` is the check the issue asks for: every field we sent must come back as we
sent it. A custom-resource field the structural schema does not know is pruned silently by the
API server; a value it rewrites (``defaulted in a surprising way``) is a plan that does not mean
what it says. Known canonicalisations of the API server are listed in ``_CANONICAL``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from components.model import versions
from components.plan.offline import Record, Run
from components.plan.writer import HELM_RELEASE, manifest
from e2e import upstream
from e2e.kube import ApiError, Kube, Obj

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = upstream.upstream_dir()


#: Where the CRDs of each chart we install live in the upstream folder, newest pinned first; each
#: file checked against its upstream blob id (e2e/upstream.py).
def crd_roots() -> list[Path]:
    root = upstream.root()
    return [
        root / "network-operator" / versions.NETWORK_OPERATOR_CHART,
        root / "gpu-operator" / versions.GPU_OPERATOR_CHART,
        root / "multus" / "crds",
        root / "kueue",
        # ServiceMonitor and PrometheusRule (observability): the Prometheus stack gpuaas plugs into brings them.
        root / "prometheus-operator-v0.93.0" / "crds",
    ]


def upstream_available() -> bool:
    return upstream.present()


@dataclasses.dataclass(frozen=True)
class Planned:
    """One object of the plan: the record (for its options) and the manifest sent."""

    record: Record
    obj: Obj

    @property
    def ref(self) -> str:
        meta = self.obj.get("metadata", {})
        ns = meta.get("namespace")
        return f"{self.obj['kind']} {ns + '/' if ns else ''}{meta.get('name')}"


def planned_objects(run: Run) -> list[Planned]:
    """Every Kubernetes object of ``run`` in registration order (NodePatch as its Node)."""
    out: list[Planned] = []
    for r in run.records:
        if not r.custom or not r.type.startswith("kubernetes:") or r.type == HELM_RELEASE:
            continue
        if r.type.startswith("pulumi:providers:"):
            continue
        obj = manifest(r)
        if "apiVersion" not in obj or "kind" not in obj:
            continue
        out.append(Planned(r, obj))
    return out


def _crd_docs(root: Path) -> Iterator[Obj]:
    for f in sorted(root.rglob("*.y*ml")):
        try:
            docs = list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError:
            continue
        for d in docs:
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition":
                yield d


def crd_index(roots: Iterable[Path] | None = None) -> dict[tuple[str, str], Obj]:
    """(group, kind) -> CRD, the first root that has it wins."""
    index: dict[tuple[str, str], Obj] = {}
    for root in roots or crd_roots():
        if not root.is_dir():
            continue
        for d in _crd_docs(root):
            key = (d["spec"]["group"], d["spec"]["names"]["kind"])
            index.setdefault(key, d)
    return index


def needed_crds(kube: Kube, objs: Iterable[Obj], index: dict[tuple[str, str], Obj]) -> list[Obj]:
    """The CRDs for every kind in ``objs`` that the server does not serve yet; none found is an error."""
    needed: dict[tuple[str, str], Obj] = {}
    missing: set[str] = set()
    for api_version, kind in sorted({(o["apiVersion"], o["kind"]) for o in objs}):
        key = (api_version.rpartition("/")[0], kind)
        if key in needed or kube.served(api_version, kind):
            continue
        if key in index:
            needed[key] = index[key]
        else:
            missing.add(f"{kind}.{key[0]}")
    if missing:
        raise LookupError(f"no upstream CRD for {', '.join(sorted(missing))} under {UPSTREAM}")
    return list(needed.values())


def install_crds(kube: Kube, crds: Iterable[Obj]) -> None:
    crds = list(crds)
    for crd in crds:
        body = {k: v for k, v in crd.items() if k != "status"}
        kube.apply(body, manager="gpuaas-e2e-crds")
    for crd in crds:
        name = crd["metadata"]["name"]

        def established(name: str = name) -> bool:
            got = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) or {}
            conds = (got.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

        kube.wait_for(f"CRD {name} established", established, timeout=60)


def node_objects(run: Run) -> list[Obj]:
    """Node objects for the nodes the plan patches (no kubelet registers them here)."""
    nodes = []
    for p in planned_objects(run):
        if p.obj["kind"] == "Node":
            name = p.obj["metadata"]["name"]
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                }
            )
    return nodes


# --------------------------------------------------------------------------------------------
# what the server stored vs what we sent

#: API-server canonicalisations that are not a change of meaning: (path suffix, sent -> stored).
_CANONICAL_QUANTITY_KEYS = ("hard", "requests", "limits", "default", "defaultRequest", "max", "min", "capacity")


_SUFFIX: dict[str, Decimal | int] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip


def _quantity(text: str) -> Decimal | None:
    """The value of a Kubernetes quantity, enough to see that ``1Ti`` and ``1024Gi`` are one."""
    m = re.fullmatch(r"([+-]?[0-9.]+)([eE][+-]?[0-9]+)?([KMGTPE]i|[numkMGTPE])?", text)
    if not m:
        return None
    num = Decimal(m.group(1) + (m.group(2) or ""))
    return num * Decimal(_SUFFIX[m.group(3) or ""])


def _quantity_equal(a: Any, b: Any) -> bool:
    qa, qb = _quantity(str(a)), _quantity(str(b))
    return qa is not None and qa == qb


def stored_differences(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Paths where ``stored`` lacks or changes what ``sent`` has (extra stored fields are fine)."""
    diffs: list[str] = []
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [f"{path}: sent a map, stored {stored!r}"]
        for k, v in sent.items():
            sub = f"{path}.{k}" if path else k
            if k not in stored:
                if v in ({}, [], None):
                    continue  # empty values are omitted on output (omitempty)
                diffs.append(f"{sub}: pruned (sent {_short(v)})")
            else:
                diffs += stored_differences(v, stored[k], sub)
    elif isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [f"{path}: sent {_short(sent)}, stored {_short(stored)}"]
        for i, (a, b) in enumerate(zip(sent, stored, strict=True)):
            diffs += stored_differences(a, b, f"{path}[{i}]")
    elif sent != stored:
        parent = path.rsplit(".", 2)[-2] if path.count(".") >= 1 else ""
        if parent in _CANONICAL_QUANTITY_KEYS and _quantity_equal(sent, stored):
            return []
        if isinstance(sent, (int, float)) and str(sent) == str(stored):
            return []
        diffs.append(f"{path}: sent {_short(sent)}, stored {_short(stored)}")
    return diffs


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) < 120 else s[:117] + "..."


@dataclasses.dataclass
class Applied:
    planned: Planned
    stored: Obj


def stack_namespaces(objs: Iterable[Planned]) -> list[str]:
    """Namespaces of the Prometheus stack gpuaas plugs into (observability.prometheus.namespace, the
    dashboards' namespace): they exist before gpuaas, like its CRDs; the plan puts objects there
    but never creates them. Any other missing namespace stays the plan's own error."""
    kinds = {"PrometheusRule", "ConfigMap"}
    planned = {p.obj["metadata"]["name"] for p in objs if p.obj["kind"] == "Namespace"}
    out = {
        p.obj["metadata"]["namespace"]
        for p in objs
        if p.obj["kind"] in kinds and p.record.name.startswith("gpuaas-observability-")
    }
    return sorted(out - planned)


def apply_plan(kube: Kube, run: Run, manager: str = "gpuaas-plan") -> list[Applied]:
    """Nodes, CRDs, then every object in install order; the server's refusal names the object."""
    objs = planned_objects(run)
    install_crds(kube, needed_crds(kube, (p.obj for p in objs), crd_index()))
    for ns in stack_namespaces(objs):
        if kube.get("v1", "Namespace", ns) is None:
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for node in node_objects(run):
        if kube.get("v1", "Node", node["metadata"]["name"]) is None:
            kube.create(node)
    done: list[Applied] = []
    for p in objs:
        try:
            stored = kube.apply(p.obj, manager=manager)
        except ApiError as e:
            raise PlanRefusedError(p, e) from e
        done.append(Applied(p, stored))
    return done


class PlanRefusedError(Exception):
    def __init__(self, planned: Planned, error: ApiError) -> None:
        super().__init__(f"the API server refused {planned.ref} ({planned.record.name}): {error}")
        self.planned = planned
        self.error = error
