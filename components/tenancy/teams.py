"""Teams as stack config: one namespace per team with its quota, RBAC and IB network.

Per team (``gpuaas:teams[*]``), in the team's namespace:

* **Namespace** labelled ``gpuaas.io/team`` (the admission policies select on it), with its ND pool
  (AKS) or partition resource (on-prem) as labels the admission policies read, and Pod Security
  ``baseline``. RDMA does not need ``IPC_LOCK`` here because ib-node-config raises memlock to
  unlimited on the nodes, so baseline (which forbids adding IPC_LOCK) still runs RDMA pods;
  ``privileged`` only where ``team.privileged`` says so (kubernetes.io, Pod Security Standards).
* **ResourceQuota** and **LimitRange** (:mod:`components.tenancy.quotas`), and a second ResourceQuota that
  admits no pod at a system priority class (:func:`critical_priority_quota`).
* **RoleBinding** of ``team.groups`` to the one ``gpuaas-team-member`` **ClusterRole** (shared by
  all teams, namespace-scoped through the binding): run workloads, read its own quota/limits and
  read NetworkAttachmentDefinitions. The built-in ``edit``/``admin`` roles grant NADs to nobody
  (a CRD is in no aggregated role unless it says so), and only *read* on quotas
  (kubernetes/kubernetes bootstrappolicy/policy.go). Teams cannot create NADs, so a tenant
  cannot write its own ``pkey`` or GUID.
* On-prem, with a partition: the **NetworkAttachmentDefinition** ``ib-<team>`` of type ``ib-sriov``
  whose ``k8s.v1.cni.cncf.io/resourceName`` is the partition's VF pool
  (:func:`components.model.resources.sriov_resource`; k8snetworkplumbingwg/ib-sriov-cni
  deployment/examples/ib-crd.yaml). ``pkey`` is informational for ib-sriov-cni (only ib-kubernetes
  reads it); membership comes from the SM (:mod:`components.fabric.partitions`). With ``ipam: nv-ipam`` an
  **IPPool** per team, carved from ``fabric.ipamSupernet`` by P_Key, in the Network Operator
  namespace where nv-ipam watches its pools.
* On AKS, with a partition (= a dedicated ND pool, one Azure-assigned P_Key per VMSS): a
  ``gpuaas-scheduling`` **ConfigMap** holding the nodeSelector and tolerations that land pods on
  the team's pool, a template the Jobs in ``workloads`` copy. :mod:`components.tenancy.admission`'s pool
  policy, which rejects GPU/RDMA pods of the team that do not select that pool, reads the pool from
  the namespace label instead: teams may edit ConfigMaps, not namespaces.
  Why not mutate: MutatingAdmissionPolicy is on by default only from 1.36 (GA; beta and off in
  1.35, which is still supported: components/model/kubernetes.py ``FEATURES``), and the scheduler's
  ``PodNodeSelector`` admission plugin is not enabled on AKS.

Never a NAD in ``default``: Multus' ``namespaceIsolation`` still lets every pod use NADs in
``default`` unless ``globalNamespaces`` is set (k8snetworkplumbingwg/multus-cni pkg/types/conf.go
``defaultNonIsolatedNamespace``); :mod:`components.fabric.multus` sets it.

Objects are rendered by pure functions of (config, team); the component only registers them with
logical names ``<name>-<team>-<role>``, so reordering ``gpuaas:teams`` moves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import pulumi

from components import k8s as kube
from components.k8s import Manifest
from components.model import dra, hami, resources
from components.model.capacity import vfs_per_partition
from components.model.config import StackConfig
from components.model.queues import effective_integrations
from components.model.teams import AksPartition, OnPremPartition, Team
from components.model.types import format_pkey, full_member_pkey
from components.tenancy.labels import PARTITION_LABEL, POOL_LABEL, TEAM_LABEL, object_meta
from components.tenancy.networks import ip_pool, nad, nad_name, rdma_nad, scheduling_config_map
from components.tenancy.quotas import limit_range_limits, quota_hard

#: Name of the workload ClusterRole and of the RoleBinding in every team namespace.
ROLE: Final = "gpuaas-team-member"
QUOTA: Final = "gpuaas-team-quota"
#: Second quota of every team namespace: no pod at a system priority (:func:`critical_priority_quota`).
NO_CRITICAL_QUOTA: Final = "gpuaas-no-critical-priority"
#: The priority classes the API server creates at start (kubernetes pkg/apis/scheduling
#: ``SystemPriorityClasses``); above every user class, they preempt any pod on a full node.
SYSTEM_PRIORITY_CLASSES: Final = ("system-cluster-critical", "system-node-critical")
LIMITS: Final = "gpuaas-team-defaults"


def namespace(cfg: StackConfig, team: Team) -> Manifest:
    """The team namespace: Pod Security level, team label, and the labels the admission policies
    read (its ND pool on AKS, its partition resource on-prem). Teams cannot write namespaces."""
    labels = {
        TEAM_LABEL: team.name,
        **resources.pod_security_labels("privileged" if team.privileged else "baseline"),
        "pod-security.kubernetes.io/enforce-version": "latest",
        **dra.namespace_labels(cfg, team),  # DRA model: the device classes it may claim
        **hami.namespace_labels(cfg, team),  # HAMi quota: HAMi's webhook watches this namespace
    }
    if isinstance(team.partition, AksPartition):
        labels[POOL_LABEL] = team.partition.node_pool
    elif isinstance(team.partition, OnPremPartition) and cfg.onprem is not None:
        labels[PARTITION_LABEL] = resources.sriov_resource_name(team.partition.pkey)
    meta = object_meta(team.ns, labels=labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def resource_quota(cfg: StackConfig, team: Team) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(QUOTA, team.ns),
        "spec": {"hard": quota_hard(cfg, team)},
    }


def critical_priority_quota(team: Team) -> Manifest:
    """No team pod at a system priority: ``pods: 0`` for the scope PriorityClass In the system classes.

    Any namespace may name any existing PriorityClass, and the Priority admission plugin only keeps
    ``system-node-critical``/``system-cluster-critical`` to kube-system when the quota admission
    config lists them as ``limitedResources`` — a flag of the API server, which AKS does not let us
    set. A scoped quota does the same from inside the namespace: quota admission refuses a pod
    of a matching priority class once ``pods`` would exceed ``0`` (kubernetes.io, "Resource Quotas"
    → "Quota scopes" / "Limit Priority Class consumption by default"). Without it a team pod at
    system priority preempts other teams' running GPU pods.
    """
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(NO_CRITICAL_QUOTA, team.ns),
        "spec": {
            "hard": {"pods": "0"},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": list(SYSTEM_PRIORITY_CLASSES)}
                ]
            },
        },
    }


def limit_range(team: Team) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_meta(LIMITS, team.ns),
        "spec": {"limits": limit_range_limits()},
    }


_WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
_READ = ["get", "list", "watch"]
#: Pods are created and deleted, never edited: a pod's networks annotation must stay as admitted
#: (components/tenancy/admission.py), and nothing a team runs needs to patch a live pod — controllers
#: (Deployments, Jobs) act with their own service accounts. ``kubectl debug`` (ephemeral
#: containers) is left out for the same reason.
POD_VERBS: Final = ["get", "list", "watch", "create", "delete", "deletecollection"]


#: The workload kinds of Kueue integrations a team may write with elastic quotas (README, "Elastic
#: quotas": "run GPU work as a labelled Job (or JobSet, PyTorchJob, MPIJob)"); group → plurals.
QUEUED_KINDS: Final[dict[str, tuple[str, str]]] = {
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
    "kubeflow.org/pytorchjob": ("kubeflow.org", "pytorchjobs"),
    "kubeflow.org/mpijob": ("kubeflow.org", "mpijobs"),
}


def queue_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    """Elastic quotas: write the training kinds Kueue manages here, read the team's queue.

    ``localqueues`` (pending and admitted counts) and ``workloads`` (why a Job waits: its
    ``QuotaReserved``/``Admitted`` conditions and Kueue's message) are read-only: a team that wrote
    its Workload could change what Kueue counts. No ClusterQueues: they are cluster-scoped, and a
    RoleBinding grants nothing outside its namespace. A kind's verbs only where its integration
    is on: without it nothing queues it, and the queue guard refuses its GPU objects anyway.
    """
    if not cfg.queues.elastic:
        return []
    enabled = effective_integrations(cfg.queues)
    groups: dict[str, list[str]] = {}
    for integration, (group, plural) in QUEUED_KINDS.items():
        if integration in enabled:
            groups.setdefault(group, []).append(plural)
    rules = [{"apiGroups": [g], "resources": plurals, "verbs": _WRITE} for g, plurals in groups.items()]
    rules.append({"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": _READ})
    return rules


def cluster_role(cfg: StackConfig) -> Manifest:
    """Run workloads; read quota, limits and the team's NADs (``edit`` covers no NADs).

    Pods: create, delete, read, logs, exec/attach/port-forward — no ``update``/``patch`` (see
    :data:`POD_VERBS`). No verb on namespaces: the namespace labels are what admission trusts.
    With elastic quotas also :func:`queue_rules`.

    One ClusterRole, granted per team namespace by that team's RoleBinding: bound by a
    RoleBinding it gives nothing outside the namespace (Kubernetes RBAC docs, "RoleBinding
    examples"), and every team gets the same rules from one definition instead of a copy each.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": object_meta(ROLE),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": POD_VERBS},
            {
                "apiGroups": [""],
                "resources": ["services", "configmaps", "secrets", "persistentvolumeclaims", "serviceaccounts"],
                "verbs": _WRITE,
            },
            {
                "apiGroups": [""],
                "resources": ["pods/exec", "pods/attach", "pods/portforward"],
                "verbs": ["create", "get"],
            },
            {"apiGroups": [""], "resources": ["pods/log", "pods/status", "events", "endpoints"], "verbs": _READ},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": _WRITE},
            {
                "apiGroups": ["apps"],
                "resources": ["deployments/scale", "statefulsets/scale"],
                "verbs": ["get", "update", "patch"],
            },
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": _WRITE},
            {"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": _READ},
            {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["network-attachment-definitions"], "verbs": _READ},
            *queue_rules(cfg),
        ],
    }


