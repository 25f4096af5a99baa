"""``summary.txt`` of the offline plan: what a reviewer reads first in a pull request.

Everything shown is derived from the config by the same pure functions the components use
(capacity, team requests, resource names), plus counts of what the run registered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components.clusters.nd_pools import pool_capacity
from components.dra import claims
from components.fabric import multus, opensm
from components.model import dra, elastic, resources
from components.model.accounting import gpu_kinds
from components.model.capacity import (
    capacity,
    layout_name,
    node_counts,
    sharing_groups,
    team_requests,
    vfs_per_partition,
)
from components.model.config import StackConfig
from components.model.observability import DCGM_COUNTERS
from components.model.teams import AksPartition, OnPremPartition, Team
from components.model.types import format_pkey, full_member_pkey
from components.observability.dashboards import dashboards
from components.observability.groups import rule_groups
from components.observability.promql import Alert, Recording
from components.operators import gpu_cluster

if TYPE_CHECKING:
    from components.plan.offline import Run


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A plain-text table with aligned columns (no trailing spaces)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def _quota_text(cfg: StackConfig, i: int) -> str:
    q = cfg.teams[i].quota
    parts = [f"{res.split('/', 1)[1]}={n}" for res, n in sorted(team_requests(cfg, i).items())]
    parts += [f"cpu={q.cpu}", f"memory={q.memory}", f"pods={q.pods}"]
    return ", ".join(parts)


def _nad_name(team_name: str, teams_out: Mapping[str, Any]) -> str:
    info = teams_out.get(team_name) if isinstance(teams_out, Mapping) else None
    if isinstance(info, Mapping) and info.get("nad"):
        return str(info["nad"])
    return "-"


def target(cfg: StackConfig) -> str:
    """The cluster a ``pulumi up`` of this stack would change, as the reviewer must check it."""
    onprem, aks = cfg.onprem, cfg.aks
    if onprem is not None:
        if onprem.kubeconfig_context is None:
            return "the current context of the ambient kubeconfig (platform.kubeconfigContext unset)"
        return f"kubeconfig context {onprem.kubeconfig_context!r}"
    assert aks is not None
    how = "existing AKS cluster" if aks.existing_cluster else "AKS cluster"
    group = "created" if aks.resource_group.create else "existing"
    return (
        f"{how} {aks.cluster_name!r} in resource group {aks.resource_group.name!r} ({group}), subscription "
        f"{aks.subscription_id}, location {aks.location}"
    )


#: The page that says how to get partitions.conf onto each kind of subnet manager.
SM_NOTES = "docs/notes/subnet-manager.md"


def subnet_manager(cfg: StackConfig) -> str | None:
    """On-prem: which subnet manager enforces the teams' partitions, and what the operator must do.

    Outside the cluster (the default) nothing of the plan reaches the SM: until someone installs
    partitions.conf there and the SM has swept it, no team VF carries its P_Key and every VF pod
    waits. The summary says so where the reviewer reads what the plan targets.
    """
    onprem = cfg.onprem
    if onprem is None:
        return None
    sm = onprem.fabric.opensm
    teams = sum(isinstance(t.partition, OnPremPartition) for t in cfg.teams)
    if sm.deploy_in_cluster:
        return (
            f"Subnet manager: NVIDIA OpenSM in the cluster (Deployment {opensm.DEPLOYMENT} in "
            f"{cfg.network.namespace!r}, on node {sm.node}); it reads partitions.conf ({teams} team partitions) from "
            f"the ConfigMap {opensm.CONFIG_MAP} and its parts and restarts when they change: no operator action "
            f"(stop any other SM on the fabric; {SM_NOTES})"
        )
    return (
        "Subnet manager: outside the cluster (UFM, NVIDIA OpenSM on a host, or a managed switch; "
        "platform.fabric.opensm.deployInCluster is off). OPERATOR ACTION after every change of opensm/: install "
        f"opensm/partitions.conf ({teams} team partitions) on it and make it re-read the file (kill -HUP on the "
        f"opensm process); until then the team VFs carry no P_Key and VF pods wait ({SM_NOTES})"
    )


def dra_lines(cfg: StackConfig) -> list[str]:
    """The DRA model's part of the summary: the model, and what each team may claim."""
    lines = [
        f"GPU resource model: dra (GPUCluster {gpu_cluster.GPU_CLUSTER}, NVIDIA DRA driver {cfg.versions.dra_driver}; "
        "no ClusterPolicy, no device plugin; GPU quotas as devices per DeviceClass)",
        "",
        "Claimable devices (ResourceClaimTemplate (DeviceClass) x quota"
        + ("; elastic: guaranteed, and at most with what the team may borrow" if cfg.queues.elastic else "")
        + ")",
    ]
    lines += table(["team", "namespace", "claims", "devices"], [_dra_row(cfg, t) for t in cfg.teams])
    return lines


