"""Burn-in: the NCCL proof again, on a schedule, at a priority every team workload preempts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from components.k8s import Manifest
from components.model.capacity import group_capacity, node_counts, sharing_groups
from components.model.config import StackConfig
from components.model.resources import AKS_POOL_LABEL, GPU, NODE_GROUP_LABEL
from components.proofs import pods
from components.proofs.nccl import RENDEZVOUS_PORT, nccl_job
from components.proofs.scripts import scripts_hash
from components.proofs.targets import ProofConfig, Target

BURN_IN_PRIORITY_CLASS: Final = "gpuaas-burn-in"


def burn_in_priority_class(cfg: ProofConfig) -> Manifest:
    """Below every team pod (pods without a class have priority 0), never preempting anything itself:
    any team workload that needs the GPUs evicts a running burn-in (Kubernetes docs, "Pod Priority and
    Preemption"; ``preemptionPolicy: Never`` keeps it from evicting others)."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": BURN_IN_PRIORITY_CLASS, "labels": {"app.kubernetes.io/part-of": "gpuaas"}},
        "value": cfg.verification.burn_in.priority,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "gpuaas burn-in proofs: run on idle GPUs, preempted by any team workload",
    }


def burn_in_groups(cfg: StackConfig, t: Target) -> list[tuple[str, str, str]]:
    """(name segment, node label, value) of each node group a target's burn-in runs on.

    AKS: the target's pool. On-prem: every node group with at least two nodes (the proof is a pair)
    that offers whole GPUs: each pod asks for one ``nvidia.com/gpu``, which a MIG group under the
    ``mixed`` strategy and a time-sliced group do not advertise, so there its pods could never be
    placed (found on the simulated fleet, tests/e2e).
    """
    if t.pool is not None:
        return [(t.pool, AKS_POOL_LABEL, t.pool)]
    onprem = cfg.onprem
    if onprem is None:
        return []
    counts = node_counts(cfg)
    whole = {
        name for _w, name, sharing, model in sharing_groups(cfg) if group_capacity(cfg, name, sharing, model).get(GPU)
    }
    return [
        (g.name, NODE_GROUP_LABEL, g.name) for g in onprem.node_groups if counts.get(g.name, 0) >= 2 and g.name in whole
    ]


def _burn_in_name(t: Target, group: str) -> str:
    return pods.bounded(f"{t.prefix}-burn-in-{group}", 52)  # CronJob names: 52 characters (Kubernetes docs)


def burn_in_service(t: Target, group: str) -> Manifest:
    """Headless Service of one group's burn-in pods: ``<job>-0.<service>`` is rank 0."""
    name = _burn_in_name(t, group)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": pods.object_meta(t, "burn-in", name),
        "spec": {
            "clusterIP": "None",
            "selector": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": name},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
            "publishNotReadyAddresses": True,
        },
    }


def burn_in_cron_job(cfg: ProofConfig, t: Target, group: str, label: str, value: str, digest: str) -> Manifest:
    """The NCCL Job of :func:`nccl_job` as a CronJob on one node group, at the burn-in priority.

    A CronJob's Jobs are named ``<cronjob>-<time>``, so rank 0's address comes from the Job-name label
    the Job controller puts on its pods (``batch.kubernetes.io/job-name``, Kubernetes ≥ 1.27).
    """
    name = _burn_in_name(t, group)
    job = nccl_job(cfg, t, digest)
    spec = job["spec"]
    spec["template"]["metadata"]["labels"] |= {"gpuaas.io/verify-pair": name, "gpuaas.io/burn-in": group}
    pod = spec["template"]["spec"]
    pod["subdomain"] = name
    pod["priorityClassName"] = BURN_IN_PRIORITY_CLASS
    pod["affinity"] = pods.affinity(t, name, "nccl")
    pod["affinity"]["nodeAffinity"] = pods.node_affinity(label, value)
    env = pod["containers"][0]["env"]
    job_name = {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    master = {"name": "MASTER_ADDR", "value": f"$(JOB_NAME)-0.{name}"}
    pod["containers"][0]["env"] = [{"name": "JOB_NAME", "valueFrom": job_name}] + [
        master if e["name"] == "MASTER_ADDR" else e for e in env
    ]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": pods.object_meta(t, "burn-in", name),
        "spec": {
            "schedule": cfg.verification.burn_in.schedule,
            # One at a time; a run missed by more than an hour is skipped, not queued.
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 3600,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "metadata": {"labels": pods.proof_labels(t, "burn-in") | pods.queue_label(t)},
                "spec": spec,
            },
        },
    }


def burn_in_manifests(
    cfg: ProofConfig, t: Target, bench_source: str, groups: Sequence[tuple[str, str, str]]
) -> dict[str, Manifest]:
    """A target's burn-in objects by role (``burn-in-<group>-service``, ``burn-in-<group>``) on ``groups``
    (:func:`burn_in_groups`); none when off."""
    if not cfg.verification.burn_in.enabled:
        return {}
    digest = scripts_hash(bench_source)
    out: dict[str, Manifest] = {}
    for group, label, value in groups:
        out[f"burn-in-{group}-service"] = burn_in_service(t, group)
        out[f"burn-in-{group}"] = burn_in_cron_job(cfg, t, group, label, value, digest)
    return out
