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

Objects are rendered by pure functions of the component's arguments (:class:`TeamsArgs`, one
:class:`TeamArgs` per team), never of the stack config (issue #33: ``Teams("t", TeamsArgs(teams=(TeamArgs(...),)))``
is one team, from any program); the component only registers them with logical names
``<name>-<team>-<role>``, so reordering ``gpuaas:teams`` moves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pulumi

from components import k8s as kube
from components.k8s import Manifest
from components.model import resources
from components.model.teams import AksPartition, OnPremPartition, Team
from components.model.types import format_pkey, full_member_pkey
from components.tenancy.labels import PARTITION_LABEL, POOL_LABEL, TEAM_LABEL, object_meta
from components.tenancy.networks import PartitionNetworks, ip_pool, nad, nad_name, rdma_nad, scheduling_config_map
from components.tenancy.quotas import limit_range_limits

#: Name of the workload ClusterRole and of the RoleBinding in every team namespace.
ROLE: Final = "gpuaas-team-member"
QUOTA: Final = "gpuaas-team-quota"
#: Second quota of every team namespace: no pod at a system priority (:func:`critical_priority_quota`).
NO_CRITICAL_QUOTA: Final = "gpuaas-no-critical-priority"
#: The priority classes the API server creates at start (kubernetes pkg/apis/scheduling
#: ``SystemPriorityClasses``); above every user class, they preempt any pod on a full node.
SYSTEM_PRIORITY_CLASSES: Final = ("system-cluster-critical", "system-node-critical")
LIMITS: Final = "gpuaas-team-defaults"


@dataclass(frozen=True, kw_only=True)
class TeamArgs:
    """One team of :class:`Teams`: the team as configured and what the platform makes of it."""

    team: Team
    """The team (``gpuaas:teams[*]``): its name, namespace, groups, Pod Security level, ``protect`` and partition.
    Its ``quota`` is not read here: :attr:`quota` is the rendered one."""
    quota: Mapping[str, str]
    """``spec.hard`` of the team's ResourceQuota. A resource a quota does not name is unlimited, so it names every
    extended resource of the platform, with the team's share or ``"0"``, besides CPU, memory and pods
    (:func:`components.tenancy.quotas.quota_hard` renders it from a stack config)."""
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels of the team namespace besides the team's, its Pod Security level and its partition's: the DRA device
    classes it may claim, HAMi's webhook's ``gpuaas.io/hami``; defaults to none."""
    pool_taints: tuple[str, ...] | None = None
    """AKS, for a team whose partition is an ND pool: that pool's taints (``key=value:Effect``), which the
    ``gpuaas-scheduling`` ConfigMap's pod template tolerates; ``None`` (the default): no such ConfigMap."""


@dataclass(frozen=True, kw_only=True)
class TeamsArgs:
    """Arguments of :class:`Teams`. Ordering: ``opts.depends_on``, forwarded to every child, and the two
    fields below, which order only some of them."""

    teams: tuple[TeamArgs, ...] = ()
    """The teams, each with its namespace and objects (logical names carry the team's name, not its place);
    defaults to none."""
    networks: PartitionNetworks | None = None
    """On-prem: what a team partition's network is made of (NAD, IPPool, the partition label and the
    ``teams`` output's P_Key and GUIDs); ``None`` (the default, AKS): a partition is a node pool, no NAD."""
    queue_integrations: frozenset[str] | None = None
    """With elastic quotas (``gpuaas:queues.elastic``), the Kueue integrations that run: the team role writes the
    training kinds among them and reads its queue (:func:`queue_rules`); ``None`` (the default): no elastic quotas."""
    objects_after: tuple[pulumi.Resource, ...] = ()
    """What every team object but the namespaces waits for: the Network Operator (the NAD and IPPool CRDs),
    on-prem the SR-IOV host side and the partitions that give the NADs' VFs their membership. A namespace needs
    none of them, so it comes first (what lives in it is ordered after it); defaults to none."""
    guards: tuple[pulumi.Resource, ...] = ()
    """The admission policies and bindings that make a quota or a RoleBinding safe (a quota lets a team request
    GPUs and RDMA, a RoleBinding lets it create pods): the quotas and RoleBindings wait for them
    (:data:`GUARDED`) through the member ClusterRole, which waits for all of them; the namespaces do not;
    defaults to none."""


