"""The recording rules: what each team holds, uses, borrows and lends, from the stack config.

Every per-pod and per-allocation series carries ``team`` through :data:`TEAM_INFO`, one series
per team that the rules write from the config's team → namespace mapping: no kube-state-metrics
label allowlist is needed. Node groups come the same way (:data:`NODE_INFO`, from the node names
on-prem and the AKS node-name convention ``aks-<pool>-<id>-vmss<n>``), and what a unit of each GPU
kind is worth from :func:`components.model.accounting.gpu_kinds` (:data:`KIND_WEIGHT`).

Sources, by metric (names checked against the upstream references by the tests):

* allocation: kube-state-metrics ``kube_pod_container_resource_requests`` of running pods
  (``kube_pod_status_phase``) — whole GPUs, each MIG profile, time-sliced shares;
* DRA claims: no kube-state-metrics series counts a claim's devices (``kube_pod_resourceclaim_info``
  names the claim only), so DRA allocations are dcgm-exporter's devices labelled
  ``dra_claim_namespace`` (``KUBERNETES_ENABLE_DRA``), counted per device, not weighted;
* use: dcgm-exporter ``DCGM_FI_DEV_GPU_UTIL`` per whole GPU, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` per
  MIG instance (MIG instances report profiling metrics, not ``GPU_UTIL``), ``DCGM_FI_DEV_FB_USED``,
  each read under its stable name (:mod:`components.observability.dcgm`: either exporter naming);
* borrowing and lending: Kueue's ``kueue_cluster_queue_{resource_usage,nominal_quota,lending_limit}``
  (``metrics.enableClusterQueueResources``).

Where attribution is impossible, the rules say so by leaving it out: the utilization and memory
of a **time-sliced GPU** belong to the physical GPU, which DCGM measures once for every pod that
shares it, so node groups with time-slicing add nothing to a team's *used* series (their
allocation is counted: requests are per pod). **Lent** capacity is not labelled by Kueue: what a
cohort's borrowers hold beyond their nominal quota is apportioned to the lenders in proportion to
the idle quota each can lend (:data:`CQ_LENT`); borrowed and lent sum to the same amount.
"""

from __future__ import annotations

from typing import Final

from components.model.accounting import gpu_kinds, ksm_resource
from components.model.capacity import gpus_per_node, group_capacity, sharing_groups
from components.model.config import StackConfig
from components.model.dra import uses_dra
from components.model.observability import duration_seconds
from components.observability import dcgm
from components.observability.promql import NOT_FOLLOWER, Group, Recording, regex_alternation

# -------------------------------------------------------------------------------------------
# Recorded series (the dashboards and the showback command read these names)

TEAM_INFO: Final = "gpuaas:team:info"
NODE_INFO: Final = "gpuaas:node:info"
NODE_GPUS: Final = "gpuaas:node:gpus_expected"
KIND_WEIGHT: Final = "gpuaas:gpu_kind:weight"
KIND_CAPACITY: Final = "gpuaas:gpu_kind:capacity"
KIND_PRICE: Final = "gpuaas:gpu_kind:price_per_hour"
STEP: Final = "gpuaas:rules:evaluation_interval_seconds"

POD_ALLOCATED: Final = "gpuaas:pod_gpu:allocated"
TEAM_KIND_ALLOCATED: Final = "gpuaas:team_kind:gpus_allocated"
TEAM_ALLOCATED: Final = "gpuaas:team_node_group:gpu_equivalents_allocated"
DEVICE_UTIL: Final = "gpuaas:gpu_device:utilization_ratio"
DEVICE_UTIL_5M: Final = "gpuaas:gpu_device:utilization_ratio:avg5m"
TEAM_USED: Final = "gpuaas:team_node_group:gpu_equivalents_used"
TEAM_MEMORY: Final = "gpuaas:team_node_group:memory_used_bytes"
TEAM_DRA: Final = "gpuaas:team_node_group:dra_devices_allocated"
TEAM_HOURS_ALLOCATED: Final = "gpuaas:team_node_group:gpu_hours_allocated:1d"
TEAM_HOURS_USED: Final = "gpuaas:team_node_group:gpu_hours_used:1d"

CQ_BORROWED: Final = "gpuaas:cluster_queue:borrowed"
CQ_LENDABLE: Final = "gpuaas:cluster_queue:lendable_idle"
CQ_LENT: Final = "gpuaas:cluster_queue:lent"
TEAM_BORROWED: Final = "gpuaas:team_node_group:gpu_equivalents_borrowed"
TEAM_LENT: Final = "gpuaas:team_node_group:gpu_equivalents_lent"
TEAM_HOURS_BORROWED: Final = "gpuaas:team_node_group:gpu_hours_borrowed:1d"
TEAM_HOURS_LENT: Final = "gpuaas:team_node_group:gpu_hours_lent:1d"

