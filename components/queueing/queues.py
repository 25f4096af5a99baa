"""Kueue from stack config: the pinned release, flavors, one ClusterQueue and LocalQueue per team.

Only with ``gpuaas:queues.elastic: true``; off, nothing here is registered and team quotas stay
hard ResourceQuotas. The amounts come from :mod:`components.model.elastic`; the objects follow the
Kueue v0.19.2 API (``kueue.x-k8s.io/v1beta2``, CRDs in shared/upstream/kueue/v0.19.2):

* **Helm release** ``kueue`` (chart ``oci://registry.k8s.io/kueue/charts/kueue``) in its own
  namespace, manager image pinned, its ``Configuration`` rendered here
  (:func:`kueue_configuration`): which job kinds it manages, whether jobs without a queue name
  are held, and only in team namespaces.
* **ResourceFlavor** per node group / GPU pool: ``nodeLabels`` ``gpuaas.io/node-group`` (the label
  gpuaas puts on every node of the group, components/clusters/onprem_nodes.py), and on AKS also
  ``kubernetes.azure.com/agentpool`` and tolerations of the pool's taints. Kueue writes a flavor's
  node labels into the admitted Job's pod template as a nodeSelector (and its tolerations), so the
  Job's pods select their pool by the label the AKS pool guard asks for
  (:mod:`components.tenancy.admission`); without it an admitted Job's pods were refused. One more,
  :data:`components.model.elastic.ANY_NODE`, without labels, for cpu, memory and partition resources.
* **ClusterQueue** per team (named after the team): its cohort, a ``namespaceSelector`` of the
  team namespace only, resource groups (:func:`resource_groups`), preemption from
  ``queues.preemption``.
* **LocalQueue** per team namespace, named after the team: what ``kueue.x-k8s.io/queue-name`` names.
* **WorkloadPriorityClass** per ``queues.priorityClasses`` entry.

:class:`Queues` takes :class:`QueuesArgs` (issue #33): Kueue's settings and the amounts the elastic
model computed, as plain values. One piece: the arguments, the pure renderers of every Kueue object
and the component that registers them (past 400 lines), as every component's module is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

import pulumi
import yaml

from components import k8s as kube
from components.k8s import Manifest
from components.model import charts, elastic, resources
from components.model.elastic import ANY_NODE, Line
from components.model.queues import Queues as QueuesConfig
from components.model.resources import AKS_POOL_LABEL, NODE_GROUP_LABEL, PART_OF
from components.model.teams import Team
from components.model.versions import Versions
from components.queueing.admission import guard_objects

API: Final = "kueue.x-k8s.io/v1beta2"
RELEASE: Final = "kueue"


@dataclass(frozen=True)
class Flavor:
    """One ResourceFlavor: a node group (on-prem) or ND pool (AKS) whose GPUs the team queues share."""

    name: str
    """The group's or pool's name: the flavor's name and its ``gpuaas.io/node-group`` node label."""
    aks_pool: bool = False
    """An AKS agent pool: the flavor also selects ``kubernetes.azure.com/agentpool`` (defaults to on-prem)."""
    taints: tuple[str, ...] = ()
    """The pool's ``nodeTaints`` (``key[=value]:Effect``), which the flavor's tolerations admit."""


@dataclass(frozen=True)
class TeamQueue:
    """One team's ClusterQueue and LocalQueue, with the amounts :mod:`components.model.elastic` computed."""

    name: str
    """The team's name: its ClusterQueue's and LocalQueue's (what ``kueue.x-k8s.io/queue-name`` names)."""
    namespace: str
    """The team namespace, the only one the ClusterQueue serves and where its LocalQueue lives."""
    cohort: str
    """The cohort the queue lends to and borrows from."""
    lines: Mapping[str, Mapping[str, Line]]
    """Flavor → resource → nominal quota and borrowing/lending limits, in flavor order; the GPU flavors
    first, :data:`components.model.elastic.ANY_NODE` (cpu, memory, partition resources) always present."""