def role_binding(team: Team) -> Manifest | None:
    """Bind ``team.groups`` to :func:`cluster_role` in the team namespace; ``None`` without groups."""
    if not team.groups:
        return None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(ROLE, team.ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in sorted(team.groups)
        ],
    }


def team_objects(cfg: StackConfig, team: Team) -> dict[str, Manifest]:
    """Every object of one team, by role (the suffix of its logical name), namespace first."""
    objects: dict[str, Manifest | None] = {
        "namespace": namespace(cfg, team),
        "quota": resource_quota(cfg, team),
        "no-critical-priority": critical_priority_quota(team),
        "limits": limit_range(team),
        "rolebinding": role_binding(team),
        "nad": nad(cfg, team),
        "nad-rdma": rdma_nad(cfg, team),
        "ippool": ip_pool(cfg, team),
        "scheduling": scheduling_config_map(cfg, team),
    }
    return {k: v for k, v in objects.items() if v is not None}


def team_export(cfg: StackConfig, team: Team) -> dict[str, Any]:
    """What operators read about a team (the ``teams`` stack output)."""
    out: dict[str, Any] = {"namespace": team.ns, "quota": quota_hard(cfg, team)}
    part = team.partition
    onprem = cfg.onprem
    if isinstance(part, OnPremPartition) and onprem is not None:
        out.update(
            {
                "pkey": format_pkey(part.pkey),
                "fullPkey": full_member_pkey(part.pkey),
                "vfIndex": part.vf_index,
                "guidCount": vfs_per_partition(cfg),
                "sriovResource": resources.sriov_resource(part.pkey),
                "nad": nad_name(team),
            }
        )
    elif isinstance(part, AksPartition):
        out["nodePool"] = part.node_pool
    return out


