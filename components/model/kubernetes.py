"""The Kubernetes minors gpuaas supports: one table of support dates, and what moves with a minor.

:data:`MINORS` is the one table of support dates (:mod:`components.rules.versions` refuses a
version past its end and warns within :data:`WARN_DAYS` of it); :data:`FEATURES` says from which
minor a feature gate is on by default (:func:`feature_since`, :func:`has_feature`: data for every
area, e.g. HAMi's DRA driver needs ``DRAConsumableCapacity``); :data:`AKS_OS_SKUS`, the charts'
``kubeVersion`` constraints (:data:`CHART_KUBE_VERSIONS`, checked with :func:`satisfies`) and
Kueue's range are the other facts that move with a minor. Pure data and arithmetic, no clock:
callers pass the date (``__main__.py`` reads it once), so a plan never depends on the day.

Sources, read on :data:`REVIEWED` (update them together, and this date, when a minor is added):

- upstream end of life: kubernetes.io/releases (kubernetes/website ``data/releases/schedule.yaml``;
  a minor's end of life is its release month + 14 months, day 28, by the release team's rule);
- AKS: the "AKS Kubernetes release calendar" of learn.microsoft.com/azure/aks/supported-kubernetes-versions
  (MicrosoftDocs/azure-aks-docs articles/aks/supported-kubernetes-versions.md, ms.date 2026-08-05,
  read from its 2026-08-21 snapshot): a month-only end of life is "the last day of the specified
  month"; LTS (premium tier, paid) is not counted. GA as announced in the AKS release notes
  (Azure/AKS CHANGELOG.md): 1.35 on 2026-03-05, 1.36 on 2026-06-19; 1.37 is in the calendar for
  Oct 2026. Patches 1.36.3, 1.35.7 and 1.34.10: AKS release notes 2026-09-04 (Azure/AKS#5948);
- OS SKUs: azure-aks-docs articles/aks/upgrade-os-version.md (2026-07-13);
- feature gates: k8s.io/kubernetes v1.37.2 ``pkg/features/kube_features.go`` and k8s.io/apiserver
  v0.37.2 ``pkg/features/kube_features.go`` (their versioned specs; tests/e2e read them to check
  this table);
- charts: each chart's ``Chart.yaml`` ``kubeVersion`` in ../shared/upstream/charts (tests read them);
- Kueue v0.19.2: README.md "Requires Kubernetes 1.29 or newer"; its own e2e runs on
  ``E2E_K8S_VERSIONS ?= 1.34.8 1.35.5 1.36.1`` (hack/make/test.mk); built against k8s.io/api v0.36.2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Final

Minor = tuple[int, int]

#: The day the table and its sources were last read.
REVIEWED: Final = date(2026, 12, 1)
#: A version this close to its end gets a warning on the console (never a plan change).
WARN_DAYS: Final = 60

UPSTREAM: Final = "kubernetes.io/releases"
AKS_CALENDAR: Final = "AKS Kubernetes release calendar, learn.microsoft.com/azure/aks/supported-kubernetes-versions"
AKS_OS_DOC: Final = "learn.microsoft.com/azure/aks/upgrade-os-version"


@dataclass(frozen=True)
class Support:
    """One minor's support dates. ``aks_*`` are ``None`` where AKS never offered it in standard support."""

    minor: Minor
    end_of_life: date
    aks_ga: date | None = None
    aks_end_of_support: date | None = None
    source: str = "AKS calendar"
    """Where this row's AKS dates come from (the upstream date is always kubernetes.io/releases)."""

    @property
    def name(self) -> str:
        return f"{self.minor[0]}.{self.minor[1]}"


#: Oldest first. AKS GA dates are the release notes' where announced, else the calendar month's last day.
MINORS: Final[tuple[Support, ...]] = (
    Support((1, 32), date(2026, 2, 28), date(2025, 4, 30), date(2026, 3, 31)),
    Support((1, 33), date(2026, 6, 28), date(2025, 6, 30), date(2026, 7, 31)),
    Support((1, 34), date(2026, 10, 28), date(2025, 11, 30), date(2026, 11, 30)),
    Support(
        (1, 35), date(2027, 2, 28), date(2026, 3, 5), date(2027, 3, 31), "AKS calendar; GA: release notes 2026-03-05"
    ),
    Support(
        (1, 36), date(2027, 6, 28), date(2026, 6, 19), date(2027, 6, 30), "AKS calendar; GA: release notes 2026-06-19"
    ),
    Support((1, 37), date(2027, 10, 28), date(2026, 10, 31), date(2027, 10, 31), "AKS calendar (GA planned Oct 2026)"),
)

#: At most 9 ASCII digits a number: a version is read as ints, and Python refuses to read more than
#: 4300 digits (``sys.get_int_max_str_digits``) with a ValueError no rule expects.
_VERSION = re.compile(r"^v?([0-9]{1,9})\.([0-9]{1,9})(?:\.([0-9]{1,9}))?$")


