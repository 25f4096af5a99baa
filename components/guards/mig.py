"""Day-2 guard: a MIG layout change needs an explicit acknowledgement in config.

Changing ``nvidia.com/mig.config`` on a node makes MIG Manager stop every GPU client there,
reset the GPUs and re-partition them (GPU Operator docs, "GPU Operator with MIG"): the node's
GPU pods are evicted mid-run. So a layout edit in stack config must say it means it:

* the stack exports ``migLayouts`` (node group or GPU pool → mig-parted config name) and, on-prem,
  ``migNodeLayouts`` (node → config name: moving a node to another group relabels it too);
* the next run reads its own last outputs (a ``StackReference`` to itself, see
  :mod:`components.platform`) and compares. A group whose layout differs, without
  ``mig.reconfigure: true``, fails the run before any resource changes — the message names the
  config key, both layouts, the nodes and how to cordon and drain them;
* a group that still says ``reconfigure: true`` although its layout did not change gets a warning,
  because the flag would let the next, unreviewed, change through.

A group (or node) that goes from a MIG layout straight to HAMi stops the run whatever it
acknowledges: a HAMi node turns MIG Manager off (``nvidia.com/gpu.deploy.mig-manager=false``), so
no one would ever take its GPUs out of MIG mode, and HAMi's device plugin does not share MIG GPUs
(HAMi #2564). The way is two runs: ``mig: {layout: all-disabled, reconfigure: true}``, then ``hami``.

New groups and the first run of a stack have nothing to compare with and pass. :func:`check` is
pure; :func:`enforce` and :func:`gated` are the shell that puts it in front of the node labels.
"""

from __future__ import annotations

from collections.abc import Mapping

from components.guards.gate import stop_on, string_map
from components.model.capacity import layout_name, mig_counts, sharing_groups
from components.model.catalog import GPU_MODELS
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.mig import LayoutError, parse_layout
from components.model.resources import AKS_POOL_LABEL, NODE_GROUP_LABEL
from components.model.sharing import GpuSharing

#: The stack output holding each group's applied layout: what the next run compares against.
OUTPUT: str = "migLayouts"
#: The same per on-prem node: a node moved into another group changes layout with no group change.
NODE_OUTPUT: str = "migNodeLayouts"


def mig_layouts(cfg: StackConfig) -> dict[str, str]:
    """Node group (on-prem) or GPU pool (AKS) → the mig-parted config its nodes are labelled with."""
    return {name: layout_name(sharing) for _where, name, sharing, _model in sharing_groups(cfg)}


def node_layouts(cfg: StackConfig) -> dict[str, str]:
    """On-prem node → the mig-parted config it is labelled with (``{}`` on AKS)."""
    onprem = cfg.onprem
    if onprem is None:
        return {}
    groups = onprem.groups_by_name
    return {n.name: layout_name(groups[n.node_group]) for n in sorted(onprem.nodes, key=lambda n: n.name)}


def _nodes(cfg: StackConfig, group: str) -> list[str]:
    onprem = cfg.onprem
    if onprem is None:
        return []
    return sorted(n.name for n in onprem.nodes if n.node_group == group)


def how_to_drain(cfg: StackConfig, group: str) -> str:
    nodes = _nodes(cfg, group)
    if nodes:
        shown = " ".join(nodes[:5]) + (f" … ({len(nodes)} nodes)" if len(nodes) > 5 else "")
        selector = f"-l {NODE_GROUP_LABEL}={group}"
        return (
            f"Its nodes ({shown}) lose every GPU pod. First `kubectl cordon {selector}` and "
            f"`kubectl drain {selector} --ignore-daemonsets --delete-emptydir-data`"
        )
    selector = f"-l {AKS_POOL_LABEL}={group}"
    return (
        f"Every node of pool {group} loses its GPU pods. First `kubectl cordon {selector}` and "
        f"`kubectl drain {selector} --ignore-daemonsets --delete-emptydir-data`"
    )


