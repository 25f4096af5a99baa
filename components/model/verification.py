"""``gpuaas:verification``: thresholds, isolation probes and burn-in of the proofs (:mod:`components.proofs`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
)

from components.model.base import Model
from components.model.types import (
    CronSchedule,
)


class IsolationPair(Model):
    """One negative probe: ``client``'s pod tries an RDMA write into ``server``'s partition and must fail.

    Each is a verification target key: a team name, or ``pool-<pool>`` for the per-pool proofs.
    """

    client: str
    """Target key of the probing side (a team name, or ``pool-<pool>``): its pod attempts the RDMA write."""
    server: str
    """Target key of the side probed (a team name, or ``pool-<pool>``): the write into its partition must fail."""


class BurnIn(Model):
    """A recurring NCCL proof per target and node group, at a priority every team workload preempts."""

    enabled: bool = False
    """Install the recurring NCCL burn-in CronJobs (one per target and node group); default false."""
    schedule: CronSchedule = "30 3 * * *"
    """Cron schedule of the burn-in CronJobs (five fields; default ``30 3 * * *``, daily at 03:30). Runs never
    overlap and one missed by more than an hour is skipped."""
    priority: Annotated[int, Field(ge=-1_000_000, le=-1)] = -1000
    """Of the ``gpuaas-burn-in`` PriorityClass: below every team pod (0 without a class)."""


class Verification(Model):
    """Thresholds of the verification workloads (fractions of the catalog's line rate)."""

    ib_write_bw_min_fraction: Annotated[float, Field(gt=0, le=1)] = 0.90
    """Pass mark of the ib_write_bw proof as a fraction of the link rate (more than 0, at most 1; default 0.90):
    on-prem ``platform.fabric.linkRateGbps``, on AKS the ND size's rate per GPU."""
    nccl_gdr_min_fraction: Annotated[float, Field(gt=0, le=1)] = 0.85
    """Pass mark of the NCCL GPUDirect proof's bus bandwidth as a fraction of the same link rate converted to GB/s
    (more than 0, at most 1; default 0.85)."""
    aks_pools: bool = False
    """Also run the NCCL proof on every AKS GPU pool."""
    isolation_pairs: list[IsolationPair] | None = None
    """Negative isolation probes. Unset: each verified target against every other partition whose quota admits the
    probe's server pod (adding a team adds only its own probes); ``[]``: none."""
    burn_in: BurnIn = BurnIn()
    """The recurring NCCL burn-in (off by default)."""
