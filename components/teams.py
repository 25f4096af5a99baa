"""Teams as stack config: one namespace per team with its quota, RBAC and IB network.

Per team (``gpuaas:teams[*]``), in the team's namespace:

* **Namespace** labelled ``gpuaas.io/team`` (the admission policies select on it), with its ND pool
  (AKS) or partition resource (on-prem) as labels the admission policies read, and Pod Security
  ``baseline``. RDMA does not need ``IPC_LOCK`` here because ib-node-config raises memlock to
  unlimited on the nodes, so baseline (which forbids adding IPC_LOCK) still runs RDMA pods;
  ``privileged`` only where ``team.privileged`` says so (kubernetes.io, Pod Security Standards).
* **ResourceQuota** and **LimitRange** (:mod:`components.quotas`), and a second ResourceQuota that
  admits no pod at a system priority class (:func:`critical_priority_quota`).
* **RoleBinding** of ``team.groups`` to the one ``gpuaas-team-member`` **ClusterRole** (shared by
  all teams, namespace-scoped through the binding): run workloads, read its own quota/limits and
  read NetworkAttachmentDefinitions. The built-in ``edit``/``admin`` roles grant NADs to nobody
  (a CRD is in no aggregated role unless it says so), and only *read* on quotas
  (kubernetes/kubernetes bootstrappolicy/policy.go). Teams cannot create NADs, so a tenant
  cannot write its own ``pkey`` or GUID.
* On-prem, with a partition: the **NetworkAttachmentDefinition** ``ib-<team>`` of type ``ib-sriov``
  whose ``k8s.v1.cni.cncf.io/resourceName`` is the partition's VF pool
  (:func:`components.resources.sriov_resource`; k8snetworkplumbingwg/ib-sriov-cni
  deployment/examples/ib-crd.yaml). ``pkey`` is informational for ib-sriov-cni (only ib-kubernetes
  reads it); membership comes from the SM (:mod:`components.partitions`). With ``ipam: nv-ipam`` an
  **IPPool** per team, carved from ``fabric.ipamSupernet`` by P_Key, in the Network Operator
  namespace where nv-ipam watches its pools.
* On AKS, with a partition (= a dedicated ND pool, one Azure-assigned P_Key per VMSS): a
  ``gpuaas-scheduling`` **ConfigMap** holding the nodeSelector and tolerations that land pods on
  the team's pool, a template the Jobs in ``workloads`` copy. :mod:`components.admission`'s pool
  policy, which rejects GPU/RDMA pods of the team that do not select that pool, reads the pool from
  the namespace label instead: teams may edit ConfigMaps, not namespaces.
  Why not mutate: MutatingAdmissionPolicy is beta and off by default in 1.34 (alpha in the AKS
  1.33 we pin), and the scheduler's ``PodNodeSelector`` admission plugin is not enabled on AKS.

Never a NAD in ``default``: Multus' ``namespaceIsolation`` still lets every pod use NADs in
``default`` unless ``globalNamespaces`` is set (k8snetworkplumbingwg/multus-cni pkg/types/conf.go
``defaultNonIsolatedNamespace``); :mod:`components.multus` sets it.

Objects are rendered by pure functions of (config, team); the component only registers them with
logical names ``<name>-<team>-<role>``, so reordering ``gpuaas:teams`` moves nothing.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from typing import Any, Final

import pulumi

from components import dra, resources
from components import k8s as kube
from components.config import AksPartition, OnPremPartition, StackConfig, Team
from components.k8s import Manifest
from components.quotas import limit_range_limits, quota_hard
from components.rules import vfs_per_partition
from components.types import format_pkey, full_member_pkey

#: Label on every team namespace; the admission policies' namespaceSelector matches on it.
TEAM_LABEL: Final = "gpuaas.io/team"
PART_OF: Final = resources.PART_OF
#: Name of the workload ClusterRole and of the RoleBinding in every team namespace.
ROLE: Final = "gpuaas-team-member"
QUOTA: Final = "gpuaas-team-quota"
#: Second quota of every team namespace: no pod at a system priority (:func:`critical_priority_quota`).
NO_CRITICAL_QUOTA: Final = "gpuaas-no-critical-priority"
#: The priority classes the API server creates at start (kubernetes pkg/apis/scheduling
#: ``SystemPriorityClasses``); above every user class, they preempt any pod on a full node.
SYSTEM_PRIORITY_CLASSES: Final = ("system-cluster-critical", "system-node-critical")
LIMITS: Final = "gpuaas-team-defaults"
#: Namespace label of AKS teams with a partition: their ND pool (the pool policy binding selects on it).
POOL_LABEL: Final = "gpuaas.io/node-pool"
#: Namespace label of on-prem teams with a partition: the partition's resource name without its
#: prefix, ``sriov8001`` (a label value cannot hold ``/``). The partition admission policy reads it.
PARTITION_LABEL: Final = "gpuaas.io/partition-resource"
#: ConfigMap with the scheduling defaults of an AKS team (a template for workloads; not read by admission).
SCHEDULING: Final = "gpuaas-scheduling"
#: Node label AKS puts on every node of an agent pool.
AKS_POOL_LABEL: Final = resources.AKS_POOL_LABEL
#: NetworkAttachmentDefinition annotation tying a NAD to a device-plugin pool.
RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"


def nad_name(team: Team) -> str:
    """Name of the team's IB NetworkAttachmentDefinition (what pods put in their annotation)."""
    return f"ib-{team.name}"


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {**PART_OF, **extra.pop("labels", {})}
    meta.update(extra)
    return meta