def _dra_row(cfg: StackConfig, team: Team) -> list[str]:
    """``claims``: the most claims the ResourceQuota admits (one device each at least)."""
    return [team.name, team.ns, str(sum(dra.claimable(cfg, team).values())), claims.claimable(cfg, team)]


def _queue_lines(cfg: StackConfig) -> list[str]:
    """Elastic quotas: per team and flavor, guaranteed / borrowable / lendable, then cohort totals."""
    rows, totals = [], elastic.cohort_totals(cfg)
    for t in cfg.teams:
        for flavor, res, line, can_borrow in elastic.team_rows(cfg, t):
            fmt = elastic.format_quantity
            rows.append(
                [
                    t.name,
                    elastic.cohort(cfg, t),
                    flavor,
                    res,
                    fmt(line.nominal, res),
                    fmt(can_borrow, res),
                    fmt(elastic.lendable(line), res),
                ]
            )
    out = [
        f"Elastic quotas (Kueue {cfg.versions.kueue}, namespace {cfg.queues.namespace}): guaranteed = quota; "
        "borrowable = most the cohort can lend the team; lendable = what others may use while it idles"
    ]
    out += table(["team", "cohort", "flavor", "resource", "guaranteed", "borrowable", "lendable"], rows)
    out.append("")
    out.append("Cohort totals")
    out += table(
        ["cohort", "flavor", "resource", "capacity", "guaranteed", "lendable"],
        [
            [c, f, r, cap, elastic.format_quantity(g, r), elastic.format_quantity(lend, r)]
            for (c, f, r), (cap, g, lend) in sorted(totals.items())
        ],
    )
    out.append("")
    return out


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "(any)"


def observability_lines(cfg: StackConfig) -> list[str]:
    """What is monitored and alerted (``observability.enabled``)."""
    o = cfg.observability
    prom = o.prometheus
    monitors, rules = _labels(prom.monitor_labels), _labels(prom.rule_labels)
    labelled = (
        f"monitors and rules labelled {monitors}"
        if monitors == rules
        else f"monitors labelled {monitors}, rules labelled {rules}"
    )
    out = [
        f"Monitoring: plugs into the Prometheus stack in {prom.namespace!r} ({labelled}); "
        "needs its prometheus-operator CRDs (else pulumi up stops before any monitor) and kube-state-metrics",
        f"  dcgm-exporter: GPU Operator ServiceMonitor, pod attribution, {len(DCGM_COUNTERS)} DCGM fields "
        "(ECC and retired pages on)",
    ]
    if cfg.queues.elastic:
        out.append("  Kueue: ServiceMonitor over HTTPS with its own ServiceAccount token (ClusterQueue resources on)")
    groups = list(rule_groups(cfg).values())
    records = sorted({r.record for g in groups for r in g.rules if isinstance(r, Recording)})
    alerts = [r for g in groups for r in g.rules if isinstance(r, Alert)]
    boards = ", ".join(sorted(dashboards(o, queues=cfg.queues.elastic)))
    out.append(
        f"  {len(records)} recorded series, every {o.evaluation_interval}; dashboards: "
        f"{boards} (ConfigMaps in {o.dashboards_namespace!r})"
    )
    out += table(["alert", "for", "severity"], [[a.alert, a.for_, a.severity] for a in alerts])
    out += table(
        ["node group", "gpu kind", "GPU-equivalents", f"price/h ({o.prices.currency})"],
        [
            [k.node_group, k.resource, f"{k.weight:.4g}", "-" if k.price is None else f"{k.price:.4g}"]
            for k in gpu_kinds(cfg)
        ],
    )
    out.append("")
    return out


