"""The DRA resource model (``gpuOperator.resourceModel: dra``): pure renderers, no Pulumi.

With DRA a pod gets GPUs through a ResourceClaim (``resource.k8s.io/v1``, GA in Kubernetes 1.34)
that the scheduler fills from the ResourceSlices the NVIDIA DRA driver publishes, instead of an
``nvidia.com/gpu`` extended resource counted by a device plugin. The GPU Operator (v26.7.0 and
later) deploys that driver from a **GPUCluster** CR (``nvidia.com/v1alpha1``, Technology Preview)
in place of the ClusterPolicy; the two "may not exist at the same time" (gpu-operator
controllers/gpucluster_controller.go ``validatePrerequisites``; chart templates/validations.yaml
fails when both ``clusterPolicy.deployCR`` and ``gpuCluster.deployCR`` are true), and only
greenfield clusters are supported (GPU Operator docs, "Deploying the GPU Operator with DRA
Support": "Migrating an existing ClusterPolicy deployment to GPUCluster in place is not supported").

**Device classes.** The GPUCluster controller creates and keeps the driver's DeviceClasses
``gpu.nvidia.com``, ``mig.nvidia.com`` and ``vfio.gpu.nvidia.com`` itself (gpu-operator v26.7.0
manifests/state-dra-driver/04x0_deviceclass-*.yaml, re-synced every minute: "a deleted
DeviceClass/VAP ... is detected and reconciled"), so gpuaas leaves them to it: a second owner would
fight the controller over the same objects. gpuaas adds one class of its own per MIG profile the
node groups offer (``mig-1g.10gb.gpuaas.io``: the driver's MIG selector plus the profile), because
a ResourceQuota counts DRA devices per class (``<class>.deviceclass.resource.k8s.io/devices``):
with only ``mig.nvidia.com`` a team's 12 × 1g.10gb quota would also admit 12 × 4g.40gb.

**One quota model, two renderings.** A team's ``quota`` keys stay what they are; under DRA the
GPU part renders as devices per class (:func:`device_class_for` maps each extended resource to
its class) plus ``count/resourceclaims.resource.k8s.io`` (one claim holds at least one device),
and every GPU extended resource becomes ``"0"`` (nothing advertises them; a pod that asks is
refused at creation instead of pending forever). RDMA/SR-IOV keys are unchanged: NICs stay on
their device plugins.

**Host prerequisites.** The driver hands a claim's devices to containers as CDI device names, so
the nodes' container runtime must have CDI on (containerd 2.0 and CRI-O by default, containerd
1.7 with ``enable_cdi``); a GPUCluster deploys no container toolkit to set it, and
:mod:`components.rules.dra` checks what the config shows (AKS pool OS images) or asks for
``gpuOperator.dra.cdiEnabled``. The kubelet's Topology Manager aligns device-plugin resources by
NUMA node but not DRA claims, so a GPU from a claim and a partition VF from the SR-IOV device
plugin are placed independently: GPUDirect RDMA may cross sockets (README, "Host prerequisites").

**What DRA does not do yet here** (refused by :mod:`components.rules.dra`): node-group
time-slicing and ``quota.timeSlicedGpus`` — the driver shares a GPU only among the containers and
pods of one claim, and sharing across claims needs alpha gates (``TimeSlicingSettings``,
``ConsumableShares``, driver v0.5.0 pkg/featuregates); ``migStrategy: single`` — MIG devices are
always ``mig.nvidia.com`` devices. MIG layouts stay static, from the node groups: GPUCluster runs
no MIG Manager (its CRD has draDriver, dcgm, dcgmExporter, daemonsets and hostPaths only) and
"static MIG partitions must be configured before the driver starts" (dra-driver-nvidia-gpu docs,
guides/gpu-allocation/mig.md), so the hosts apply the plan's mig-parted config themselves.
"""

from __future__ import annotations

from typing import Any, Final

from components.model import elastic, resources
from components.model.capacity import mig_counts, sharing_groups
from components.model.catalog import GPU_MODELS, MigProfile
from components.model.config import StackConfig
from components.model.teams import Team

