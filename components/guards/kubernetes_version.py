"""Day-2 guard: an AKS cluster moves one Kubernetes minor at a time, and never back.

"When you upgrade a supported non-LTS AKS cluster, you can't skip Kubernetes minor versions ...
1.28.x -> 1.30.x isn't allowed" (azure-aks-docs upgrade-aks-control-plane.md, "Kubernetes version
upgrade rules"), and a cluster never goes back: AKS upgrades only (``az aks upgrade``; "Downgrades
or rollback to an unsupported version aren't supported", supported-kubernetes-versions.md FAQ),
and the API server has stored its objects at the newer version. Azure would refuse such a change
only half-way through ``pulumi up``; this guard refuses it before anything is sent, naming the
minor to go to next.

From a minor past its end of AKS standard support the one jump AKS allows is to the oldest
supported minor ("Unsupported non-LTS -> Lowest supported community version: Yes ... a full
cluster upgrade is required", supported-kubernetes-versions.md, "Can I skip multiple AKS versions
during a cluster upgrade?"): the rule refuses every unsupported minor, so that is the only way out.

Like the other guards (:mod:`components.guards.mig`): the stack exports :data:`OUTPUT` (the
version the last run applied), the next run reads it back through the self-``StackReference``
(offline: ``--previous``) and :func:`check` compares. A first run passes; so does an existing
cluster (``existingCluster``: gpuaas does not upgrade it) and on-prem, where the declared version
follows the cluster's own upgrades. A stack whose last run predates this output (gpuaas before
issue #22, whose AKS default was 1.33.5) gets a warning, since its version is unknown here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from components.model import kubernetes
from components.model.config import StackConfig
from components.model.errors import Issue

#: The stack output holding the Kubernetes version the last run applied (AKS) or declared (on-prem).
OUTPUT: str = "kubernetesVersion"
#: Every stack exports this one (components/guards/mig.py): its presence means "has run before".
_RAN_BEFORE: str = "migLayouts"

KEY = "gpuaas:platform.kubernetesVersion"


def recorded(cfg: StackConfig) -> str | None:
    """The version the stack exports as :data:`OUTPUT`: AKS's (always set) or the declared on-prem one."""
    return cfg.platform.kubernetes_version


def check(
    cfg: StackConfig, last: Mapping[str, object], today: date = kubernetes.REVIEWED
) -> tuple[list[Issue], list[str]]:
    """(issues that stop the run, warnings) for ``cfg`` against the last run's outputs ``last``.

    ``today`` decides whether the last run's minor is still supported (``__main__.py`` reads it).
    """
    aks = cfg.aks
    if aks is None or aks.existing_cluster:
        return [], []
    was = last.get(OUTPUT)
    now = aks.kubernetes_version
    if not isinstance(was, str):
        if last.get(_RAN_BEFORE) is None:
            return [], []  # a first run: a new cluster may start on any supported version
        return [], [
            f"{KEY}: the last run recorded no Kubernetes version (gpuaas before issue #22, whose AKS default was "
            f"1.33.5), so the step to {now} is not checked here. Check the cluster's version first (az aks show "
            "--query currentKubernetesVersion): AKS upgrades one minor at a time, or from a minor past its standard "
            "support in one jump to the oldest supported minor (README, 'Upgrading Kubernetes')"
        ]
    before, after = kubernetes.parse(was), kubernetes.parse(now)
    if before is None or after is None or before == after:
        return [], []
    if after < before:
        return [
            Issue(
                KEY,
                f"{now}, but the last run applied {was}: an AKS cluster (and its node pools) only upgrades; "
                f"set it back to {was} or newer, or build a new cluster on {now}",
            )
        ], []
    if after[:2] > (before[0], before[1] + 1):
        step = kubernetes.fmt((before[0], before[1] + 1))
        oldest = kubernetes.supported(today, aks=True)[:1]
        row = kubernetes.support(before[:2])
        end = row.aks_end_of_support if row is not None else None
        if oldest and (end is None or end < today) and before[:2] < oldest[0].minor:
            if after[:2] == oldest[0].minor:
                return [], [
                    f"{KEY}: {was} -> {now}: {kubernetes.fmt(before[:2])} is past AKS standard support, and AKS's "
                    f"way out is one jump to the oldest supported minor, {oldest[0].name}, as a full cluster upgrade "
                    "(an 'unsupported recovery path'). Check `az aks get-upgrades` lists it first"
                ]
            step = oldest[0].name
        return [
            Issue(
                KEY,
                f"{now}, but the last run applied {was}: AKS upgrades a cluster one minor at a time (azure-aks-docs "
                f"upgrade-aks-control-plane.md, 'Kubernetes version upgrade rules'); go to {step} first, run "
                f"`pulumi up`, then to the next (README, 'Upgrading Kubernetes')",
            )
        ], []
    return [], []