def namespace(cfg: StackConfig, team: Team) -> Manifest:
    """The team namespace: Pod Security level, team label, and the labels the admission policies
    read (its ND pool on AKS, its partition resource on-prem). Teams cannot write namespaces."""
    labels = {
        TEAM_LABEL: team.name,
        **resources.pod_security_labels("privileged" if team.privileged else "baseline"),
        "pod-security.kubernetes.io/enforce-version": "latest",
        **dra.namespace_labels(cfg, team),  # DRA model: the device classes it may claim
    }
    if isinstance(team.partition, AksPartition):
        labels[POOL_LABEL] = team.partition.node_pool
    elif isinstance(team.partition, OnPremPartition) and cfg.onprem is not None:
        labels[PARTITION_LABEL] = resources.sriov_resource_name(team.partition.pkey)
    meta = _meta(team.ns, labels=labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def resource_quota(cfg: StackConfig, team: Team) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _meta(QUOTA, team.ns),
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
        "metadata": _meta(NO_CRITICAL_QUOTA, team.ns),
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
        "metadata": _meta(LIMITS, team.ns),
        "spec": {"limits": limit_range_limits()},
    }


_WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
_READ = ["get", "list", "watch"]
#: Pods are created and deleted, never edited: a pod's networks annotation must stay as admitted
#: (components/admission.py), and nothing a team runs needs to patch a live pod — controllers
#: (Deployments, Jobs) act with their own service accounts. ``kubectl debug`` (ephemeral
#: containers) is left out for the same reason.
POD_VERBS: Final = ["get", "list", "watch", "create", "delete", "deletecollection"]


def cluster_role() -> Manifest:
    """Run workloads; read quota, limits and the team's NADs (``edit`` covers no NADs).

    Pods: create, delete, read, logs, exec/attach/port-forward — no ``update``/``patch`` (see
    :data:`POD_VERBS`). No verb on namespaces: the namespace labels are what admission trusts.

    One ClusterRole, granted per team namespace by that team's RoleBinding: bound by a
    RoleBinding it gives nothing outside the namespace (Kubernetes RBAC docs, "RoleBinding
    examples"), and every team gets the same rules from one definition instead of a copy each.
    """
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(ROLE),
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
        ],
    }


def role_binding(team: Team) -> Manifest | None:
    """Bind ``team.groups`` to :func:`cluster_role` in the team namespace; ``None`` without groups."""
    if not team.groups:
        return None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(ROLE, team.ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in sorted(team.groups)
        ],
    }


def team_subnet(cfg: StackConfig, pkey: int) -> ipaddress.IPv4Network:
    """The /24 of ``fabric.ipamSupernet`` that partition ``pkey`` draws addresses from (the pkey-th)."""
    onprem = cfg.onprem
    if onprem is None:
        raise ValueError("team subnets exist on-prem only")
    supernet = ipaddress.IPv4Network(onprem.fabric.ipam_supernet)
    if supernet.prefixlen > 24 or pkey >= 1 << (24 - supernet.prefixlen):
        raise ValueError(f"{supernet} has no /24 number {pkey}")
    return ipaddress.IPv4Network((int(supernet.network_address) + (pkey << 8), 24))


def per_node_block(cfg: StackConfig) -> int:
    """Addresses nv-ipam reserves per node for one team: one per HCA (one team VF per HCA)."""
    onprem = cfg.onprem
    return max((len(g.hcas) for g in onprem.node_groups), default=1) if onprem else 1


def rdma_nad_name(team: Team) -> str:
    """The team's address-less NAD beside a ``static`` one: for pods that need no IP (the proofs)."""
    return f"ib-{team.name}-rdma"


def ipam(cfg: StackConfig, team: Team) -> dict[str, Any] | None:
    """The ``ipam`` section of the team NAD: none, ``static`` or ``nv-ipam`` with the team's pool.

    ``None`` (``fabric.ipam: none``) leaves ``ipam`` out: ib-sriov-cni runs IPAM only when
    ``ipam.type`` is set, and with an IPAM that returns no address it fails the sandbox ("IPAM
    plugin returned missing IP config", ib-sriov-cni v1.3.0 ``cmd/ib-sriov-cni/main.go``), which
    is what ``static`` does for a pod that lists no ``ips``.
    """
    onprem = cfg.onprem
    mode = onprem.fabric.ipam if onprem is not None else "none"
    if mode == "nv-ipam":
        return {"type": "nv-ipam", "poolName": nad_name(team)}
    if mode == "static":
        # Addresses per pod: "ips" in the network-selection annotation (the NAD declares the capability).
        return {"type": "static"}
    return None