def check(
    cfg: StackConfig, previous: Mapping[str, str] | None, previous_nodes: Mapping[str, str] | None = None
) -> tuple[list[Issue], list[str]]:
    """(issues that stop the run, warnings) for ``cfg`` against the layouts of the last run.

    ``previous``: the last run's :data:`OUTPUT` (group → layout); ``previous_nodes``: its
    :data:`NODE_OUTPUT` (on-prem node → layout), which catches a node moved into a group with
    another layout. ``None`` or empty on a stack's first run.
    """
    issues: list[Issue] = []
    warnings: list[str] = []
    before = previous or {}
    moved = moved_nodes(cfg, before, previous_nodes or {})
    for where, name, sharing, model in sharing_groups(cfg):
        key = f"gpuaas:{where}.mig"
        now = layout_name(sharing)
        was = before.get(name)
        if was is not None and _to_hami(was, sharing, model):
            issues.append(Issue(f"gpuaas:{where}.hami", _hami_first_disable_mig(cfg, name, was, key)))
        elif was is not None and not same_layout(was, sharing, model):
            if not _acknowledged(sharing):
                issues.append(
                    Issue(
                        key,
                        f"changes {name} from MIG layout {was!r} to {now!r}, which re-partitions its GPUs. "
                        f"{how_to_drain(cfg, name)}, then set {key}.reconfigure: true for this run "
                        "(and back to false after)",
                    )
                )
        elif _acknowledged(sharing) and was is not None and not any(g == name for _i, _n, g, _w in moved):
            warnings.append(
                f"{key}.reconfigure is true but {name} keeps layout {now!r}; set it back to false so the next "
                "layout change is reviewed"
            )
    onprem = cfg.onprem
    if onprem is not None:
        index = {g.name: i for i, g in enumerate(onprem.node_groups)}
        for i, node, group, was in moved:
            target = onprem.groups_by_name[group]
            if _to_hami(was, target, target.gpu_model):
                issues.append(
                    Issue(
                        f"gpuaas:platform.nodes[{i}].nodeGroup",
                        f"moves {node} from MIG layout {was!r} into HAMi group {group}: HAMi turns MIG Manager off, so "
                        "its GPUs would stay in MIG mode. First move it to a group with mig.layout all-disabled "
                        "(reconfigure: true) for one run, then into the HAMi group",
                    )
                )
                continue
            if _acknowledged(target):
                continue
            now = layout_name(onprem.groups_by_name[group])
            issues.append(
                Issue(
                    f"gpuaas:platform.nodes[{i}].nodeGroup",
                    f"moves {node} into {group}, which changes its MIG layout from {was!r} to {now!r} and "
                    f"evicts its GPU pods. First `kubectl cordon {node}` and `kubectl drain {node} "
                    "--ignore-daemonsets --delete-emptydir-data`, then set "
                    f"gpuaas:platform.nodeGroups[{index[group]}].mig.reconfigure: true for this run (and back to "
                    "false after)",
                )
            )
    return sorted(issues), warnings


def moved_nodes(
    cfg: StackConfig, before: Mapping[str, str], before_nodes: Mapping[str, str]
) -> list[tuple[int, str, str, str]]:
    """``(index, node, new group, old layout)`` of nodes whose layout changes by a group move.

    A node whose old layout is its group's old layout changes with its group, which the group's
    own issue covers.
    """
    onprem = cfg.onprem
    if onprem is None:
        return []
    out = []
    for i, node in enumerate(onprem.nodes):
        group = onprem.groups_by_name.get(node.node_group)
        was = before_nodes.get(node.name)
        if group is None or was is None or same_layout(was, group, group.gpu_model) or before.get(group.name) == was:
            continue
        out.append((i, node.name, group.name, was))
    return out


def same_layout(was: str, sharing: GpuSharing, model: str) -> bool:
    """Whether the last run's layout ``was`` (a mig-parted config name) cuts the GPUs as ``sharing`` does.

    Compared by meaning, not spelling: ``layout: 1x4g.40gb-3x1g.10gb``, ``profiles: {1g.10gb: 3,
    4g.40gb: 1}`` and (on an H100) ``all-1g.10gb`` / ``7x1g.10gb`` are each one geometry. The node
    label then changes its name only; MIG Manager asserts the geometry is already applied and
    re-partitions nothing (mig-parted deployments/gpu-operator/reconfigure-mig.sh: ``nvidia-mig-parted
    assert`` before any reset), so no GPU pod is evicted. A name this gpuaas cannot read (another
    model's profile, an older spelling) is compared as text.
    """
    if was == layout_name(sharing):
        return True
    gpu = GPU_MODELS.get(model)
    if gpu is None:
        return False
    try:
        before = parse_layout(was, gpu)
    except LayoutError:
        return False
    now = mig_counts(sharing, model)
    return _dotted(before) == _dotted(now)


def _dotted(counts: Mapping[str, int]) -> dict[str, int]:
    """Profile counts with ``+`` written ``.`` (how layout names spell ``1g.10gb+me``)."""
    return {p.replace("+", "."): n for p, n in counts.items() if n}


def _to_hami(was: str, sharing: GpuSharing, model: str) -> bool:
    """A HAMi group whose GPUs the last run left in a MIG layout."""
    return sharing.hami is not None and not same_layout(was, GpuSharing(), model)


def _hami_first_disable_mig(cfg: StackConfig, group: str, was: str, key: str) -> str:
    return (
        f"turns {group} from MIG layout {was!r} straight to HAMi: HAMi turns MIG Manager off on its nodes "
        "(nvidia.com/gpu.deploy.mig-manager=false), so their GPUs would stay in MIG mode, which HAMi's device "
        f"plugin does not share. Two runs: first remove hami and set {key}.layout: all-disabled with "
        f"{key}.reconfigure: true, and run it. {how_to_drain(cfg, group)} first. Then add hami"
    )


def _acknowledged(sharing: GpuSharing) -> bool:
    return sharing.mig.reconfigure


def enforce(cfg: StackConfig, previous: object, previous_nodes: object = None) -> bool:
    """The shell around :func:`check`, run inside an ``apply`` on the last run's outputs.

    Raises ``pulumi.RunError`` with the config-error text (no traceback, like a bad config) so
    the resources whose inputs wait on it are never sent; logs the warnings. ``True`` otherwise.
    """
    return stop_on([check(cfg, *last_maps(previous, previous_nodes))])


def last_maps(previous: object, previous_nodes: object) -> tuple[Mapping[str, str] | None, ...]:
    """This guard's last outputs, each a map of layouts or ``None``."""
    return tuple(string_map(name, value) for name, value in ((OUTPUT, previous), (NODE_OUTPUT, previous_nodes)))