def namespace(team: TeamArgs, networks: PartitionNetworks | None = None) -> Manifest:
    """The team namespace: Pod Security level, team label, and the labels the admission policies
    read (its ND pool on AKS, its partition resource on-prem). Teams cannot write namespaces."""
    t = team.team
    labels = {
        TEAM_LABEL: t.name,
        **resources.pod_security_labels("privileged" if t.privileged else "baseline"),
        "pod-security.kubernetes.io/enforce-version": "latest",
        # DRA model: the device classes it may claim; HAMi quota: HAMi's webhook watches this namespace.
        **team.namespace_labels,
    }
    if isinstance(t.partition, AksPartition):
        labels[POOL_LABEL] = t.partition.node_pool
    elif isinstance(t.partition, OnPremPartition) and networks is not None:
        labels[PARTITION_LABEL] = resources.sriov_resource_name(t.partition.pkey)
    meta = object_meta(t.ns, labels=labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def resource_quota(team: TeamArgs) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(QUOTA, team.team.ns),
        "spec": {"hard": dict(team.quota)},
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


def queue_rules(integrations: frozenset[str] | None) -> list[dict[str, Any]]:
    """Elastic quotas: write the training kinds Kueue manages here, read the team's queue.

    ``localqueues`` (pending and admitted counts) and ``workloads`` (why a Job waits: its
    ``QuotaReserved``/``Admitted`` conditions and Kueue's message) are read-only: a team that wrote
    its Workload could change what Kueue counts. No ClusterQueues: they are cluster-scoped, and a
    RoleBinding grants nothing outside its namespace. A kind's verbs only where its integration
    is on: without it nothing queues it, and the queue guard refuses its GPU objects anyway.
    """
    if integrations is None:
        return []
    groups: dict[str, list[str]] = {}
    for integration, (group, plural) in QUEUED_KINDS.items():
        if integration in integrations:
            groups.setdefault(group, []).append(plural)
    rules = [{"apiGroups": [g], "resources": plurals, "verbs": _WRITE} for g, plurals in groups.items()]
    rules.append({"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": _READ})
    return rules


def cluster_role(queue_integrations: frozenset[str] | None = None) -> Manifest:
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
            *queue_rules(queue_integrations),
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


def team_objects(team: TeamArgs, networks: PartitionNetworks | None = None) -> dict[str, Manifest]:
    """Every object of one team, by role (the suffix of its logical name), namespace first."""
    t = team.team
    objects: dict[str, Manifest | None] = {
        "namespace": namespace(team, networks),
        "quota": resource_quota(team),
        "no-critical-priority": critical_priority_quota(t),
        "limits": limit_range(t),
        "rolebinding": role_binding(t),
        "nad": nad(networks, t),
        "nad-rdma": rdma_nad(networks, t),
        "ippool": ip_pool(networks, t),
        "scheduling": scheduling_config_map(t, team.pool_taints),
    }
    return {k: v for k, v in objects.items() if v is not None}


def team_export(team: TeamArgs, networks: PartitionNetworks | None = None) -> dict[str, Any]:
    """What operators read about a team (the ``teams`` stack output)."""
    t = team.team
    out: dict[str, Any] = {"namespace": t.ns, "quota": dict(team.quota)}
    part = t.partition
    if isinstance(part, OnPremPartition) and networks is not None:
        out.update(
            {
                "pkey": format_pkey(part.pkey),
                "fullPkey": full_member_pkey(part.pkey),
                "vfIndex": part.vf_index,
                "guidCount": networks.vfs_per_partition,
                "sriovResource": resources.sriov_resource(part.pkey),
                "nad": nad_name(t),
            }
        )
    elif isinstance(part, AksPartition):
        out["nodePool"] = part.node_pool
    return out


#: The team objects that grant something admission must guard: only after the guards are in force.
GUARDED: Final = frozenset({"quota", "no-critical-priority", "rolebinding"})


class Teams(pulumi.ComponentResource):
    """Every team's namespace, quota, limits, RBAC and IB network objects, and the one team ClusterRole.

    One team is a :class:`TeamsArgs` of one :class:`TeamArgs`. ``namespaces``: each team's namespace by
    team name, for what lives in it (LocalQueues, claim templates). ``exports``: the ``teams`` output.
    """

    namespaces: dict[str, pulumi.CustomResource]
    exports: dict[str, dict[str, Any]]

    def __init__(self, name: str, args: TeamsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Teams", name, None, opts)
        depends_on = kube.depends_on(opts)
        self.namespaces = {}
        self.exports = {}
        after_all = [*args.objects_after, *depends_on]
        # The member role is the guards' barrier: it waits for every guard, and each guarded object waits
        # for it, so a guarded object still comes after every guard, through one edge instead of one per
        # guard (issue 37: ~33 guards × 3 objects a team were most of a large plan's edges). The role
        # grants nothing until a RoleBinding binds it, and the RoleBindings come after it anyway.
        member = kube.apply(
            f"{name}-member-role",
            cluster_role(args.queue_integrations),
            kube.child(self, [*after_all, *args.guards]),
        )
        for team in args.teams:
            t = team.team
            objects = team_objects(team, args.networks)
            # Protected: a config edit that drops the team must not delete its workloads in passing.
            ns_opts = pulumi.ResourceOptions.merge(
                kube.child(self, depends_on), pulumi.ResourceOptions(protect=t.protect)
            )
            ns = kube.apply(f"{name}-{t.name}-namespace", objects.pop("namespace"), ns_opts)
            self.namespaces[t.name] = ns
            for role_name, manifest in objects.items():
                after: list[pulumi.Resource] = [ns, member] if role_name in GUARDED else [ns]
                kube.apply(f"{name}-{t.name}-{role_name}", manifest, kube.child(self, [*after, *after_all]))
            self.exports[t.name] = team_export(team, args.networks)
        self.register_outputs({"teams": self.exports})
