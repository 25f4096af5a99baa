"""Admission of HAMi pods in team namespaces (``gpuaas-team-hami``, built by :mod:`components.tenancy.policy`).

A pod that asks for a HAMi resource (``nvidia.com/vgpu*``, in any container list, requests or
limits) gets its limits from HAMi's scheduler (which books memory and cores per card and writes
the allocation into the pod's annotations) and from HAMi-core inside the container. Both can be
sidestepped from the pod spec, so such a pod is refused, each check with its own message, when:

1. it does not name HAMi's scheduler (``schedulerName: hami-scheduler``). HAMi's webhook sets it, and
   a ValidatingAdmissionPolicy runs after every mutating webhook, so this refuses exactly the pods
   HAMi's webhook did not see — while it is down (its ``failurePolicy`` is ``Ignore``) those pods,
   and only those, fail closed instead of falling to the default scheduler, which would place them
   without HAMi's booking;
2. it sets ``nodeName`` (no scheduler at all: HAMi's webhook refuses it too, when it runs);
3. it carries the ``hami.io/webhook`` label (``ignore`` makes HAMi's webhook skip it);
4. it carries a ``hami.io/`` annotation other than the scheduling policies users may set
   (:data:`components.model.hami.USER_ANNOTATIONS`): the others are HAMi's allocation bookkeeping,
   which a pod could forge until HAMi #3042 (after v2.10.0);
5. a container sets HAMi-core's switches or limits in its environment (``CUDA_DISABLE_CONTROL``,
   ``LD_PRELOAD``, ``CUDA_DEVICE_*``, ``CUDA_OVERSUBSCRIBE``, ``NVIDIA_VISIBLE_DEVICES``, or
   ``GPU_CORE_UTILIZATION_POLICY`` other than the cluster's core policy, which HAMi's webhook itself
   adds), or takes environment from a ConfigMap or Secret without a prefix that keeps every such
   name out (``envFrom``: CEL cannot read the keys, so the prefix must make them harmless);
6. it mounts a host path of HAMi's (HAMi-core, its per-container accounting, its locks:
   :data:`components.model.hami.HOST_PATHS`), a folder above one, or a path not written canonically
   (``//``, ``/./``, a trailing ``/``, relative) that could be either; a symlink on the host is
   outside what admission sees (Pod Security ``baseline`` refuses every host path anyway: this is
   for ``privileged`` teams);
7. a container is privileged (it sees every GPU of the node, outside HAMi's limits);
8. a container asks for slices without stating each slice's memory (``nvidia.com/vgpu-memory``): HAMi
   would give it the whole card's, which neither the quota controller nor Kueue can count;
9. a container asks for memory as a percentage (``nvidia.com/vgpu-memory-percentage``): quotas and
   queues count MiB.

HAMi's own enforcement stays in place beside this (its webhook refuses privileged GPU containers
and ``nodeName``; its quota, memory and cores): these checks hold when HAMi's webhook does not run.
CREATE only: a team member cannot update or patch a pod (components/tenancy/teams.py ``POD_VERBS``),
and HAMi's scheduler writes its annotations as its own service account afterwards.
"""

from __future__ import annotations

from typing import Final

from components.k8s import Manifest
from components.model import hami, resources
from components.tenancy import policy
from components.tenancy.policy import CONTAINER_LISTS

POLICY: Final = "gpuaas-team-hami"
_PREFIX: Final = "nvidia.com/vgpu"


def _lists(per_container: str) -> str:
    """CEL: ``per_container`` (over ``c``) holds for every container of every list."""
    return " && ".join(
        f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {per_container}))" for field in CONTAINER_LISTS
    )


def _any_resource(pred: str) -> str:
    """CEL: some container of some list has a request or limit ``r`` for which ``pred`` holds."""
    per = (
        "has(c.resources) && ((has(c.resources.requests) && c.resources.requests.exists(r, "
        f"{pred})) || (has(c.resources.limits) && c.resources.limits.exists(r, {pred})))"
    )
    return " || ".join(
        f"(has(object.spec.{field}) && object.spec.{field}.exists(c, {per}))" for field in CONTAINER_LISTS
    )


def _cel_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


WANTS_HAMI: Final = _any_resource(f"r.startsWith('{_PREFIX}')")


def env_ok(core_policy: str) -> str:
    """CEL over a container ``c``: no forbidden environment, no ``envFrom`` that could carry it."""
    names = _cel_list(hami.FORBIDDEN_ENV)
    (prefix,) = hami.FORBIDDEN_ENV_PREFIXES
    reachable = _cel_list([*hami.FORBIDDEN_ENV, prefix, hami.CORE_POLICY_ENV])
    env = (
        f"!has(c.env) || c.env.all(e, !(e.name in {names}) && !e.name.startsWith('{prefix}') && "
        f"(e.name != '{hami.CORE_POLICY_ENV}' || (has(e.value) && e.value == '{core_policy}')))"
    )
    env_from = (
        "!has(c.envFrom) || c.envFrom.all(f, has(f.prefix) && f.prefix != '' && "
        f"!{reachable}.exists(n, n.startsWith(f.prefix)) && !f.prefix.startsWith('{prefix}'))"
    )
    return f"({env}) && ({env_from})"


#: A canonical absolute path (the API already refuses ``..`` elements in a hostPath).
_CANONICAL: Final = (
    "p.startsWith('/') && !p.contains('//') && !p.contains('/./') && !p.endsWith('/.') && "
    "(p == '/' || !p.endsWith('/'))"
)


def _host_path_ok() -> str:
    """CEL over a host path ``p``: canonical, and neither one of HAMi's folders, in one, nor above one."""
    clear = " && ".join(
        f"p != '{f}' && !p.startsWith('{f}/') && !'{f}'.startsWith(p == '/' ? '/' : p + '/')" for f in hami.HOST_PATHS
    )
    return f"{_CANONICAL} && {clear}"


