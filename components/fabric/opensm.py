"""OpenSM configuration delivery: ``partitions.conf`` + ``opensm.conf`` as ConfigMaps, and
optionally NVIDIA OpenSM itself in the cluster.

Most fabrics already run their subnet manager on a managed switch or under UFM; there the two
files are stack outputs (``partitionsConf``/``opensmConf``, written to ``plan/onprem/opensm/``) for
the fabric admins to install, and the ConfigMaps are their in-cluster copy. partitions.conf grows
with nodes x HCAs x partitions (4.8 MB at 4000 nodes x 8 HCAs x 6 teams), past the 1 MiB a
ConfigMap may hold, so it is cut at line ends into parts of at most :data:`MAX_PART_BYTES`
(``gpuaas-opensm-partitions-<i>``), listed in order with the whole file's SHA-256 in
``gpuaas-opensm``: plain text, readable with ``kubectl``, and any fleet size fits. Compression
(gzip in ``binaryData``) was the alternative: 10x smaller, but still bounded (about 8000 nodes)
and unreadable without tools. With
``fabric.opensm.deployInCluster`` gpuaas runs the SM: a privileged, host-network Deployment pinned
to ``fabric.opensm.node`` (it needs the node's HCA and umad devices), ``Recreate`` so that one
rollout never briefly runs two SMs from the same node, and a config-hash annotation so a changed
partition plan restarts it (a restart re-reads the file; OpenSM also re-reads it on every heavy
sweep, e.g. after ``kill -HUP``). The image must carry NVIDIA's OpenSM: per-VF partitions need
``virt_enabled``, which upstream linux-rdma OpenSM does not have (:mod:`components.fabric.partitions`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import pulumi

from components import k8s as kube
from components.fabric.guid_plan import CONFIG_HASH_ANNOTATION, config_hash, fleet
from components.fabric.partitions import fabric_partitions_conf, fleet_partitions, opensm_conf, partitions_conf, sm_conf
from components.guards.gate import gated
from components.k8s import Manifest, tolerations
from components.model.config import StackConfig
from components.model.fabric import Fabric
from components.model.guids import MAX_PLAN_BYTES
from components.model.network import Network
from components.model.platform import Node, NodeGroup
from components.model.resources import PART_OF
from components.model.teams import OnPremPartition
from components.model.versions import Versions

CONFIG_MAP: Final = "gpuaas-opensm"
DEPLOYMENT: Final = "gpuaas-opensm"
CONF_DIR: Final = "/etc/opensm"
#: partitions.conf is cut into ConfigMaps ``gpuaas-opensm-partitions-<i>`` (key ``partitions.conf``):
#: at 1000 nodes x 8 HCAs x 6 teams it is 1.2 MB, over the API server's 1 MiB ConfigMap limit
#: (:mod:`components.plan.api_limits`), and it grows with nodes x HCAs x partitions.
PARTS_PREFIX: Final = "gpuaas-opensm-partitions"
PART_KEY: Final = "partitions.conf"
#: Keys of the main ConfigMap naming the parts in order, and the SHA-256 of the whole file.
INDEX_KEY: Final = "partitions.conf.parts"
SHA256_KEY: Final = "partitions.conf.sha256"
#: Bytes of partitions.conf per part: below 1 MiB with room for metadata (as the GUID plan shards).
MAX_PART_BYTES: Final = MAX_PLAN_BYTES
PARTS_DIR: Final = "/etc/gpuaas/opensm-parts"
SOURCE_DIR: Final = "/etc/gpuaas/opensm"

#: The in-cluster SM's init container: partitions.conf reassembled from its parts, in order, and
#: refused unless it is byte-identical to what gpuaas rendered (a part of another revision would
#: splice two files; a half file is a parse error, and OpenSM then drops all partitions).
ASSEMBLE: Final = r"""set -euo pipefail
cp "$SOURCE/opensm.conf" "$CONF/opensm.conf"
cat "$PARTS"/* > "$CONF/partitions.conf.tmp"
echo "$(cat "$SOURCE/partitions.conf.sha256")  $CONF/partitions.conf.tmp" | sha256sum -c --quiet -
mv "$CONF/partitions.conf.tmp" "$CONF/partitions.conf"
echo "partitions.conf: $(wc -c < "$CONF/partitions.conf") bytes from $(ls "$PARTS" | wc -l) parts"
"""


def split_lines(text: str, budget: int = MAX_PART_BYTES) -> list[str]:
    """``text`` cut at line ends into pieces of at most ``budget`` bytes, in order.

    Concatenated they give ``text`` back; no line is split (partitions.conf lines are below
    4000 bytes, :data:`components.fabric.partitions.MAX_LINE`).
    """
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        n = len(line.encode())
        if n > budget:
            raise ValueError(f"a line of {n} bytes does not fit a part of {budget}")
        if current and size + n > budget:
            parts.append("".join(current))
            current, size = [], 0
        current.append(line)
        size += n
    if current or not parts:
        parts.append("".join(current))
    return parts


def part_name(index: int) -> str:
    return f"{PARTS_PREFIX}-{index}"


def config_maps(cfg: StackConfig) -> list[Manifest]:
    """``gpuaas-opensm`` (opensm.conf, the parts' names, the file's SHA-256), then every part.

    Readers reassemble partitions.conf as ``cat`` of the parts in the listed order (README,
    "OpenSM"); the in-cluster SM does it in :data:`ASSEMBLE`.
    """
    return text_config_maps(
        cfg.network.namespace, partitions_conf(cfg), opensm_conf(cfg, f"{CONF_DIR}/partitions.conf")
    )


def text_config_maps(namespace: str, text: str, conf: str) -> list[Manifest]:
    """:func:`config_maps` of a rendered partitions.conf ``text`` and opensm.conf ``conf``, in ``namespace``."""
    parts = split_lines(text)
    meta = {"namespace": namespace, "labels": dict(PART_OF)}
    main: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, **meta},
        "data": {
            "opensm.conf": conf,
            INDEX_KEY: "".join(f"{part_name(i)}\n" for i in range(len(parts))),
            SHA256_KEY: hashlib.sha256(text.encode()).hexdigest(),
        },
    }
    return [
        main,
        *(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": part_name(i), **meta}, "data": {PART_KEY: p}}
            for i, p in enumerate(parts)
        ),
    ]


def config_map(cfg: StackConfig) -> Manifest:
    """The main ``gpuaas-opensm`` ConfigMap (:func:`config_maps`' first)."""
    return config_maps(cfg)[0]


def deployment(cfg: StackConfig) -> Manifest:
    """The in-cluster OpenSM (``fabric.opensm.deployInCluster``), pinned to ``fabric.opensm.node``."""
    onprem = cfg.onprem
    if onprem is None or onprem.fabric.opensm.node is None:
        raise ValueError("an in-cluster OpenSM needs platform.fabric.opensm.node")
    return sm_deployment(config_maps(cfg), onprem.fabric.opensm.node, cfg.network, cfg.versions)


def sm_deployment(maps: Sequence[Manifest], node: str, network: Network, versions: Versions) -> Manifest:
    """:func:`deployment` of the ConfigMaps :func:`text_config_maps` made, on ``node``."""
    conf = maps[0]["data"]["opensm.conf"]
    text = "".join(m["data"][PART_KEY] for m in maps[1:])
    labels = {"app.kubernetes.io/name": DEPLOYMENT, **PART_OF}
    v = versions
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": network.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": DEPLOYMENT}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash(text, conf)},
                },
                "spec": {
                    "hostNetwork": True,
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": tolerations(network),
                    "initContainers": [
                        {
                            "name": "assemble-partitions",
                            "image": f"{v.node_tools_image}:{v.node_tools}",
                            "command": ["/bin/bash", "-c", ASSEMBLE],
                            "env": [
                                {"name": "SOURCE", "value": SOURCE_DIR},
                                {"name": "PARTS", "value": PARTS_DIR},
                                {"name": "CONF", "value": CONF_DIR},
                            ],
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                            "volumeMounts": [
                                {"name": "source", "mountPath": SOURCE_DIR, "readOnly": True},
                                {"name": "parts", "mountPath": PARTS_DIR, "readOnly": True},
                                {"name": "config", "mountPath": CONF_DIR},
                            ],
                        }
                    ],
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
                    "volumes": [
                        {"name": "source", "configMap": {"name": CONFIG_MAP}},
                        {
                            # One file per part, named by its index so that ``cat *`` keeps the order.
                            "name": "parts",
                            "projected": {
                                "sources": [
                                    {
                                        "configMap": {
                                            "name": m["metadata"]["name"],
                                            "items": [{"key": PART_KEY, "path": f"{i:04d}"}],
                                        }
                                    }
                                    for i, m in enumerate(maps[1:])
                                ]
                            },
                        },
                        {"name": "config", "emptyDir": {}},
                    ],
                },
            },
        },
    }


@dataclass(frozen=True, kw_only=True)
class OpenSmArgs:
    """Arguments of :class:`OpenSm`.

    Ordering: ``opts.depends_on`` should hold the namespace the ConfigMaps go to (the Network
    Operator's); it is forwarded to every child.
    """

    node_groups: tuple[NodeGroup, ...] = ()
    """The node groups (``platform.nodeGroups``): each one's HCAs fix its nodes' VF GUIDs, the partitions' members."""
    nodes: tuple[Node, ...] = ()
    """The nodes whose VFs join the team partitions (``platform.nodes``), with their GUID-scheme ids."""
    fabric: Fabric = field(default_factory=Fabric)
    """The GUID scheme, the infrastructure partition and the subnet manager's settings (``platform.fabric``;
    ``opensm.deployInCluster`` runs the SM on ``opensm.node``)."""
    partitions: Mapping[str, OnPremPartition] = field(default_factory=dict)
    """The team partitions by team name, one partition each in partitions.conf. None: the Default
    partition (and the infrastructure one) only."""
    network: Network = field(default_factory=Network)
    """The namespace of the ConfigMaps and the in-cluster SM, and the tolerations it runs with (``gpuaas:network``)."""
    versions: Versions = field(default_factory=Versions)
    """The OpenSM and node tools images of the in-cluster SM."""
    gate: pulumi.Output[bool] | None = None
    """The day-2 guards (:mod:`components.guards`; the fabric guard): moved partitions wait for them.
    ``None``: no guard."""


class OpenSm(pulumi.ComponentResource):
    """The OpenSM ConfigMaps, and the SM Deployment when ``fabric.opensm.deployInCluster`` is set.

    ``partitions_conf``/``opensm_conf``: the rendered texts, exported by Platform. ``opts.depends_on``
    (the namespace) reaches every child.
    """

    partitions_conf: str
    opensm_conf: str
    parts: list[pulumi.CustomResource]

    def __init__(self, name: str, args: OpenSmArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:OpenSm", name, None, opts)
        after, gate, sm = kube.depends_on(opts), args.gate, args.fabric.opensm
        text = fabric_partitions_conf(
            args.fabric, fleet_partitions(fleet(args.node_groups, args.nodes, args.fabric), args.partitions.items())
        )
        main, *parts = text_config_maps(args.network.namespace, text, sm_conf(sm, f"{CONF_DIR}/partitions.conf"))
        self.partitions_conf = "".join(p["data"][PART_KEY] for p in parts)
        # The plain file for fabric admins (stack output, plan/onprem/opensm/) names /etc/opensm.
        self.opensm_conf = main["data"]["opensm.conf"]
        # ``gate``: the day-2 fabric guard (components/guards/fabric.py): moved partitions wait for it.
        # Parts first, the index naming them last: a reader never finds a name without its part.
        self.parts = [
            kube.apply(
                f"{name}-{p['metadata']['name']}", {**p, "data": gated(gate, p["data"])}, kube.child(self, after)
            )
            for p in parts
        ]
        self.config_map = kube.apply(
            f"{name}-config", {**main, "data": gated(gate, main["data"])}, kube.child(self, [*self.parts, *after])
        )
        if sm.deploy_in_cluster:
            if sm.node is None:
                raise ValueError("an in-cluster OpenSM (fabric.opensm.deploy_in_cluster) needs fabric.opensm.node")
            deployment = sm_deployment([main, *parts], sm.node, args.network, args.versions)
            deployment["spec"] = gated(gate, deployment["spec"])
            kube.apply(f"{name}-deployment", deployment, kube.child(self, [self.config_map, *after]))
        self.register_outputs({"configMap": CONFIG_MAP, "inCluster": sm.deploy_in_cluster})