@dataclass(frozen=True, kw_only=True)
class QueuesArgs:
    """Arguments of :class:`Queues`. Ordering: ``opts.depends_on``, forwarded to every child.

    What the elastic model computes over the whole cluster (each team's share of every pool, its
    cohort, what HAMi and DRA count) arrives as plain values here: the component renders Kueue's
    objects from them and knows no stack config.
    """

    queues: QueuesConfig = field(default_factory=QueuesConfig)
    """Kueue's namespace, replicas and timeouts, the managed integrations and trusted controllers, preemption
    and priority classes (``gpuaas:queues``; its ``elastic`` switch is the caller's: whether to build this)."""
    versions: Versions = field(default_factory=Versions)
    """The Kueue manager image and tag."""
    chart: charts.Source = field(
        default_factory=lambda: charts.source(charts.Charts(), charts.chart(Versions(), charts.KUEUE))
    )
    """Where the kueue chart comes from, at its pinned version (defaults to the public OCI registry)."""
    flavors: tuple[Flavor, ...] = ()
    """The GPU flavors, in platform order (:data:`components.model.elastic.ANY_NODE` is added after them)."""
    teams: tuple[TeamQueue, ...] = ()
    """One queue per team, in team order."""
    cluster_queue_metrics: bool = False
    """Kueue exports ClusterQueue quota and usage per flavor and resource (observability on; off in Kueue)."""
    excluded_resource_prefixes: tuple[str, ...] = ()
    """Resource prefixes Kueue ignores beyond :data:`components.model.elastic.UNACCOUNTED_PREFIXES` (HAMi's)."""
    transformations: tuple[Mapping[str, Any], ...] = ()
    """Kueue ``resources.transformations`` (HAMi: memory and cores per slice count times the slices)."""
    device_class_mappings: tuple[Mapping[str, Any], ...] = ()
    """Kueue ``resources.deviceClassMappings`` (DRA: each DeviceClass counts as the resource the queues cover)."""

    def team(self, name: str) -> TeamQueue:
        """The queue of team ``name``."""
        return next(t for t in self.teams if t.name == name)


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(PART_OF)
    return meta


def resource_flavors(args: QueuesArgs) -> dict[str, Manifest]:
    """Flavor name → ResourceFlavor, platform order, :data:`ANY_NODE` last."""
    out: dict[str, Manifest] = {}
    for flavor in args.flavors:
        name = flavor.name
        spec: dict[str, Any] = {"nodeLabels": {NODE_GROUP_LABEL: name}}
        if flavor.aks_pool:
            spec["nodeLabels"][AKS_POOL_LABEL] = name
        if flavor.taints:
            spec["tolerations"] = [kube.taint_toleration(t) for t in flavor.taints]
        out[name] = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": _meta(name), "spec": spec}
    out[ANY_NODE] = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": _meta(ANY_NODE), "spec": {}}
    return out


def _quantity(value: Decimal, resource: str) -> str:
    return elastic.format_quantity(value, resource)


def _resource(name: str, line: Line) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "nominalQuota": _quantity(line.nominal, name)}
    if line.borrowing_limit is not None:
        out["borrowingLimit"] = _quantity(line.borrowing_limit, name)
    if line.lending_limit is not None:
        out["lendingLimit"] = _quantity(line.lending_limit, name)
    return out


def resource_groups(team: TeamQueue) -> list[dict[str, Any]]:
    """``spec.resourceGroups`` of the team's ClusterQueue.

    Kueue wants each resource in one group, and every flavor of a group to list the group's
    ``coveredResources`` in that order (webhook ``validateResourceGroups``; the CRD checks the
    count). Flavors that share a resource are joined into one group (MIG layouts with a common
    profile); a flavor lists 0 for a resource of its group it does not offer.
    """
    lines = team.lines
    gpu = [f for f in lines if f != ANY_NODE]
    groups: list[tuple[list[str], set[str]]] = []
    for flavor in gpu:
        res = set(lines[flavor])
        joined = [g for g in groups if g[1] & res]
        merged_flavors = [f for g in joined for f in g[0]] + [flavor]
        merged_res = res.union(*(g[1] for g in joined))
        groups = [g for g in groups if g not in joined] + [(merged_flavors, merged_res)]
    groups.sort(key=lambda g: gpu.index(g[0][0]))
    out = []
    for flavors, covered_set in groups:
        covered = sorted(covered_set)
        zero = Line(Decimal(0), None, None)
        out.append(
            {
                "coveredResources": covered,
                "flavors": [
                    {
                        "name": f,
                        "resources": [_resource(r, lines[f].get(r, zero)) for r in covered],
                    }
                    # Kueue tries flavors in order and stops where the workload fits, borrowing
                    # included (flavorFungibility whenCanBorrow: MayStopSearch): the team's own
                    # share first, then its order of preference.
                    for f in sorted(
                        flavors, key=lambda f: (not any(line.nominal for line in lines[f].values()), gpu.index(f))
                    )
                ],
            }
        )
    any_node = lines[ANY_NODE]
    out.append(
        {
            "coveredResources": list(any_node),
            "flavors": [{"name": ANY_NODE, "resources": [_resource(r, line) for r, line in any_node.items()]}],
        }
    )
    return out


def cluster_queue(args: QueuesArgs, team: TeamQueue) -> Manifest:
    """The team's ClusterQueue: its cohort, its namespace only, its resource groups."""
    p = args.queues.preemption
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": _meta(team.name),
        "spec": {
            "cohortName": team.cohort,
            # Only the team's own namespace, whatever LocalQueue someone might create elsewhere.
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {
                "reclaimWithinCohort": p.reclaim_within_cohort,
                "withinClusterQueue": p.within_cluster_queue,
                "borrowWithinCohort": {"policy": p.borrow_within_cohort},
            },
            "resourceGroups": resource_groups(team),
        },
    }


