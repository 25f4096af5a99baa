"""OpenSM configuration delivery: ``partitions.conf`` + ``opensm.conf`` as a ConfigMap, and
optionally NVIDIA OpenSM itself in the cluster.

Most fabrics already run their subnet manager on a managed switch or under UFM; there the two
files are stack outputs (``partitionsConf``/``opensmConf``, written to ``plan/onprem/opensm/``) for
the fabric admins to install, and the ConfigMap is their in-cluster copy. With
``fabric.opensm.deployInCluster`` gpuaas runs the SM: a privileged, host-network Deployment pinned
to ``fabric.opensm.node`` (it needs the node's HCA and umad devices), ``Recreate`` so that one
rollout never briefly runs two SMs from the same node, and a config-hash annotation so a changed
partition plan restarts it (a restart re-reads the file; OpenSM also re-reads it on every heavy
sweep, e.g. after ``kill -HUP``). The image must carry NVIDIA's OpenSM: per-VF partitions need
``virt_enabled``, which upstream linux-rdma OpenSM does not have (:mod:`components.partitions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pulumi

from components import k8s as kube
from components import mig_guard
from components.config import StackConfig
from components.k8s import Manifest
from components.network_operator import tolerations
from components.partitions import opensm_conf, partitions_conf
from components.resources import PART_OF
from components.sriov_host import CONFIG_HASH_ANNOTATION, config_hash

CONFIG_MAP: Final = "gpuaas-opensm"
DEPLOYMENT: Final = "gpuaas-opensm"
CONF_DIR: Final = "/etc/opensm"


def config_map(cfg: StackConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": cfg.network.namespace, "labels": dict(PART_OF)},
        "data": {
            "partitions.conf": partitions_conf(cfg),
            "opensm.conf": opensm_conf(cfg, f"{CONF_DIR}/partitions.conf"),
        },
    }


def deployment(cfg: StackConfig) -> Manifest:
    """The in-cluster OpenSM (``fabric.opensm.deployInCluster``), pinned to ``fabric.opensm.node``."""
    onprem = cfg.onprem
    if onprem is None or onprem.fabric.opensm.node is None:
        raise ValueError("an in-cluster OpenSM needs platform.fabric.opensm.node")
    data = config_map(cfg)["data"]
    labels = {"app.kubernetes.io/name": DEPLOYMENT, **PART_OF}
    v = cfg.versions
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": cfg.network.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": DEPLOYMENT}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash(data["partitions.conf"], data["opensm.conf"])},
                },
                "spec": {
                    "hostNetwork": True,
                    "nodeSelector": {"kubernetes.io/hostname": onprem.fabric.opensm.node},
                    "tolerations": tolerations(cfg.network),
                    "containers": [
                        {
                            "name": "opensm",
                            "image": f"{v.opensm_image}:{v.opensm}",
                            "command": ["opensm", "--config", f"{CONF_DIR}/opensm.conf"],
                            "securityContext": {"privileged": True},
                            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
                            "volumeMounts": [{"name": "config", "mountPath": CONF_DIR, "readOnly": True}],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": CONFIG_MAP}}],
                },
            },
        },
    }


class OpenSm(pulumi.ComponentResource):
    """The OpenSM ConfigMap, and the SM Deployment when ``deployInCluster`` is set.

    ``partitions_conf``/``opensm_conf``: the rendered texts, exported by Platform.
    """

    partitions_conf: str
    opensm_conf: str

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        opts: pulumi.ResourceOptions | None = None,
        *,
        depends_on: Sequence[pulumi.Resource] = (),
        gate: pulumi.Output[bool] | None = None,
    ) -> None:
        super().__init__("gpuaas:index:OpenSm", name, None, opts)
        onprem = cfg.onprem
        if onprem is None:
            raise ValueError("OpenSM is configured by gpuaas on-prem only")
        cm = config_map(cfg)
        self.partitions_conf = cm["data"]["partitions.conf"]
        self.opensm_conf = cm["data"]["opensm.conf"]
        # ``gate``: the day-2 fabric guard (components/fabric_guard.py): moved partitions wait for it.
        self.config_map = kube.apply(
            f"{name}-config", {**cm, "data": mig_guard.gated(gate, cm["data"])}, kube.child(self, list(depends_on))
        )
        if onprem.fabric.opensm.deploy_in_cluster:
            sm = deployment(cfg)
            sm["spec"] = mig_guard.gated(gate, sm["spec"])
            kube.apply(f"{name}-deployment", sm, kube.child(self, [self.config_map, *depends_on]))
        self.register_outputs({"configMap": CONFIG_MAP, "inCluster": onprem.fabric.opensm.deploy_in_cluster})