#: The DRA driver's name and the DeviceClasses the GPUCluster controller owns, with its selectors
#: (gpu-operator v26.7.0 manifests/state-dra-driver/0400_deviceclass-gpu.yaml, 0410_…-mig.yaml,
#: 0430_…-vfio-gpu.yaml). gpuaas never creates these; tests and the e2e suite stand them up.
DRIVER: Final = "gpu.nvidia.com"
GPU_CLASS: Final = "gpu.nvidia.com"
MIG_CLASS: Final = "mig.nvidia.com"
VFIO_CLASS: Final = "vfio.gpu.nvidia.com"
DRIVER_CLASSES: Final = {
    GPU_CLASS: f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'",
    MIG_CLASS: f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'",
    VFIO_CLASS: f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'vfio'",
}
#: Suffix of gpuaas's own per-profile MIG DeviceClasses.
CLASS_DOMAIN: Final = "gpuaas.io"
#: Namespace label prefix: ``dra.gpuaas.io/<class>: "true"`` for each class the team may claim.
#: On the namespace, which tenants cannot edit (a ConfigMap parameter in their namespace they could).
CLASS_LABEL_PREFIX: Final = "dra.gpuaas.io/"
#: ResourceQuota key counting a namespace's ResourceClaims (Kubernetes "Resource Quotas", DRA).
CLAIMS_QUOTA: Final = "count/resourceclaims.resource.k8s.io"


def uses_dra(cfg: StackConfig) -> bool:
    return cfg.gpu_operator.resource_model == "dra"


def mig_class(profile: str) -> str:
    """gpuaas's DeviceClass of one MIG profile, e.g. ``mig-1g.10gb.gpuaas.io``.

    ``+`` is written ``.`` (``1g.10gb+me`` → ``mig-1g.10gb.me.gpuaas.io``): a class name is a DNS
    subdomain, as in :func:`components.model.capacity.layout_name`.
    """
    return f"mig-{profile.replace('+', '.')}.{CLASS_DOMAIN}"


def mig_class_selector(profile: str) -> str:
    """The driver's MIG selector narrowed to one profile (the ``profile`` attribute of a MIG
    device, dra-driver-nvidia-gpu docs reference/resourceslice-attributes.md)."""
    return f"{DRIVER_CLASSES[MIG_CLASS]} && device.attributes['{DRIVER}'].profile == '{profile}'"


def device_quota_key(device_class: str) -> str:
    """ResourceQuota key of the devices claimed from one class (Kubernetes "Resource Quotas")."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def device_class_for(resource: str) -> str | None:
    """The DeviceClass that carries a GPU extended resource under DRA; ``None`` for other resources.

    The one mapping both renderings of a quota go through (and what Kueue's
    ``deviceClassMappings`` say): ``nvidia.com/gpu`` ↔ ``gpu.nvidia.com``, ``nvidia.com/mig-<p>``
    ↔ ``mig-<p>.gpuaas.io``. ``nvidia.com/gpu.shared`` has none (no time-slicing under DRA).
    """
    if resource == resources.GPU:
        return GPU_CLASS
    prefix = resources.mig_resource("")
    if resource.startswith(prefix):
        return mig_class(resource.removeprefix(prefix))
    return None


def dynamic_mig(cfg: StackConfig) -> bool:
    return uses_dra(cfg) and cfg.gpu_operator.dra.dynamic_mig


def dynamic_mig_profiles(cfg: StackConfig) -> dict[str, MigProfile]:
    """With dynamic MIG: every profile the driver may create on some group's GPU model, by name."""
    if not dynamic_mig(cfg):
        return {}
    out: dict[str, MigProfile] = {}
    for _where, _group, _sharing, model in sharing_groups(cfg):
        gpu = GPU_MODELS.get(model)
        for p in gpu.profiles if gpu else ():
            out.setdefault(p.name, p)
    return dict(sorted(out.items()))


def offered_mig_profiles(cfg: StackConfig) -> list[str]:
    """Every MIG profile some node group's static layout creates (or, with dynamic MIG, that the
    driver may create on its GPU model), sorted."""
    profiles: set[str] = set(dynamic_mig_profiles(cfg))
    for _where, _group, sharing, model in sharing_groups(cfg):
        try:
            profiles |= set(mig_counts(sharing, model))
        except (KeyError, ValueError):
            continue  # a bad layout or model is reported by the rules
    return sorted(profiles)


def team_devices(team: Team) -> dict[str, int]:
    """Devices per class the team may hold at once: its ``quota.gpus`` and ``quota.mig``."""
    q = team.quota
    out: dict[str, int] = {}
    if q.gpus:
        out[GPU_CLASS] = q.gpus
    for profile, n in sorted(q.mig.items()):
        if n:
            out[mig_class(profile)] = n
    return out


#: :func:`device_classes` of the last config asked about: every team's quota needs the same list
#: (as :func:`components.tenancy.quotas.extended_resources`), so 256 teams stay linear.
_last_classes: tuple[StackConfig | None, tuple[str, ...]] = (None, ())