#: The team objects that grant something admission must guard: only after the guards are in force.
GUARDED: Final = frozenset({"quota", "no-critical-priority", "rolebinding"})


class Teams(pulumi.ComponentResource):
    """Every team's namespace, quota, limits, RBAC and IB network objects.

    ``depends_on``: what the team objects need first — the Network Operator (NAD and IPPool
    CRDs) and, on-prem, the OpenSM partitions that give the NAD's VFs their membership.
    ``guards``: the admission policies and bindings that make a quota or a RoleBinding safe (a
    quota lets a team request GPUs and RDMA, a RoleBinding lets it create pods); the quotas and
    RoleBindings wait for them (:data:`GUARDED`).
    """

    namespaces: dict[str, pulumi.CustomResource]
    exports: dict[str, dict[str, Any]]

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        depends_on: Sequence[pulumi.Resource] = (),
        guards: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("gpuaas:index:Teams", name, None, opts)
        self.namespaces = {}
        self.exports = {}
        member = kube.apply(f"{name}-member-role", cluster_role(cfg), kube.child(self, list(depends_on)))
        for team in cfg.teams:
            objects = team_objects(cfg, team)
            # Protected: a config edit that drops the team must not delete its workloads in passing.
            ns_opts = pulumi.ResourceOptions.merge(kube.child(self), pulumi.ResourceOptions(protect=team.protect))
            ns = kube.apply(f"{name}-{team.name}-namespace", objects.pop("namespace"), ns_opts)
            self.namespaces[team.name] = ns
            for role_name, manifest in objects.items():
                after: list[pulumi.Resource] = [ns, member] if role_name == "rolebinding" else [ns]
                if role_name in GUARDED:
                    after.extend(guards)
                kube.apply(f"{name}-{team.name}-{role_name}", manifest, kube.child(self, [*after, *depends_on]))
            self.exports[team.name] = team_export(cfg, team)
        self.register_outputs({"teams": self.exports})
