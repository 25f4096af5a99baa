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
    server: str


class BurnIn(Model):
    """A recurring NCCL proof per target and node group, at a priority every team workload preempts."""

    enabled: bool = False
    schedule: CronSchedule = "30 3 * * *"
    priority: Annotated[int, Field(ge=-1_000_000, le=-1)] = -1000
    """Of the ``gpuaas-burn-in`` PriorityClass: below every team pod (0 without a class)."""


class Verification(Model):
    """Thresholds of the verification workloads (fractions of the catalog's line rate)."""

    ib_write_bw_min_fraction: Annotated[float, Field(gt=0, le=1)] = 0.90
    nccl_gdr_min_fraction: Annotated[float, Field(gt=0, le=1)] = 0.85
    aks_pools: bool = False
    """Also run the NCCL proof on every AKS GPU pool."""
    isolation_pairs: list[IsolationPair] | None = None
    """Negative isolation probes. Unset: each target against the next other partition by name; ``[]``: none."""
    burn_in: BurnIn = BurnIn()
