"""What a team claims under DRA: gpuaas's per-profile MIG DeviceClasses and the teams' claim templates.

The model (classes, quotas) is :mod:`components.model.dra`'s; the guard that holds teams to these
is :mod:`components.dra.tenancy`'s.
"""

from __future__ import annotations

from typing import Any, Final

from components.k8s import Manifest
from components.model import dra, resources
from components.model.config import StackConfig
from components.model.dra import CLASS_DOMAIN, GPU_CLASS, mig_class, mig_class_selector, team_devices
from components.model.teams import Team

PART_OF: Final = resources.PART_OF
#: Name prefix of the ResourceClaimTemplates gpuaas puts in each team namespace.
TEMPLATE_PREFIX: Final = "gpuaas-"


def mig_device_class(profile: str) -> Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": mig_class(profile), "labels": dict(PART_OF)},
        "spec": {"selectors": [{"cel": {"expression": mig_class_selector(profile)}}]},
    }


def template_name(device_class: str) -> str:
    """``gpuaas-gpu`` for whole GPUs, ``gpuaas-mig-1g.10gb`` for a MIG profile."""
    if device_class == GPU_CLASS:
        return f"{TEMPLATE_PREFIX}gpu"
    return TEMPLATE_PREFIX + device_class.removesuffix(f".{CLASS_DOMAIN}")


def claim_template(namespace: str, device_class: str) -> Manifest:
    """A ResourceClaimTemplate for one device of ``device_class``: a pod names it under
    ``spec.resourceClaims[].resourceClaimTemplateName`` and gets a claim of its own."""
    request = "gpu" if device_class == GPU_CLASS else "mig"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": template_name(device_class), "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": request,
                            "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1},
                        }
                    ]
                }
            }
        },
    }


def claim_templates(cfg: StackConfig, team: Team) -> dict[str, Manifest]:
    """The team's templates by name: one per class it may claim (:func:`components.model.dra.claimable`)."""
    return templates(team.ns, tuple(dra.claimable(cfg, team)))


def templates(namespace: str, classes: tuple[str, ...]) -> dict[str, Manifest]:
    """The templates of a namespace by name, one per device class in ``classes``."""
    return {template_name(c): claim_template(namespace, c) for c in classes}


def claimable(cfg: StackConfig, team: Team) -> str:
    """Summary text: the templates and classes a team may claim, guaranteed and (elastic) at most."""
    guaranteed, most = team_devices(team), dra.claimable(cfg, team)
    if not most:
        return "(none)"
    if not cfg.queues.elastic:
        return ", ".join(f"{template_name(c)} ({c}) x{n}" for c, n in most.items())
    return ", ".join(f"{template_name(c)} ({c}) {guaranteed.get(c, 0)} guaranteed, up to {n}" for c, n in most.items())


def gpus_as_claims(pod_spec: Manifest) -> Manifest:
    """A pod spec whose ``nvidia.com/gpu`` requests become claims from the team's ``gpuaas-gpu`` template.

    One claim per GPU a container asked for (the template holds one device), named
    ``gpu-<container>-<n>``; the container lists them under ``resources.claims`` (Kubernetes DRA
    docs, "ResourceClaimTemplate"). Other resources (CPU, memory, RDMA) stay as they are.
    """
    spec = dict(pod_spec)
    claims: list[dict[str, str]] = list(spec.get("resourceClaims", []))
    containers = []
    for container in spec["containers"]:
        c = dict(container)
        res: dict[str, Any] = {
            k: dict(v) if isinstance(v, dict) else list(v) for k, v in c.get("resources", {}).items()
        }
        count = max(int(res.get(part, {}).pop(resources.GPU, 0)) for part in ("requests", "limits"))
        names = [f"gpu-{c['name']}-{n}" for n in range(count)]
        if names:
            res["claims"] = [*res.get("claims", []), *({"name": n} for n in names)]
            claims += [{"name": n, "resourceClaimTemplateName": template_name(GPU_CLASS)} for n in names]
        c["resources"] = res
        containers.append(c)
    spec["containers"] = containers
    if claims:
        spec["resourceClaims"] = claims
    return spec
