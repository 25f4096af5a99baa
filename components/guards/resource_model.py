"""Day-2 guard: a running stack keeps its GPU resource model (device plugin or DRA).

The facts are in :mod:`components.model.dra`'s docstring; :func:`enforce_model` is the shell the
platform's gate runs first.
"""

from __future__ import annotations

from typing import Final

import pulumi

from components.model.config import StackConfig
from components.model.errors import ConfigError, Issue

#: Stack output of DRA stacks (only there, so device-plugin stacks' outputs stay as they were).
MODEL_OUTPUT: Final = "resourceModel"


def model_switch_issues(cfg: StackConfig, last_mig_layouts: object, last_model: object) -> list[Issue]:
    """A stack that has run before may not change its resource model in place.

    GPUCluster "is supported only for greenfield (new) deployments. Migrating an existing
    ClusterPolicy deployment to GPUCluster in place is not supported" (GPU Operator docs,
    GPUCluster reference): switching would delete the ClusterPolicy (device plugin, MIG Manager)
    under running GPU pods, and back again leave claims without their driver. Every stack exports
    ``migLayouts``, so its presence means "has run"; DRA stacks also export :data:`MODEL_OUTPUT`.
    """
    if last_mig_layouts is None:
        return []  # first run: greenfield
    before = "dra" if last_model == "dra" else "devicePlugin"
    now = cfg.gpu_operator.resource_model
    if before == now:
        return []
    return [
        Issue(
            "gpuaas:gpuOperator.resourceModel",
            f"{now}, but this stack's last run used {before}: a running cluster does not change its GPU resource "
            "model in place (GPUCluster is greenfield only). Build the other model as a new stack on a new cluster "
            "and move the teams over (README, 'Choosing a resource model'); or set it back to " + before,
        )
    ]


def enforce_model(cfg: StackConfig, last_mig_layouts: object, last_model: object) -> bool:
    """The shell of :func:`model_switch_issues`: a config-error text as ``pulumi.RunError``."""
    issues = model_switch_issues(cfg, last_mig_layouts, last_model)
    if issues:
        raise pulumi.RunError(ConfigError(issues).render())
    return True
