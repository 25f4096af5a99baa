"""The grammars of the Azure and AKS values a config names (subscription, resource group, region, VM size).

Checked at load like :mod:`components.model.grammar`'s, each a port of Azure's own rule and citing it.
"""

from __future__ import annotations

import re

_AZURE_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
#: Resource group names: 1-90 of alphanumerics, '_', '-', '.', '(' and ')', not ending in '.'
#: (learn.microsoft.com, resource-name-rules#microsoftresources).
_RESOURCE_GROUP = re.compile(r"^[-\w.()]{1,90}$")
_LOCATION = re.compile(r"^[a-z][a-z0-9]{1,39}$")
_K8S_VERSION = re.compile(r"^[1-9][0-9]*\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$")
_VM_SIZE = re.compile(r"^[A-Za-z]+_[A-Za-z0-9_]+$")


def check_subscription_id(value: str) -> str:
    if not _AZURE_GUID.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an Azure subscription id (a GUID, e.g. 00000000-0000-0000-0000-000000000000)"
        )
    return value


def check_resource_group(value: str) -> str:
    if not _RESOURCE_GROUP.fullmatch(value) or value.endswith("."):
        raise ValueError(
            f"{value!r} is not an Azure resource group name (1-90 letters, digits, '_', '-', '.', '(' or ')', "
            "not ending in '.')"
        )
    return value


def normal_location(value: str) -> str:
    """``East US`` and ``eastus`` are one region: Azure accepts the display name too."""
    return value.replace(" ", "").lower()


def check_location(value: str) -> str:
    if not _LOCATION.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an Azure region name (lowercase letters and digits, e.g. eastus, westeurope; "
            "az account list-locations -o table)"
        )
    return value


def check_kubernetes_version(value: str) -> str:
    if not _K8S_VERSION.fullmatch(value):
        raise ValueError(f"{value!r} is not a Kubernetes version (<major>.<minor>[.<patch>], e.g. 1.36.3; no 'v')")
    return value


def check_vm_size(value: str) -> str:
    if not _VM_SIZE.fullmatch(value):
        raise ValueError(f"{value!r} is not an Azure VM size (e.g. Standard_D8ds_v5)")
    return value
