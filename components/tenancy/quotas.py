"""Per-team ResourceQuota and LimitRange: what a team may use, and a hard zero for the platform's rest.

Extended resources are quota'd only as ``requests.<name>`` and cannot be overcommitted
(kubernetes.io, "Resource Quotas" → "Resource quota for extended resources"). A namespace whose
quota does not name a resource may use any amount of it, so each team's quota names every
platform-wide extended resource — every GPU, MIG profile, time-sliced share, the RDMA shared
device — with the team's share (:func:`components.model.capacity.team_requests`) or an explicit ``"0"``,
and its own partition's SR-IOV resource.

Other teams' partition resources are *not* listed: the partition admission policy
(:mod:`components.tenancy.admission`, ``gpuaas-team-partition``) refuses any ``nvidia.com/sriov*`` request
but the namespace's own, in every namespace. So the set a quota names depends on the platform and
the team alone, and adding or removing a team leaves every other team's objects byte-identical.
(Until 2026-12 each quota listed a ``"0"`` for every other team's partition; that made every team
addition touch every team.)

Once a quota caps ``requests.cpu``/``requests.memory``, every container must state those requests;
the LimitRange supplies them where a pod states nothing (same docs page). It supplies no default
*limit*: LimitRanger applies a default limit to a container that has a request but no limit, and
the API then refuses the pod when the request is above it ("must be less than or equal to memory
limit"; kubernetes plugin/pkg/admission/limitranger/admission.go, ``mergeContainerResources``), so a
2Gi default limit refused every GPU pod asking for more memory with requests only. For the same
reason the quota has no ``limits.memory``: a quota on a limit makes every pod state that limit.
Memory limits are the workload's choice; the scheduler places by requests, which the quota caps.

HAMi's memory and cores are the one exception: HAMi's own quota reads only ``limits.`` keys
(:mod:`components.model.hami`), so those two are written as ``limits.`` and ``requests.`` both. The
quota controller ignores ``limits.`` of an extended resource (it counts extended resources as
``requests.`` only), so no pod is made to state anything by them (the e2e suite checks it).
"""

from __future__ import annotations

from typing import Any, Final

from components.model import dra, elastic, hami, resources
from components.model.capacity import capacity, team_requests
from components.model.config import StackConfig
from components.model.teams import OnPremPartition, Team

#: Container requests where a pod states none: one core, 2Gi. No default limits (see above).
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

    The fleet's capacity (GPUs, MIG profiles, time-sliced shares, the RDMA shared device), whole
    and shared GPUs even where no node offers them yet — but no partition resource: those belong
    to one team each and are guarded by admission. Nothing here depends on the list of teams.
    """
    names = {r for r in capacity(cfg) if not is_partition_resource(r)} | {resources.GPU, resources.GPU_SHARED}
    if hami.uses_hami(cfg):
        # Every per-slice HAMi resource, the percentage one too: its quota stays 0 for everyone
        # (memory is counted in MiB; components/model/hami.py). The task priority is no amount.
        names |= set(resources.HAMI_RESOURCES) - {resources.HAMI_PRIORITY}
    if cfg.network.rdma_shared_device_plugin != "none":
        names.add(resources.rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name))
    return names


def is_partition_resource(name: str) -> bool:
    """An SR-IOV partition resource (``nvidia.com/sriov8001``), one team's alone."""
    return name.startswith(f"{resources.SRIOV_PREFIX}/sriov")


def own_partition_resource(team: Team) -> str | None:
    """The team's own partition resource on-prem, ``None`` without an on-prem partition."""
    if isinstance(team.partition, OnPremPartition):
        return resources.sriov_resource(team.partition.pkey)
    return None


def quota_hard(cfg: StackConfig, team: Team) -> dict[str, str]:
    """``spec.hard`` of the team's ResourceQuota, keys sorted: the device-plugin rendering, or
    under ``resourceModel: dra`` the same quota with its GPUs as DRA devices per class."""
    hard = device_plugin_quota_hard(cfg, team)
    return dra.render_quota(cfg, hard, team) if dra.uses_dra(cfg) else hard


def device_plugin_quota_hard(cfg: StackConfig, team: Team) -> dict[str, str]:
    """``spec.hard`` of the team's ResourceQuota, keys sorted."""
    own = team_requests(cfg, _index(cfg, team))
    q = team.quota
    hard: dict[str, str] = {f"requests.{res}": "0" for res in extended_resources(cfg)}
    partition = own_partition_resource(team) if cfg.onprem is not None else None
    if partition is not None:
        hard[f"requests.{partition}"] = "0"
    hard.update({f"requests.{res}": str(n) for res, n in own.items()})
    # No limits.*: a quota on a limit makes every container state it (see the module docstring).
    hard.update({"requests.cpu": q.cpu, "requests.memory": q.memory, "pods": str(q.pods)})
    if cfg.queues.elastic:
        # Kueue does not read ResourceQuota: it must let through all Kueue can admit (borrowing).
        hard.update(elastic.quota_ceilings(cfg, team))
    # HAMi enforces its memory and cores from limits.* keys, the quota controller from requests.*.
    return dict(sorted(hami.quota_keys(hard).items()))


def limit_range_limits() -> list[dict[str, Any]]:
    """``spec.limits`` of the team LimitRange: default requests for containers that state none.

    No ``default`` (limits): see the module docstring.
    """
    return [{"type": "Container", "defaultRequest": {"cpu": DEFAULT_CPU_REQUEST, "memory": DEFAULT_MEMORY}}]
