"""The pods and Jobs every proof shares: names, labels, affinity, the team network, the security context."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from components.k8s import Manifest
from components.model.resources import AKS_POOL_LABEL
from components.proofs.targets import POOL_NAMESPACE, SECONDARY_IFNAME, Target
from components.queueing.admission import QUEUE_LABEL

#: Where the scripts ConfigMap is mounted.
SCRIPTS_DIR: Final = "/opt/gpuaas"
#: Seconds a proof may take end to end (image pull and the three NCCL runs included).
DEADLINE_SECONDS: Final = 1800
MULTUS_NETWORKS: Final = "k8s.v1.cni.cncf.io/networks"
SKIP_AWAIT: Final = "pulumi.com/skipAwait"


def bounded(name: str, limit: int = 63) -> str:
    """``name`` as a DNS label / label value of at most ``limit`` characters, shortened with a hash."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def object_name(t: Target, role: str) -> str:
    return f"{t.prefix}-{role}"


def proof_labels(t: Target, role: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "gpuaas-verify",
        "app.kubernetes.io/part-of": "gpuaas",
        "app.kubernetes.io/component": role,
        "gpuaas.io/verify-target": t.key,
    }


def object_meta(t: Target, role: str, name: str | None = None) -> dict[str, Any]:
    return {"name": name or object_name(t, role), "namespace": t.namespace, "labels": proof_labels(t, role)}


def pool_namespace() -> Manifest:
    """The namespace of the per-pool proofs, at Pod Security ``baseline`` like team namespaces."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": POOL_NAMESPACE,
            "labels": {
                "app.kubernetes.io/part-of": "gpuaas",
                "pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/warn": "baseline",
            },
        },
    }


def affinity(t: Target, role: str, avoid: str) -> dict[str, Any]:
    """Pods of one pair on two nodes (required); away from the other proof's pods (preferred), so that
    ib_write_bw and NCCL do not share an HCA while they measure it."""
    term: dict[str, Any] = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {
            "matchLabels": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": role},
        },
    }
    other = {
        "weight": 100,
        "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"gpuaas.io/verify-target": t.key, "gpuaas.io/verify-pair": avoid}},
        },
    }
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term],
            "preferredDuringSchedulingIgnoredDuringExecution": [other],
        }
    }
    if t.pool is not None:
        affinity["nodeAffinity"] = node_affinity(AKS_POOL_LABEL, t.pool)
    return affinity


def node_affinity(label: str, value: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def security_context() -> dict[str, Any]:
    """Within Pod Security baseline: nothing added, nothing privileged, escalation off."""
    return {"privileged": False, "allowPrivilegeEscalation": False}


def network_annotation(t: Target) -> dict[str, str]:
    """The Multus annotation that attaches the target's partition network as ``net1``; ``{}`` without one.

    Every proof pod (positive, negative probe, burn-in) takes its network from here and nowhere else,
    so a change of how pods ask for the team network (IPAM, ``ips``) is made once.
    """
    if t.network is None:
        return {}
    nets = [{"name": t.network, "namespace": t.namespace, "interface": SECONDARY_IFNAME}]
    return {MULTUS_NETWORKS: json.dumps(nets, separators=(",", ":"))}


def pod_annotations(t: Target, digest: str) -> dict[str, str]:
    return {"gpuaas.io/scripts-sha256": digest, **network_annotation(t)}


def pod_spec(
    t: Target,
    *,
    pair: str,
    avoid: str,
    image: str,
    script: str,
    env: list[dict[str, str]],
    resources: dict[str, str],
    cpu: str,
    memory: str,
    subdomain: str | None = None,
) -> dict[str, Any]:
    common_env = [{"name": "VF_ENV", "value": t.vf_env}] if t.vf_env else []
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "affinity": affinity(t, pair, avoid),
        "containers": [
            {
                "name": pair,
                "image": image,
                "command": ["/bin/bash", f"{SCRIPTS_DIR}/{script}"],
                "env": common_env + env,
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory, **resources},
                    "limits": {"cpu": cpu, "memory": memory, **resources},
                },
                "securityContext": security_context(),
                "volumeMounts": [
                    {"name": "scripts", "mountPath": SCRIPTS_DIR, "readOnly": True},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "scripts", "configMap": {"name": object_name(t, "scripts"), "defaultMode": 0o555}},
            # NCCL keeps its proxy buffers in /dev/shm; the runtime's 64 MiB default is too small.
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        ],
    }
    if t.tolerations:
        spec["tolerations"] = [dict(x) for x in t.tolerations]
    if subdomain is not None:
        spec["subdomain"] = subdomain
    return spec


def job(t: Target, role: str, pod: dict[str, Any], pair: str, digest: str, indexed: int | None = None) -> Manifest:
    labels = {**proof_labels(t, role), "gpuaas.io/verify-pair": pair}
    spec: dict[str, Any] = {
        # A retried rank would wait for a partner that is gone: one attempt, then read the logs.
        "backoffLimit": 0,
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "template": {"metadata": {"labels": labels, "annotations": pod_annotations(t, digest)}, "spec": pod},
    }
    if indexed is not None:
        spec |= {"completionMode": "Indexed", "completions": indexed, "parallelism": indexed}
    meta = object_meta(t, role)
    meta["annotations"] = {SKIP_AWAIT: "true"}
    meta["labels"] |= queue_label(t)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def queue_label(t: Target) -> dict[str, str]:
    """Elastic quotas: the team's queue, which Kueue admits the Job through (components/queueing/admission.py)."""
    return {QUEUE_LABEL: t.queue} if t.queue is not None else {}
