"""The labels that tie a team's objects to it: what the admission policies and the plan index read."""

from __future__ import annotations

from typing import Any, Final

from components.model import resources

#: Label on every team namespace; the admission policies' namespaceSelector matches on it.
TEAM_LABEL: Final = resources.TEAM_LABEL
PART_OF: Final = resources.PART_OF
#: Namespace label of AKS teams with a partition: their ND pool (the pool policy binding selects on it).
POOL_LABEL: Final = "gpuaas.io/node-pool"
#: Namespace label of on-prem teams with a partition: the partition's resource name without its
#: prefix, ``sriov8001`` (a label value cannot hold ``/``). The partition admission policy reads it.
PARTITION_LABEL: Final = "gpuaas.io/partition-resource"
#: Node label AKS puts on every node of an agent pool.
AKS_POOL_LABEL: Final = resources.AKS_POOL_LABEL


def object_meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**PART_OF, **extra.pop("labels", {})}
    meta.update(extra)
    return meta
