"""Cross-field rules of a stack config: one module per area, and :func:`check`, which runs them all.

Pure functions on a structurally valid :class:`StackConfig` (the model refused everything a
single field can get wrong). Each rule yields :class:`Issue`s naming the key the user edits;
:func:`check` gathers every area's so that all problems surface at once. This package is the only
place that knows every area's rules; it reads the model (:mod:`components.model`) and nothing above
it, so a stack is validated before any component module is imported.
"""

from __future__ import annotations

from datetime import date

from components.model import kubernetes
from components.model.config import StackConfig
from components.model.errors import Issue
from components.rules import (
    charts,
    dra,
    fabric,
    hami,
    namespaces,
    observability,
    platform,
    proofs,
    queues,
    sharing,
    tenancy,
    versions,
)


def check(cfg: StackConfig, today: date = kubernetes.REVIEWED) -> list[Issue]:
    """Every cross-field problem of ``cfg``, sorted by path.

    ``today`` judges the Kubernetes version's support dates (:mod:`components.rules.versions`);
    callers that do not pass it judge as of the day the version table was reviewed, so a test or a
    tool gives the same answer on any day. ``__main__.py`` passes the clock.
    """
    return sorted(set(versions.check(cfg, today)) | set(undated(cfg)))


def undated(cfg: StackConfig) -> list[Issue]:
    """Every cross-field problem of ``cfg`` but the dated ones (:mod:`components.rules.versions`):
    what a content-keyed memo may keep across days (components/loader.py ``parse_config``)."""
    issues: list[Issue] = []
    for rule in (
        tenancy.check,
        platform.check,
        charts.check,
        sharing.check,
        hami.check,
        fabric.check,
        proofs.check,
        namespaces.namespace_collisions,
        namespaces.foreign_namespace_collisions,
        namespaces.reserved_namespaces,
        namespaces.proof_name_collisions,
        dra.dra_issues,
        observability.check,
    ):
        issues.extend(rule(cfg))
    if not any(".mig." in i.path or i.path.endswith(".nodeGroup") for i in issues):
        # Capacity needs valid layouts and node groups; otherwise those issues are the news.
        issues.extend(i for i in tenancy.quota_issues(cfg) if not dra.replaced_by_dra(cfg, i))
        if len({t.name for t in cfg.teams}) == len(cfg.teams):
            # The elastic arithmetic finds a team by its name; a duplicate name is the news.
            issues.extend(queues.check(cfg))
    return sorted(set(issues))