#: The proofs' Job names: ``verify-<proof>`` (components/proofs/targets.py prefix; burn-in
#: CronJobs' Jobs are ``verify-burn-in-<group>-<n>``) and the isolation probes' ``isolation-<a>-to-<b>``;
#: tests/observability checks every planned proof Job matches.
PROOF_JOBS: Final = "(verify|isolation)-.+"


def _hours(series: str, step_s: int) -> str:
    """GPU-hours of the last day: the samples of a per-step series summed, times the step in hours.

    A sum, not an average: a series absent for part of the day (nothing allocated) adds nothing.
    """
    return f"sum_over_time({series}[1d]) * {step_s} / 3600"


# -------------------------------------------------------------------------------------------
# Groups


def team_group(cfg: StackConfig, team_name: str) -> Group:
    """One team's info series: its own object, so that adding a team changes no other team's."""
    team = next(t for t in cfg.teams if t.name == team_name)
    info = Recording(TEAM_INFO, "vector(1)", {"team": team.name, "namespace": team.ns, "cluster_queue": team.name})
    return Group(f"gpuaas-team-{team.name}", cfg.observability.evaluation_interval, (info,))


def _node_regex(cfg: StackConfig, group: str) -> str:
    onprem = cfg.onprem
    if onprem is not None:
        return regex_alternation(sorted(n.name for n in onprem.nodes if n.node_group == group))
    # AKS names a pool's nodes aks-<pool>-<id>-vmss<n> (pool names are lowercase alphanumerics).
    return f"aks-{group}-[a-z0-9]+-vmss[a-z0-9]+"


def fleet_group(cfg: StackConfig) -> Group:
    """Static facts of the fleet from the config: nodes per group, weights, prices, capacity."""
    o = cfg.observability
    rules: list[Recording] = [Recording(STEP, f"vector({duration_seconds(o.evaluation_interval)})")]
    kinds = gpu_kinds(cfg)
    sharing_of = {k.node_group: k.sharing for k in kinds}
    for _where, group, sharing, model in sharing_groups(cfg):
        regex = _node_regex(cfg, group)
        if not regex:
            continue
        nodes = f'group by (node) (kube_node_info{{node=~"{regex}"}})'
        labels = {"node_group": group, "sharing": sharing_of.get(group, "whole")}
        rules.append(Recording(NODE_INFO, nodes, labels))
        rules.append(Recording(NODE_GPUS, f"{nodes} * {gpus_per_node(cfg, group)}", {"node_group": group}))
        capacity = group_capacity(cfg, group, sharing, model)
        for k in (k for k in kinds if k.node_group == group):
            kind_labels = {
                "node_group": group,
                "resource": ksm_resource(k.resource),
                "kube_resource": k.resource,
                "sharing": k.sharing,
                "gpu_model": k.gpu_model,
                **({"profile": k.profile} if k.profile else {}),
            }
            rules.append(Recording(KIND_WEIGHT, f"vector({k.weight!r})", kind_labels))
            if k.resource in capacity:
                rules.append(Recording(KIND_CAPACITY, f"vector({capacity[k.resource]})", kind_labels))
            if k.price is not None:
                rules.append(
                    Recording(KIND_PRICE, f"vector({k.price!r})", {**kind_labels, "currency": o.prices.currency})
                )
    return Group("gpuaas-fleet", o.evaluation_interval, tuple(rules))


