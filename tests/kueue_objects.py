"""A team's Kueue objects from a whole stack config, for tests that start from one.

:mod:`components.queueing.queues` renders from :class:`~components.queueing.queues.QueuesArgs` (issue #33);
these go through Platform's own mapping (:func:`components.platform_args.queues`), as a stack does.
"""

from __future__ import annotations

from typing import Any

from components import platform_args
from components.k8s import Manifest
from components.model.config import StackConfig
from components.model.teams import Team
from components.queueing import queues


def cluster_queue(cfg: StackConfig, team: Team) -> Manifest:
    """``team``'s ClusterQueue in the stack ``cfg``."""
    args = platform_args.queues(cfg)
    return queues.cluster_queue(args, args.team(team.name))


def resource_groups(cfg: StackConfig, team: Team) -> list[dict[str, Any]]:
    """``spec.resourceGroups`` of ``team``'s ClusterQueue in the stack ``cfg``."""
    return queues.resource_groups(platform_args.queues(cfg).team(team.name))


def local_queue(cfg: StackConfig, team: Team) -> Manifest:
    """``team``'s LocalQueue in the stack ``cfg``."""
    return queues.local_queue(platform_args.queues(cfg).team(team.name))