def local_queue_name(team: Team) -> str:
    """The team's LocalQueue: what ``kueue.x-k8s.io/queue-name`` names (= the namespace's team label)."""
    return team.name


def local_queue(team: TeamQueue) -> Manifest:
    """The team's LocalQueue in its namespace, feeding its ClusterQueue."""
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": _meta(team.name, team.namespace),
        "spec": {"clusterQueue": team.name},
    }


def priority_classes(queues: QueuesConfig) -> dict[str, Manifest]:
    """``queues.priorityClasses`` as Kueue WorkloadPriorityClasses, by name."""
    out: dict[str, Manifest] = {}
    for pc in queues.priority_classes:
        obj: Manifest = {
            "apiVersion": API,
            "kind": "WorkloadPriorityClass",
            "metadata": _meta(pc.name),
            "value": pc.value,
        }
        if pc.description:
            obj["description"] = pc.description
        out[pc.name] = obj
    return out


def kueue_configuration(args: QueuesArgs) -> dict[str, Any]:
    """Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2): the chart's own defaults
    (charts/kueue/values.yaml ``managerConfig``) with what the stack decides."""
    q = args.queues
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": q.namespace,
        "health": {"healthProbeBindAddress": ":8081"},
        # observability: ClusterQueue quota and usage per flavor and resource (borrowed and lent are
        # computed from them, components/observability/rules.py); off in Kueue's defaults.
        "metrics": {
            "bindAddress": ":8443",
            **({"enableClusterQueueResources": True} if args.cluster_queue_metrics else {}),
        },
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "manageJobsWithoutQueueName": q.manage_jobs_without_queue_name,
        # Kueue v0.19 turns waitForPodsReady on by default, with a 30-minute timeout
        # (apis/config/v1beta2/defaults.go; feature gate DisableWaitForPodsReady: "Temporary option
        # while WaitForPodsReady is enabled by default"). Written out with the stack's timeout: an
        # admitted workload whose pods do not all start in time (refused by the ResourceQuota for
        # CPU that pods outside the queue took, unschedulable, an image that never pulls) is evicted
        # and requeued, and the quota it held — borrowed GPUs included — goes back to the cohort.
        # blockAdmission stays false: one slow Job must not stop every other admission.
        "waitForPodsReady": {"timeout": f"{q.pods_ready_timeout_seconds}s", "blockAdmission": False},
        # Kueue manages jobs in team namespaces only: never an operator's own Jobs or pods.
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": resources.TEAM_LABEL, "operator": "Exists"}]},
        "integrations": {"frameworks": list(q.integrations)},
        **_resources(args),
    }


def _resources(args: QueuesArgs) -> dict[str, Any]:
    """Kueue's ``resources``, where a stack needs them.

    DRA model: each DeviceClass counts as the extended resource the ClusterQueues cover, so a claim
    draws on the same nominal quota as a device-plugin request (Kueue 0.19 ``deviceClassMappings``,
    KueueDRAIntegration beta, on by default). HAMi: memory and cores per slice count times the
    pod's slices, as HAMi's own quota counts them (``transformations``). Left out
    (``excludeResourcePrefixes``): what no team quota counts
    (:data:`components.model.elastic.UNACCOUNTED_PREFIXES`) and HAMi's task priority
    (components/model/hami.py).
    """
    out: dict[str, Any] = {"excludeResourcePrefixes": [*elastic.UNACCOUNTED_PREFIXES, *args.excluded_resource_prefixes]}
    if args.transformations:
        out["transformations"] = [dict(t) for t in args.transformations]
    if args.device_class_mappings:
        out["deviceClassMappings"] = [dict(m) for m in args.device_class_mappings]
    return {"resources": out}


#: The chart's selector labels of the manager pods (templates/_helpers.tpl ``kueue.selectorLabels``,
#: release ``kueue``).
MANAGER_LABELS: Final = {
    "app.kubernetes.io/name": "kueue",
    "app.kubernetes.io/instance": RELEASE,
    "control-plane": "controller-manager",
}


def high_availability(queues: QueuesConfig) -> dict[str, Any]:
    """``controllerManager`` values that keep Kueue's webhooks answering (chart v0.19.2 values.yaml).

    Kueue's pod webhook is ``failurePolicy: Fail`` on every team namespace (templates/webhook
    manifests.yaml, ``mpod.kb.io`` with ``pod`` among the frameworks), as are its Job webhooks:
    while no manager answers, no pod or Job can be created there, the verification Jobs and every
    team workload included. So ``queues.replicas`` (default 2) managers run, spread over nodes,
    with a PodDisruptionBudget keeping one through a drain. Leader election is on in the
    Configuration (``leaderElection.leaderElect``): one replica schedules, the others take over
    within the lease; every replica serves the webhooks (controller-runtime's webhook server does
    not need leader election, ``webhook.DefaultServer.NeedLeaderElection``).
    """
    replicas = queues.replicas
    values: dict[str, Any] = {"replicas": replicas}
    if replicas > 1:
        values["podDisruptionBudget"] = {"enabled": True, "minAvailable": 1}
        values["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(MANAGER_LABELS)},
            }
        ]
    return values