def allocation_group(cfg: StackConfig) -> Group:
    """Allocation, use and memory per pod, team and node group, and their GPU-hours per day."""
    o = cfg.observability
    step = duration_seconds(o.evaluation_interval)
    kinds = regex_alternation(sorted({ksm_resource(k.resource) for k in gpu_kinds(cfg)}))
    running = 'max by (namespace, pod) (kube_pod_status_phase{phase="Running"}) == 1'
    allocated = (
        f'sum by (namespace, pod, node, resource) (kube_pod_container_resource_requests{{resource=~"{kinds}", node!=""}})'  # noqa: E501
        f" * on (namespace, pod) group_left () ({running})"
        f" * on (namespace) group_left (team) {TEAM_INFO}"
        f" * on (node) group_left (node_group) {NODE_INFO}"
    )
    whole = f'max by (node, gpu, UUID, namespace, pod) ({dcgm.GPU_UTIL}{{namespace!="", GPU_I_ID=""}})'
    mig = (
        "label_replace(max by (node, gpu, UUID, GPU_I_ID, GPU_I_PROFILE, namespace, pod) "
        f'({dcgm.GR_ENGINE}{{namespace!="", GPU_I_ID!=""}}), "profile", "$1", "GPU_I_PROFILE", "(.+)")'
    )
    # Shared GPUs (time-slicing, HAMi slices): DCGM reports the card, not each sharer's part of it.
    attributable = f'on (node) group_left (node_group) {NODE_INFO}{{sharing!~"time-slicing|hami"}}'
    util = f"(({whole}) or ({mig})) * on (namespace) group_left (team) {TEAM_INFO} * {attributable}"
    memory = (
        f'sum by (team, node_group) (max by (node, gpu, GPU_I_ID, namespace, pod) ({dcgm.FB_USED}{{namespace!=""}})'
        f" * on (namespace) group_left (team) {TEAM_INFO} * {attributable})"
    )
    rules: list[Recording] = [
        Recording(POD_ALLOCATED, allocated),
        Recording(TEAM_KIND_ALLOCATED, f"sum by (team, node_group, resource) ({POD_ALLOCATED})"),
        Recording(
            TEAM_ALLOCATED,
            f"sum by (team, node_group) ({POD_ALLOCATED} * on (node_group, resource) group_left () {KIND_WEIGHT})",
        ),
        Recording(DEVICE_UTIL, util),
        Recording(DEVICE_UTIL_5M, f"avg_over_time({DEVICE_UTIL}[5m])"),
        Recording(
            TEAM_USED,
            f"sum by (team, node_group) ({DEVICE_UTIL} * on (node_group, profile) group_left () {KIND_WEIGHT})",
        ),
        Recording(TEAM_MEMORY, memory),
    ]
    if uses_dra(cfg):
        devices = f'group by (namespace, node, gpu, GPU_I_ID) ({dcgm.FB_USED}{{dra_claim_namespace!=""}})'
        rules.append(
            Recording(
                TEAM_DRA,
                f"count by (team, node_group) ({devices} * on (namespace) group_left (team) {TEAM_INFO}"
                f" * on (node) group_left (node_group) {NODE_INFO})",
            )
        )
    rules += [
        Recording(TEAM_HOURS_ALLOCATED, _hours(TEAM_ALLOCATED, step)),
        Recording(TEAM_HOURS_USED, _hours(TEAM_USED, step)),
    ]
    return Group("gpuaas-allocation", o.evaluation_interval, tuple(rules))


def _kueue(metric: str) -> str:
    return f"sum by (cohort, cluster_queue, flavor, resource) ({metric}{{{NOT_FOLLOWER}}})"


def _per_kind(series: str) -> str:
    """A ClusterQueue series in GPU-equivalents per team and node group (flavor = node group)."""
    renamed = (
        f'label_replace(label_replace({series}, "node_group", "$1", "flavor", "(.+)"), '
        f'"kube_resource", "$1", "resource", "(.+)")'
    )
    return f"sum by (team, node_group) ({renamed} * on (node_group, kube_resource) group_left () {KIND_WEIGHT})"


def queue_group(cfg: StackConfig) -> Group:
    """Borrowed and lent quota per team (Kueue), from usage beyond nominal and the idle quota that lends it."""
    o = cfg.observability
    step = duration_seconds(o.evaluation_interval)
    usage, nominal = _kueue("kueue_cluster_queue_resource_usage"), _kueue("kueue_cluster_queue_nominal_quota")
    lending = _kueue("kueue_cluster_queue_lending_limit")
    team = f"on (cluster_queue) group_left (team) {TEAM_INFO}"
    idle = f"clamp_min({nominal} - {usage}, 0)"
    by_kind = "sum by (cohort, flavor, resource)"
    share = f"clamp_max({by_kind} ({CQ_BORROWED}) / ({by_kind} ({CQ_LENDABLE}) > 0), 1)"
    rules = (
        Recording(CQ_BORROWED, f"clamp_min({usage} - {nominal}, 0) * {team}"),
        # min(idle, lending limit); an unset lendingLimit is reported as +Inf.
        Recording(CQ_LENDABLE, f"(({idle} <= {lending}) or {lending}) * {team}"),
        Recording(CQ_LENT, f"{CQ_LENDABLE} * on (cohort, flavor, resource) group_left () {share}"),
        Recording(TEAM_BORROWED, _per_kind(CQ_BORROWED)),
        Recording(TEAM_LENT, _per_kind(CQ_LENT)),
        Recording(TEAM_HOURS_BORROWED, _hours(TEAM_BORROWED, step)),
        Recording(TEAM_HOURS_LENT, _hours(TEAM_LENT, step)),
    )
    return Group("gpuaas-queues", o.evaluation_interval, rules)
