"""The tenancy objects of a stack config, as ``Platform`` builds them: through its mapping
(:mod:`components.platform_args`) onto the components' own arguments, then their renderers.

The renderers take the components' arguments (issue #33); the tests that start from a stack file
read the objects through these, one place instead of the mapping written out in every test.
"""

from __future__ import annotations

from typing import Any

from components import platform_args
from components.k8s import Manifest
from components.model.config import StackConfig
from components.model.teams import Team
from components.tenancy import admission, networks, teams


def team_objects(cfg: StackConfig, team: Team) -> dict[str, Manifest]:
    return teams.team_objects(platform_args.team(cfg, team), networks.partition_networks(cfg))


def namespace(cfg: StackConfig, team: Team) -> Manifest:
    return teams.namespace(platform_args.team(cfg, team), networks.partition_networks(cfg))


def team_export(cfg: StackConfig, team: Team) -> dict[str, Any]:
    return teams.team_export(platform_args.team(cfg, team), networks.partition_networks(cfg))


def cluster_role(cfg: StackConfig) -> Manifest:
    return teams.cluster_role(platform_args.teams(cfg).queue_integrations)


def admission_objects(cfg: StackConfig) -> dict[str, Manifest]:
    return admission.admission_objects(platform_args.admission(cfg))


def pool_policy(cfg: StackConfig) -> Manifest:
    pools = platform_args.admission(cfg).node_pools
    assert pools is not None, "the pool guard is AKS's"
    return admission.pool_policy(pools)


def nad(cfg: StackConfig, team: Team) -> Manifest | None:
    return networks.nad(networks.partition_networks(cfg), team)


def rdma_nad(cfg: StackConfig, team: Team) -> Manifest | None:
    return networks.rdma_nad(networks.partition_networks(cfg), team)


def ip_pool(cfg: StackConfig, team: Team) -> Manifest | None:
    return networks.ip_pool(networks.partition_networks(cfg), team)


def scheduling_config_map(cfg: StackConfig, team: Team) -> Manifest | None:
    return networks.scheduling_config_map(team, networks.pool_taints(cfg, team))