def helm_values(args: QueuesArgs) -> dict[str, Any]:
    """The kueue chart's values: the pinned manager image, its replicas, and the Configuration above."""
    v = args.versions
    return {
        "controllerManager": {
            **high_availability(args.queues),
            "manager": {"image": {"repository": v.kueue_image, "tag": v.kueue, "pullPolicy": "IfNotPresent"}},
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_configuration(args), sort_keys=False)},
    }


def namespace(queues: QueuesConfig) -> Manifest:
    """Kueue's namespace, Pod Security ``restricted``."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": queues.namespace,
            "labels": {**PART_OF, "pod-security.kubernetes.io/enforce": "restricted"},
        },
    }


def queue_objects(args: QueuesArgs) -> dict[str, Manifest]:
    """Every Kueue object by role (the suffix of its logical name)."""
    out: dict[str, Manifest] = {}
    for name, obj in resource_flavors(args).items():
        out[f"flavor-{name}"] = obj
    for name, obj in priority_classes(args.queues).items():
        out[f"priority-{name}"] = obj
    for team in args.teams:
        out[f"{team.name}-cluster-queue"] = cluster_queue(args, team)
        out[f"{team.name}-local-queue"] = local_queue(team)
    return out


class Queues(pulumi.ComponentResource):
    """Kueue and the team queues, in two steps around the team namespaces.

    The constructor registers what needs no team namespace: Kueue's namespace → Helm release (CRDs)
    → flavors and priority classes → ClusterQueues, and the admission guards that send GPU work
    through the queues (cluster-scoped; they select team namespaces by label and need neither a
    namespace nor Kueue's CRDs). ``guards`` are those policies and bindings: the team quotas, whose
    elastic ceilings let a team hold borrowed GPUs, and the RoleBindings wait for them
    (:class:`components.tenancy.teams.Teams` ``guards``), so no quota is raised while a GPU pod
    could still skip the queue. :meth:`local_queues` then puts each team's LocalQueue in its
    namespace, once that exists.
    """

    guards: list[pulumi.CustomResource]

    def __init__(self, name: str, args: QueuesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Queues", name, None, opts)
        self._name, self._args = name, args
        self._after = kube.depends_on(opts)
        q = args.queues
        ns = kube.apply(f"{name}-namespace", namespace(q), self._child())
        release = kube.helm_release(
            f"{name}-kueue",
            args.chart,
            release=RELEASE,
            namespace=q.namespace,
            values=helm_values(args),
            timeout=q.helm_timeout_seconds,
            opts=self._child(ns),
        )
        self._objects = queue_objects(args)
        shared: list[pulumi.Resource] = [
            kube.apply(f"{name}-{role}", obj, self._child(release))
            for role, obj in self._objects.items()
            if role.startswith(("flavor-", "priority-"))
        ]
        self._cluster_queues = {
            team.name: kube.apply(
                f"{name}-{team.name}-cluster-queue", self._objects[f"{team.name}-cluster-queue"], self._child(*shared)
            )
            for team in args.teams
        }
        self.guards = []
        admission = guard_objects(q)
        for role, manifest in admission.items():
            if role.endswith("-policy"):
                policy = kube.apply(f"{name}-{role}", manifest, self._child())
                binding_role = role.replace("-policy", "-binding")
                binding = kube.apply(f"{name}-{binding_role}", admission[binding_role], self._child(policy))
                self.guards += [policy, binding]

    def _child(self, *after: pulumi.Resource) -> pulumi.ResourceOptions:
        """A child's options: parented, after ``after`` and whatever this component's ``opts.depends_on`` names."""
        return kube.child(self, [*after, *self._after])

    def local_queues(self, team_namespaces: Mapping[str, pulumi.Resource]) -> None:
        """Each team's LocalQueue, after its ClusterQueue and its namespace (where ``team_namespaces`` has it)."""
        for team in self._args.teams:
            after = [
                self._cluster_queues[team.name],
                *([team_namespaces[team.name]] if team.name in team_namespaces else []),
            ]
            kube.apply(
                f"{self._name}-{team.name}-local-queue", self._objects[f"{team.name}-local-queue"], self._child(*after)
            )
        self.register_outputs({"clusterQueues": sorted(t.name for t in self._args.teams)})