def render_summary(
    cfg: StackConfig,
    run: Run,
    counts: Mapping[str, Counter[str]],
    files: Mapping[str, str],
    guards: str | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The plan summary text; ``guards``: what the day-2 guards compared the plan against;
    ``warnings``: lines a reviewer reads first (each starts with ``WARNING: ``), below the target."""
    out: list[str] = []
    p = cfg.platform
    total = sum(sum(c.values()) for c in counts.values())
    out.append(f"gpuaas offline plan — stack {run.stack} ({p.kind})")
    out.append(f"{total} resources, {len(files)} plan files. No cluster, cloud or credentials were contacted.")
    out.append(f"Target: {target(cfg)}")
    sm = subnet_manager(cfg)
    if sm is not None:
        out.append(sm)
    if guards is not None:
        out.append(guards)
    out.extend(warnings)
    out.append("")

    out.append("Node groups" if p.kind == "onprem" else "GPU pools (capacity at maxCount)")
    rows = []
    nodes = node_counts(cfg)
    pools = {row["pool"]: row for row in pool_capacity(cfg)}
    for _where, name, sharing, model in sharing_groups(cfg):
        share = f"time-slicing x{sharing.time_slicing.replicas}" if sharing.time_slicing else "-"
        extra = []
        if name in pools:
            row = pools[name]
            extra = [row["vm_size"], f"{row['ib_gbps_per_gpu']} Gb/s/GPU", row["max_gpus"]]
        rows.append([name, model, nodes.get(name, 0), *extra, layout_name(sharing), share])
    headers = ["group", "gpu", "nodes"] + (["vm size", "infiniband", "max gpus"] if cfg.aks is not None else [])
    out += table([*headers, "mig.config", "sharing"], rows)
    out.append("")

    out.append("Teams")
    teams_out = run.outputs.get("teams") or {}
    rows = []
    for i, t in enumerate(cfg.teams):
        part = t.partition
        if isinstance(part, OnPremPartition):
            pk = f"{format_pkey(part.pkey)} / {full_member_pkey(part.pkey)}"
            vf, guids, res = str(part.vf_index), str(vfs_per_partition(cfg)), resources.sriov_resource(part.pkey)
        elif isinstance(part, AksPartition):
            pk, vf, guids = f"pool {part.node_pool} (Azure P_Key)", "-", "-"
            res = resources.rdma_shared_resource(cfg.network.rdma_resource_prefix, cfg.network.rdma_resource_name)
        else:
            pk, vf, guids, res = "-", "-", "-", "-"
        rows.append([t.name, t.ns, pk, vf, guids, res, _nad_name(t.name, teams_out), _quota_text(cfg, i)])
    out += table(["team", "namespace", "p_key (config / full)", "vf", "guids", "rdma resource", "nad", "quota"], rows)
    onprem = cfg.onprem
    if onprem is not None and onprem.multus is not None:
        everyone = ",".join(multus.global_namespaces(cfg.network.namespace))
        out.append(
            f"Multus: namespaceIsolation on, global NAD namespaces {everyone} "
            f"(not default), primary network {onprem.multus.cluster_network!r} in {onprem.multus.cni_conf_dir}"
        )
    if dra.uses_dra(cfg):
        out += dra_lines(cfg)
    out.append("")

    out.append(
        "Capacity vs. quotas" + (" (oversubscription allowed)" if cfg.quota_policy.allow_oversubscription else "")
    )
    cap = capacity(cfg)
    asked: Counter[str] = Counter()
    for i in range(len(cfg.teams)):
        asked.update(team_requests(cfg, i))
    out += table(
        ["resource", "fleet", "quota total"],
        [[r, cap.get(r, 0), asked.get(r, 0)] for r in sorted(set(cap) | set(asked))],
    )
    out.append("")

    if cfg.queues.elastic:
        out += _queue_lines(cfg)
    if cfg.observability.enabled:
        out += observability_lines(cfg)
    out.append("Resources per component")
    rows = [
        [comp, sum(c.values()), ", ".join(f"{k} {n}" for k, n in sorted(c.items()))]
        for comp, c in sorted(counts.items())
    ]
    out += table(["component", "count", "types"], rows)
    out.append("")
    if cfg.aks is not None and cfg.aks.register_infiniband_feature:
        out.append(
            "Note: AKSInfinibandSupport is registered subscription-wide and asynchronously; pools created before it "
            "reports Registered do not land on one InfiniBand network."
        )
        out.append("")
    return "\n".join(out)
