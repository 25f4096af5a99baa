"""Per-team ResourceQuota and LimitRange: what a team may use, and a hard zero for the rest.

Extended resources are quota'd only as ``requests.<name>`` and cannot be overcommitted
(kubernetes.io, "Resource Quotas" → "Resource quota for extended resources"). A namespace whose
quota does not name a resource may use any amount of it, so each team's quota names every
extended resource of the platform: its own share (:func:`components.rules.team_requests`) and an
explicit ``"0"`` for every other GPU, MIG profile, time-sliced share, RDMA shared device and —
above all — every other team's SR-IOV partition resource. Without that zero a pod could request
``nvidia.com/sriov8002`` from another namespace and land a VF in team 2's partition.

Consequence, by design: adding or removing a team adds or removes one ``requests.<its
sriov resource>: "0"`` line in every other on-prem team's quota, and nothing else of theirs.

Once a quota caps ``requests.cpu``/``requests.memory``/``limits.memory``, every container must state
them; the LimitRange supplies defaults so plain pods still start (same docs page).
"""

from __future__ import annotations

from typing import Any, Final

from components import elastic, resources
from components.config import StackConfig, Team
from components.rules import capacity, team_requests

#: Container defaults where a pod states nothing: one core, memory request = limit.
DEFAULT_CPU_REQUEST: Final = "1"
DEFAULT_MEMORY: Final = "2Gi"


def _index(cfg: StackConfig, team: Team) -> int:
    return next(i for i, t in enumerate(cfg.teams) if t.name == team.name)


#: :func:`extended_resources` of the last config asked about. Every team's quota needs the same
#: set; computing it once per config instead of once per team keeps 256 teams linear.
_last_universe: tuple[StackConfig | None, frozenset[str]] = (None, frozenset())


def extended_resources(cfg: StackConfig) -> frozenset[str]:
    """Every extended resource a pod could request on this platform (see :func:`_extended_resources`).

    Memoised on the identity of ``cfg``; configs are frozen.
    """
    global _last_universe
    seen, universe = _last_universe
    if seen is not cfg:
        universe = frozenset(_extended_resources(cfg))
        _last_universe = (cfg, universe)
    return universe


def _extended_resources(cfg: StackConfig) -> set[str]:
    """Every extended resource a pod could request on this platform.

    The fleet's capacity (GPUs, MIG profiles, time-sliced shares, the RDMA shared device, one
    SR-IOV pool per on-prem partition), whole and shared GPUs even where no node offers them yet,
    and whatever a team quota names.
    """
    names = set(capacity(cfg)) | {resources.GPU, resources.GPU_SHARED}
    if cfg.network.rdma_shared_device_plugin != "none":
        names.add(resources.rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name))
    for i in range(len(cfg.teams)):
        names |= set(team_requests(cfg, i))
    return names


def quota_hard(cfg: StackConfig, team: Team) -> dict[str, str]:
    """``spec.hard`` of the team's ResourceQuota, keys sorted."""
    own = team_requests(cfg, _index(cfg, team))
    q = team.quota
    hard: dict[str, str] = {f"requests.{res}": "0" for res in extended_resources(cfg)}
    hard.update({f"requests.{res}": str(n) for res, n in own.items()})
    hard.update(
        {
            "requests.cpu": q.cpu,
            "requests.memory": q.memory,
            # Memory is not compressible: a limit budget equal to the request budget keeps a team
            # from overcommitting nodes it shares. No CPU limit: it would only throttle.
            "limits.memory": q.memory,
            "pods": str(q.pods),
        }
    )
    if cfg.queues.elastic:
        # Kueue does not read ResourceQuota: it must let through all Kueue can admit (borrowing).
        hard.update(elastic.quota_ceilings(cfg, team))
    return dict(sorted(hard.items()))


def limit_range_limits() -> list[dict[str, Any]]:
    """``spec.limits`` of the team LimitRange: defaults for containers that state nothing."""
    return [
        {
            "type": "Container",
            "defaultRequest": {"cpu": DEFAULT_CPU_REQUEST, "memory": DEFAULT_MEMORY},
            "default": {"memory": DEFAULT_MEMORY},
        }
    ]