HOST_PATHS_OK: Final = (
    "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || "
    f"[v.hostPath.path].all(p, {_host_path_ok()}))"
)
NOT_PRIVILEGED: Final = _lists(
    "!has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged"
)
#: Containers and init containers only: an ephemeral container may not set resources (API validation).
MEMORY_STATED: Final = " && ".join(
    f"(!has(object.spec.{field}) || object.spec.{field}.all(c, !has(c.resources) || !has(c.resources.limits) || "
    f"!('{resources.HAMI_GPU}' in c.resources.limits) || '{resources.HAMI_MEMORY}' in c.resources.limits))"
    for field in ("containers", "initContainers")
)
_PERCENTAGE: Final = f"r == '{resources.HAMI_MEMORY_PERCENTAGE}'"
NO_PERCENTAGE: Final = f"!({_any_resource(_PERCENTAGE)})"
ANNOTATIONS_OK: Final = (
    "!has(object.metadata.annotations) || object.metadata.annotations.all(k, "
    f"!k.startsWith('{hami.ANNOTATION_PREFIX}') || k in {_cel_list(hami.USER_ANNOTATIONS)})"
)


def checks(core_policy: str) -> list[tuple[str, str, str]]:
    """``(name, CEL that must hold for a HAMi pod, message)``, in the module docstring's order."""
    users = ", ".join(hami.USER_ANNOTATIONS)
    return [
        (
            "scheduler",
            f"has(object.spec.schedulerName) && object.spec.schedulerName == '{hami.SCHEDULER_NAME}'",
            f"pods with HAMi resources ({_PREFIX}*) are scheduled by HAMi: set schedulerName {hami.SCHEDULER_NAME} "
            "(HAMi's webhook sets it; without it, a pod that reaches this check was not seen by HAMi)",
        ),
        (
            "node-name",
            "!has(object.spec.nodeName) || object.spec.nodeName == ''",
            "pods with HAMi resources may not set nodeName: HAMi's scheduler must place them",
        ),
        (
            "webhook-label",
            f"!has(object.metadata.labels) || !('{hami.WEBHOOK_IGNORE_LABEL}' in object.metadata.labels)",
            f"pods with HAMi resources may not carry the {hami.WEBHOOK_IGNORE_LABEL} label (it makes HAMi's "
            "webhook skip them)",
        ),
        (
            "annotations",
            ANNOTATIONS_OK,
            f"pods with HAMi resources may set no {hami.ANNOTATION_PREFIX}* annotation but {users}: the others "
            "are HAMi's own allocation records",
        ),
        (
            "environment",
            " && ".join(
                f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {env_ok(core_policy)}))"
                for field in CONTAINER_LISTS
            ),
            "containers of pods with HAMi resources may not set CUDA_DISABLE_CONTROL, LD_PRELOAD, CUDA_DEVICE_*, "
            f"CUDA_OVERSUBSCRIBE, NVIDIA_VISIBLE_DEVICES or {hami.CORE_POLICY_ENV} (other than {core_policy!r}), "
            "nor take envFrom without a prefix that keeps those names out: they switch off or rewrite HAMi-core's "
            "limits",
        ),
        (
            "host-paths",
            HOST_PATHS_OK,
            f"pods with HAMi resources may not mount HAMi's host folders ({', '.join(hami.HOST_PATHS)}), a folder "
            "above them, or a host path not written canonically",
        ),
        (
            "privileged",
            NOT_PRIVILEGED,
            "pods with HAMi resources may have no privileged container (it would see every GPU of the node)",
        ),
        (
            "memory-stated",
            MEMORY_STATED,
            f"a container asking for {resources.HAMI_GPU} states each slice's memory ({resources.HAMI_MEMORY}, MiB): "
            "quotas and queues count what it states",
        ),
        (
            "no-percentage",
            NO_PERCENTAGE,
            f"{resources.HAMI_MEMORY_PERCENTAGE} is not counted by quotas and queues: ask for "
            f"{resources.HAMI_MEMORY} in MiB",
        ),
    ]


def _var(check: str) -> str:
    """The CEL variable of a check (``node-name`` → ``nodeName``)."""
    head, *rest = check.split("-")
    return head + "".join(w.capitalize() for w in rest)


def hami_policy(core_policy: str) -> Manifest:
    """The policy: each check of :func:`checks` applies to pods that ask for a HAMi resource; ``core_policy`` is
    the cluster's (``hami.corePolicy``)."""
    return policy.policy(
        POLICY,
        namespaces=policy.team_namespaces(),
        rules=[policy.resource_rule("", "v1", ["CREATE"], ["pods"])],
        # The walks over containers are variables, as in the partition policy (the 1.34 type
        # checker misreads a container's resources inside a validation).
        variables=[{"name": "hami", "expression": WANTS_HAMI}]
        + [{"name": _var(name), "expression": expr} for name, expr, _msg in checks(core_policy)],
        validations=[
            {"expression": f"!variables.hami || variables.{_var(name)}", "message": msg, "reason": "Forbidden"}
            for name, _expr, msg in checks(core_policy)
        ],
    )


def hami_binding() -> Manifest:
    """Every team namespace: a team without HAMi quota has its HAMi pods refused by its quota as well."""
    return policy.binding(POLICY, policy.team_namespaces())


def hami_admission_objects(core_policy: str | None) -> dict[str, Manifest]:
    """The policy and its binding where HAMi runs (``core_policy``: the cluster's, ``hami.corePolicy``); nothing
    otherwise (``None``)."""
    if core_policy is None:
        return {}
    return {"hami-policy": hami_policy(core_policy), "hami-binding": hami_binding()}