def parse(text: str) -> tuple[int, int, int] | None:
    """``1.36``, ``1.36.3`` or ``v1.36.3`` as ``(1, 36, 3)`` (a missing patch is 0); ``None`` otherwise."""
    m = _VERSION.match(text.strip())
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def minor_of(text: str) -> Minor | None:
    v = parse(text)
    return None if v is None else (v[0], v[1])


def fmt(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def support(minor: Minor) -> Support | None:
    return next((s for s in MINORS if s.minor == minor), None)


def end_of(s: Support, aks: bool) -> date | None:
    """The day support ends: AKS's standard support on AKS, upstream's end of life elsewhere."""
    return s.aks_end_of_support if aks else s.end_of_life


def supported(today: date, aks: bool) -> list[Support]:
    """The minors a stack may run on ``today``: released (GA on AKS) and not past their end."""
    out = []
    for s in MINORS:
        end = end_of(s, aks)
        if end is None or end < today or (aks and (s.aks_ga is None or s.aks_ga > today)):
            continue
        out.append(s)
    return out


# --------------------------------------------------------------------------------------------
# Feature gates: from which minor each is on by default


@dataclass(frozen=True)
class Feature:
    """A feature gate's stages, as ``(minor, stage, on by default)`` from its first minor on."""

    name: str
    stages: tuple[tuple[Minor, str, bool], ...]
    why: str
    """What gpuaas (or a peer) uses it for."""

    def since(self) -> Minor | None:
        """The first minor where the gate is on by default; ``None`` if it never is yet."""
        return next((m for m, _stage, on in self.stages if on), None)

    def stage(self, minor: Minor) -> str | None:
        """The gate's stage at ``minor`` (``Alpha``, ``Beta``, ``GA``); ``None`` before it exists."""
        current = None
        for m, stage, _on in self.stages:
            if m <= minor:
                current = stage
        return current


FEATURES: Final[dict[str, Feature]] = {
    f.name: f
    for f in (
        Feature(
            "DynamicResourceAllocation",
            (((1, 26), "Alpha", False), ((1, 32), "Beta", False), ((1, 34), "GA", True), ((1, 35), "GA", True)),
            "resource.k8s.io/v1: gpuOperator.resourceModel dra (ResourceClaims, DeviceClasses, claim quotas)",
        ),
        Feature(
            "DRAPartitionableDevices",
            (((1, 33), "Alpha", False), ((1, 36), "Beta", True)),
            "gpuOperator.dra.dynamicMig: the NVIDIA DRA driver's partitionable MIG devices",
        ),
        Feature(
            "DRAConsumableCapacity",
            (((1, 34), "Alpha", False), ((1, 36), "Beta", True)),
            "a device allocated to several claims (allowMultipleAllocations): HAMi's DRA driver",
        ),
        Feature(
            "DRAExtendedResource",
            (((1, 34), "Alpha", False), ((1, 36), "Beta", True), ((1, 37), "GA", True)),
            "extended-resource requests (nvidia.com/gpu) served by a DRA driver",
        ),
        Feature(
            "MutatingAdmissionPolicy",
            (((1, 32), "Alpha", False), ((1, 34), "Beta", False), ((1, 36), "GA", True)),
            "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (gpuaas validates only: tenancy/teams.py)",
        ),
    )
}


def feature_since(name: str) -> Minor | None:
    """The first minor where feature gate ``name`` is on by default (``KeyError`` for an unknown gate)."""
    return FEATURES[name].since()


def has_feature(name: str, version: str) -> bool:
    """Whether gate ``name`` is on by default in Kubernetes ``version`` (``1.36``, ``1.36.3``)."""
    since, minor = feature_since(name), minor_of(version)
    return since is not None and minor is not None and minor >= since


# --------------------------------------------------------------------------------------------
# What else moves with a minor

#: AKS OS SKUs gpuaas pins → the minors AKS supports them on (upgrade-os-version.md: Ubuntu2204
#: "1.25 to 1.36", Ubuntu2404 "1.32 to 1.38"). Ubuntu 24.04 node images run containerd 2.0, and the
#: Network Operator appends the OS to the DOCA driver's tag (``-ubuntu24.04-amd64``).
AKS_OS_SKUS: Final[dict[str, tuple[Minor, Minor]]] = {
    "Ubuntu2204": ((1, 25), (1, 36)),
    "Ubuntu2404": ((1, 32), (1, 38)),
}

#: ``kubeVersion`` of each chart in ../shared/upstream/charts that declares one, by chart name and
#: version (tests/rules/test_versions.py reads every Chart.yaml and compares). gpuaas deploys the
#: first three; the others are facts for the areas that will (HAMi).
CHART_KUBE_VERSIONS: Final[dict[tuple[str, str], str]] = {
    ("network-operator", "v26.4.1"): ">= 1.21.0-0",
    ("sriov-network-operator", "0.1.0"): ">= 1.16.0-0",
    ("gpu-operator", "v26.7.0"): ">= 1.16.0-0",
    ("hami", "2.10.0"): ">= 1.18.0-0",
    ("hami-dra-driver", "0.1.0"): ">=1.34.0-0",
}

#: Kueue v0.19.2 (README.md: "Requires Kubernetes 1.29 or newer"), and the minors its own e2e runs
#: on (hack/make/test.mk); gpuaas's e2e also runs its controller on the e2e control plane's minor.
KUEUE_MIN_KUBERNETES: Final[Minor] = (1, 29)
KUEUE_TESTED: Final[tuple[Minor, ...]] = ((1, 34), (1, 35), (1, 36))

#: Kueue releases newer than the pinned one (components/model/versions.py ``KUEUE``), known upstream
#: (kubernetes-sigs/kueue releases, read 2026-12-04) but not served by the Go module proxy this
#: project builds from (every later version answers 403): gpuaas cannot build, and so cannot test,
#: them here. What moving to each involves: docs/notes/versions.md.
KUEUE_KNOWN_NEWER: Final[tuple[str, ...]] = ("v0.19.14", "v0.20.7")


@dataclass(frozen=True)
class Patches:
    """One minor's patches as gpuaas knows them: the newest released, the newest on AKS, the one tested."""

    minor: Minor
    newest_known: str
    """The newest patch known to be released, and :attr:`known_from` says where it was read."""
    known_from: str
    aks: str | None
    """The newest AKS patch recorded (AKS release notes); ``None``: none recorded."""
    tested: str | None
    """The patch gpuaas's e2e control plane is built from (``e2e/controlplane`` go.mod pins; the
    e2e runs the default minor and, for the tests marked ``every_minor``, the oldest too)."""
    untested_why: str = ""
    """Why a newer patch than :attr:`tested` is not tested."""

    @property
    def name(self) -> str:
        return fmt(self.minor)


_PROXY = "the Go module proxy serves no newer k8s.io/kubernetes (every later tag answers 403)"
_AKS_NOTES = "AKS release notes 2026-09-04, Azure/AKS#5948"

#: The patch table, oldest first (the minors of :data:`MINORS` that gpuaas still plans for).
PATCHES: Final[tuple[Patches, ...]] = (
    Patches((1, 34), "1.34.10", _AKS_NOTES, aks="1.34.10", tested=None),
    Patches(
        (1, 35),
        "1.35.9",
        "the kubernetes/kubernetes v1.35.9 release, per issue 35",
        aks="1.35.7",
        tested="1.35.4",
        untested_why=_PROXY,
    ),
    Patches((1, 36), "1.36.3", _AKS_NOTES, aks="1.36.3", tested=None),
    Patches((1, 37), "1.37.2", "the Go module proxy, k8s.io/kubernetes v1.37.2", aks=None, tested="1.37.2"),
)

_PART = r"([0-9]+|[xX*])"
_COMPARATOR = re.compile(rf"^(>=|<=|!=|>|<|=|~|\^)?\s*v?{_PART}(?:\.{_PART})?(?:\.{_PART})?(?:-[0-9A-Za-z.-]+)?$")


def _comparator_holds(text: str, v: tuple[int, int, int]) -> bool:
    m = _COMPARATOR.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a semver comparator this checker reads")
    op = m.group(1) or "="
    raw = [m.group(2), m.group(3), m.group(4)]
    given = next((i for i, p in enumerate(raw) if p is None or p in "xX*"), 3)
    base = tuple(int(p) if i < given and p is not None else 0 for i, p in enumerate(raw))
    if op == "~":  # ~1.2.3: >= 1.2.3, same minor; ~1: same major
        keep = 1 if given == 1 else 2
        return v >= base and v[:keep] == base[:keep]
    if op == "^":  # ^1.2.3: >= 1.2.3, same major
        return v >= base and v[0] == base[0]
    if op in ("=", "!="):  # 1.2 and 1.2.x: any 1.2 patch
        same = v[:given] == base[:given]
        return same if op == "=" else not same
    return {">": v > base, ">=": v >= base, "<": v < base, "<=": v <= base}[op]


def satisfies(version: str, constraint: str) -> bool:
    """Whether ``version`` meets a Helm ``kubeVersion`` constraint (Masterminds/semver syntax).

    ``||`` separates alternatives; within one, comparators separated by spaces or commas must
    all hold. A ``-0`` suffix (">= 1.21.0-0") only lets pre-releases match, so it is ignored.
    """
    v = parse(version)
    if v is None:
        raise ValueError(f"{version!r} is not a Kubernetes version")
    for alternative in constraint.split("||"):
        text = re.sub(r"(>=|<=|!=|>|<|=|~|\^)\s+", r"\1", alternative.strip())
        comparators = [c for c in re.split(r"[\s,]+", text) if c]
        if comparators and all(_comparator_holds(c, v) for c in comparators):
            return True
    return False