def device_classes(cfg: StackConfig) -> list[str]:
    """Every class a claim could name on this platform: the driver's and gpuaas's, sorted.

    Memoised on the identity of ``cfg``; configs are frozen.
    """
    global _last_classes
    seen, classes = _last_classes
    if seen is not cfg:
        names = set(DRIVER_CLASSES) | {mig_class(p) for p in offered_mig_profiles(cfg)}
        for team in cfg.teams:
            names |= set(team_devices(team))
        classes = tuple(sorted(names))
        _last_classes = (cfg, classes)
    return list(classes)


def quota_entries(cfg: StackConfig, team: Team) -> dict[str, str]:
    """The DRA keys of a team's ResourceQuota: its devices per class, ``"0"`` for every other
    class, and its claim count (at most one claim per device it may hold)."""
    own = team_devices(team)
    hard = {device_quota_key(c): str(own.get(c, 0)) for c in device_classes(cfg)}
    hard[CLAIMS_QUOTA] = str(sum(own.values()))
    return hard


def render_quota(cfg: StackConfig, device_plugin_hard: dict[str, str], team: Team) -> dict[str, str]:
    """The DRA rendering of a team quota from its device-plugin rendering (``spec.hard``, sorted).

    GPU extended resources (anything :func:`device_class_for` maps, and the time-sliced share)
    become ``"0"``; the team's GPUs move to :func:`quota_entries`; every other key is kept.
    """
    hard = dict(device_plugin_hard)
    ceilings: dict[str, int] = {}
    for key in hard:
        res = key.removeprefix("requests.")
        cls = device_class_for(res) if key.startswith("requests.") else None
        if cls is not None and cfg.queues.elastic:
            # Elastic quotas: the device-plugin rendering already holds the ceiling (guaranteed +
            # borrowable, components/model/elastic.py); claims Kueue admits by borrowing must fit it too.
            ceilings[cls] = int(hard[key])
        if key.startswith("requests.") and (cls is not None or res == resources.GPU_SHARED):
            hard[key] = "0"
    entries = quota_entries(cfg, team)
    if ceilings:
        for cls, n in ceilings.items():
            entries[device_quota_key(cls)] = str(n)
        entries[CLAIMS_QUOTA] = str(sum(int(entries[device_quota_key(c)]) for c in device_classes(cfg)))
    hard.update(entries)
    return dict(sorted(hard.items()))


def claimable(cfg: StackConfig, team: Team) -> dict[str, int]:
    """Devices per class the team may hold at once, by class: what its namespace labels allow, its
    templates offer and its ResourceQuota admits — one answer for all three.

    Its quota (``quota.gpus``, ``quota.mig``); with elastic quotas every class its ClusterQueue lets
    it borrow as well, up to its ceiling (:func:`components.model.elastic.quota_ceilings`: guaranteed
    + borrowable). Until 2026-12 the labels followed the guaranteed quota only, so a team's quota and
    queue let it borrow MIG devices its claims policy then refused.
    """
    out = team_devices(team)
    if cfg.queues.elastic:
        for key, value in elastic.quota_ceilings(cfg, team).items():
            cls = device_class_for(key.removeprefix("requests."))
            if cls is not None and int(value) > 0:
                out[cls] = int(value)
    return dict(sorted(out.items()))


def namespace_labels(cfg: StackConfig, team: Team) -> dict[str, str]:
    """Labels naming the classes the team may claim (read by :func:`components.dra.tenancy.claims_policy`)."""
    if not uses_dra(cfg):
        return {}
    return {f"{CLASS_LABEL_PREFIX}{c}": "true" for c in claimable(cfg, team)}


def kueue_device_class_mappings(cfg: StackConfig) -> list[dict[str, Any]]:
    """KUEUE HOOK (elastic quotas): Kueue's ``resources.deviceClassMappings`` for this stack.

    Kueue 0.19 (``config.kueue.x-k8s.io/v1beta2``, KueueDRAIntegration beta, on) counts a DRA claim
    against a ClusterQueue resource through these mappings; mapping each class to the extended
    resource the device-plugin model quotas makes both models draw on the same ClusterQueue
    ``nominalQuota``. :func:`components.queueing.queues.kueue_configuration` puts them in Kueue's config.
    """
    if not uses_dra(cfg):
        return []
    out = [{"name": resources.GPU, "deviceClassNames": [GPU_CLASS]}]
    out += [{"name": resources.mig_resource(p), "deviceClassNames": [mig_class(p)]} for p in offered_mig_profiles(cfg)]
    return out