def nad_config(cfg: StackConfig, team: Team, *, addresses: bool = True) -> dict[str, Any]:
    """The ib-sriov CNI config of the team NAD (ib-sriov-cni README "Configuration reference").

    ``addresses=False``: the address-less variant (:func:`rdma_nad`).
    """
    part = team.partition
    if not isinstance(part, OnPremPartition):
        raise ValueError(f"team {team.name!r} has no on-prem partition")
    conf: dict[str, Any] = {
        "cniVersion": "0.3.1",
        "name": nad_name(team) if addresses else rdma_nad_name(team),
        "type": "ib-sriov",
        "pkey": full_member_pkey(part.pkey),
        "link_state": "enable",
        "ibKubernetesEnabled": False,
    }
    ipam_conf = ipam(cfg, team) if addresses else None
    if ipam_conf is not None:
        if ipam_conf["type"] == "static":
            conf["capabilities"] = {"ips": True}
        conf["ipam"] = ipam_conf
    return conf


def _nad(cfg: StackConfig, team: Team, addresses: bool) -> Manifest | None:
    part = team.partition
    if cfg.onprem is None or not isinstance(part, OnPremPartition):
        return None
    conf = nad_config(cfg, team, addresses=addresses)
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": _meta(
            conf["name"],
            team.ns,
            annotations={RESOURCE_NAME_ANNOTATION: resources.sriov_resource(part.pkey)},
        ),
        "spec": {"config": json.dumps(conf, indent=2)},
    }


def nad(cfg: StackConfig, team: Team) -> Manifest | None:
    """The team's ib-sriov NetworkAttachmentDefinition (on-prem partitions only)."""
    return _nad(cfg, team, addresses=True)


def rdma_nad(cfg: StackConfig, team: Team) -> Manifest | None:
    """With ``fabric.ipam: static``, the same network without IPAM: a pod that lists no ``ips``
    attaches to this one instead of failing its sandbox. ``None`` in the other modes, whose
    team NAD already works without addresses from the pod."""
    onprem = cfg.onprem
    if onprem is None or onprem.fabric.ipam != "static":
        return None
    return _nad(cfg, team, addresses=False)


def proof_network(cfg: StackConfig, team: Team) -> str:
    """The NAD the verification proofs attach: they need the VF, not an address on it.

    The proofs' pods carry no ``ips`` (two ranks of one Indexed Job share a template), so with
    ``static`` IPAM they use :func:`rdma_nad`; otherwise the team NAD.
    """
    return rdma_nad_name(team) if rdma_nad(cfg, team) is not None else nad_name(team)


def ip_pool(cfg: StackConfig, team: Team) -> Manifest | None:
    """The team's nv-ipam IPPool (``fabric.ipam: nv-ipam`` only), in the Network Operator namespace."""
    part = team.partition
    onprem = cfg.onprem
    if onprem is None or onprem.fabric.ipam != "nv-ipam" or not isinstance(part, OnPremPartition):
        return None
    return {
        "apiVersion": "nv-ipam.nvidia.com/v1alpha1",
        "kind": "IPPool",
        "metadata": _meta(nad_name(team), cfg.network.namespace, labels={TEAM_LABEL: team.name}),
        "spec": {"subnet": str(team_subnet(cfg, part.pkey)), "perNodeBlockSize": per_node_block(cfg)},
    }


def scheduling(cfg: StackConfig, team: Team) -> dict[str, Any] | None:
    """nodeSelector and tolerations that put a pod of an AKS team on the team's ND pool."""
    aks = cfg.aks
    part = team.partition
    if aks is None or not isinstance(part, AksPartition) or part.node_pool not in aks.pools_by_name:
        return None
    pool = aks.pools_by_name[part.node_pool]
    return {
        "nodeSelector": {AKS_POOL_LABEL: pool.name},
        "tolerations": [kube.taint_toleration(t) for t in pool.taints],
    }


def scheduling_config_map(cfg: StackConfig, team: Team) -> Manifest | None:
    """The ``gpuaas-scheduling`` ConfigMap: the pool policy's parameter and the Jobs' template."""
    sched = scheduling(cfg, team)
    if sched is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(SCHEDULING, team.ns),
        "data": {
            "nodeSelectorKey": AKS_POOL_LABEL,
            "nodeSelectorValue": sched["nodeSelector"][AKS_POOL_LABEL],
            "pod-spec.json": json.dumps(sched, indent=2, sort_keys=True),
        },
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
        member = kube.apply(f"{name}-member-role", cluster_role(), kube.child(self, list(depends_on)))
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
