"""Day-2 guard: an AKS cluster moves one Kubernetes minor at a time, and never back.

"When you upgrade a supported non-LTS AKS cluster, you can't skip Kubernetes minor versions ...
1.28.x -> 1.30.x isn't allowed" (azure-aks-docs upgrade-aks-control-plane.md, "Kubernetes version
upgrade rules"), and a cluster never goes back: AKS upgrades only (``az aks upgrade``; "Downgrades
or rollback to an unsupported version aren't supported", supported-kubernetes-versions.md FAQ),
and the API server has stored its objects at the newer version. Azure would refuse such a change
only half-way through ``pulumi up``; this guard refuses it before anything is sent, naming the
minor to go to next.

Like the other guards (:mod:`components.guards.mig`): the stack exports :data:`OUTPUT` (the
version the last run applied), the next run reads it back through the self-``StackReference``
(offline: ``--previous``) and :func:`check` compares. A first run passes; so does an existing
cluster (``existingCluster``: gpuaas does not upgrade it) and on-prem, where the declared version
follows the cluster's own upgrades. A stack whose last run predates this output (gpuaas before
issue #22, whose AKS default was 1.33.5) gets a warning, since its version is unknown here.
"""

from __future__ import annotations

from collections.abc import Mapping

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


def check(cfg: StackConfig, last: Mapping[str, object]) -> tuple[list[Issue], list[str]]:
    """(issues that stop the run, warnings) for ``cfg`` against the last run's outputs ``last``."""
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
            f"1.33.5), so the step to {now} is not checked here: AKS upgrades one minor at a time. Check the "
            "cluster's version first (az aks show --query currentKubernetesVersion)"
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
        return [
            Issue(
                KEY,
                f"{now}, but the last run applied {was}: AKS upgrades a cluster one minor at a time (azure-aks-docs "
                f"upgrade-aks-control-plane.md, 'Kubernetes version upgrade rules'); go to {step} first, run "
                f"`pulumi up`, then to the next (README, 'Upgrading Kubernetes')",
            )
        ], []
    return [], []
