"""Verification workloads: the proofs that a team's partition carries RDMA and GPUDirect traffic.

Per team with ``verify: true`` (and, when ``verification.aksPools``, per AKS GPU pool) in the
team's namespace, so that its quota, admission policy and Pod Security level apply to them:

- **ib_write_bw** (perftest): a server Job and a Service, and a client Job that reaches the
  server over the pod network for perftest's out-of-band exchange; the data then moves over
  the InfiniBand device the pod was given. The client fails (exit 1) when the ``BW average``
  of ``--report_gbits`` is below ``verification.ibWriteBwMinFraction`` × the link rate.
- **NCCL all_reduce**: an Indexed Job of two pods on two nodes (one GPU each) with a headless
  Service for the rendezvous, running ``workloads/allreduce_bench.py`` (from a ConfigMap)
  three times: GPUDirect RDMA, RDMA through host memory, TCP. It fails when the GPUDirect run's
  busbw is below ``verification.ncclGdrMinFraction`` × the link rate or when NCCL logged no
  ``GDRDMA`` channel (domain.md §4.3).

Which RDMA device a pod has: on-prem the SR-IOV device plugin injects the VF's PCI address as
``PCIDEVICE_<RESOURCE>`` (resource name upper-cased, ``.``/``/``/``-`` as ``_``:
k8snetworkplumbingwg/sriov-network-device-plugin, pkg/resources/server.go ``getEnvs``) and the
VF's RDMA device is the one entry of ``/sys/bus/pci/devices/<bdf>/infiniband/``. On AKS the RDMA
shared device plugin hands the pod every HCA of the node, and the first ACTIVE InfiniBand port
is taken (NCCL picks the GPU's nearest HCA by itself).

Containers stay within Pod Security ``baseline``: no privileged mode, no added capabilities
(``IPC_LOCK`` included: the locked-memory limit is raised host-side by ib-node-config), no
host namespaces or host paths.

The Jobs are not awaited by Pulumi (``pulumi.com/skipAwait``): a proof that waits for two free
GPU nodes must not hold or fail ``pulumi up``. Read the outcome with ``workloads/gather_results.py``.
A Job is immutable, so it runs again when its pod template changes (the scripts' hash is an
annotation of it); to run it again unchanged, ``pulumi up --replace <urn of the Job>``.

Pure renderers here return manifests; :class:`Verification` only registers them. Where the proofs run
pairs teams, partitions, pools and nodes over the whole stack (:func:`components.proofs.targets.targets`,
:func:`components.proofs.isolation.isolation_probes`, :func:`components.proofs.burn_in.burn_in_groups`):
:class:`VerificationArgs` carries that pairing computed, as plain values, with the two sections the
renderers read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pulumi

from components import k8s as kube
from components.k8s import Manifest
from components.model.verification import Verification as VerificationConfig
from components.model.versions import Versions
from components.proofs import pods
from components.proofs.burn_in import burn_in_manifests, burn_in_priority_class
from components.proofs.ib_write_bw import ib_client_job, ib_server_job, ib_service
from components.proofs.isolation import Probe, probe_job_names, probe_manifests
from components.proofs.nccl import nccl_job, nccl_service
from components.proofs.pods import pool_namespace
from components.proofs.scripts import scripts_config_map, scripts_hash
from components.proofs.targets import POOL_NAMESPACE, ProofConfig, Target

ROOT = Path(__file__).resolve().parents[2]
BENCH_SCRIPT: Final = ROOT / "workloads" / "allreduce_bench.py"


@dataclass(frozen=True, kw_only=True)
class VerificationArgs:
    """Arguments of :class:`Verification`. Ordering: ``opts.depends_on``, forwarded to every child.

    Which teams and pools are proved, which partition each probe tries to reach and which node groups a
    burn-in runs on are decided over the whole stack (teams, partitions, pools, nodes and their GPUs), so
    they arrive decided: ``targets``, ``probes`` and ``burn_in_groups``. A :class:`ProofConfig`.
    """

    verification: VerificationConfig = field(default_factory=VerificationConfig)
    """The pass marks (fractions of the link rate) and the burn-in schedule and priority (``gpuaas:verification``)."""
    versions: Versions = field(default_factory=Versions)
    """The perftest and PyTorch images the proofs run."""
    targets: tuple[Target, ...] = ()
    """Where ib_write_bw and NCCL run: each verify team's partition, then each AKS pool (``aksPools``)."""
    probes: tuple[Probe, ...] = ()
    """The isolation probes: a write from one target into another partition, which must fail."""
    burn_in_groups: Mapping[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)
    """Target key → (name segment, node label, value) of each node group its burn-in runs on, with
    ``verification.burnIn.enabled`` (:func:`components.proofs.burn_in.burn_in_groups`); none: no burn-in there."""


def manifests(cfg: ProofConfig, t: Target, bench_source: str) -> dict[str, Manifest]:
    """One target's objects by role, in apply order (the role is the child name's last segment)."""
    digest = scripts_hash(bench_source)
    return {
        "scripts": scripts_config_map(t, bench_source),
        "ib-service": ib_service(t),
        "ib-server": ib_server_job(cfg, t, digest),
        "ib-client": ib_client_job(cfg, t, digest),
        "nccl-service": nccl_service(t),
        "nccl": nccl_job(cfg, t, digest),
    }


def job_names(t: Target) -> dict[str, str]:
    """The Jobs a results gatherer reads: check → metadata.name."""
    return {"ib_write_bw": pods.object_name(t, "ib-client"), "nccl": pods.object_name(t, "nccl")}


class Verification(pulumi.ComponentResource):
    """The proofs of every verify team (and AKS pool), last in the install order: ib_write_bw and NCCL
    (positive), the isolation probes (negative) and, when enabled, the burn-in CronJobs."""

    jobs: dict[str, dict[str, str]]

    def __init__(self, name: str, args: VerificationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Verification", name, None, opts)
        bench_source = BENCH_SCRIPT.read_text()
        self.jobs = {}
        after = kube.depends_on(opts)
        found = args.targets
        namespace: list[pulumi.Resource] = []
        if any(t.namespace == POOL_NAMESPACE for t in found):
            namespace = [kube.apply(f"{name}-namespace", pool_namespace(), kube.child(self, after))]
        opts_after = kube.child(self, [*namespace, *after])
        for t in found:
            for role, manifest in manifests(args, t, bench_source).items():
                kube.apply(f"{name}-{t.key}-{role}", manifest, opts_after)
            self.jobs[t.key] = {check: f"{t.namespace}/{job}" for check, job in job_names(t).items()}
        for p in args.probes:
            for role, manifest in probe_manifests(args, p).items():
                kube.apply(f"{name}-isolation-{p.id}-{role}", manifest, opts_after)
            self.jobs.setdefault(p.client.key, {})[f"isolation:{p.server.key}"] = probe_job_names(p)["client"]
        if args.verification.burn_in.enabled and found:
            priority = kube.apply(f"{name}-burn-in-priority", burn_in_priority_class(args), kube.child(self, after))
            for t in found:
                groups = args.burn_in_groups.get(t.key, ())
                for role, manifest in burn_in_manifests(args, t, bench_source, groups).items():
                    kube.apply(f"{name}-{t.key}-{role}", manifest, kube.child(self, [*namespace, priority, *after]))
        self.register_outputs({"jobs": self.jobs})
