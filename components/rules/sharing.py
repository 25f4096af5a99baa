"""Rules of GPU sharing: MIG layouts that fit the GPU, one layout per config name, no MIG with time-slicing."""

from __future__ import annotations

from collections.abc import Iterator

from components.model.capacity import DEVICE_PLUGIN_DEFAULT_CONFIG, layout_name, mig_counts, sharing_groups
from components.model.catalog import GPU_MODELS
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.mig import LayoutError, check_layout
from components.rules.common import config_key


def check(cfg: StackConfig) -> Iterator[Issue]:
    """Every GPU sharing problem: layouts, config names, time-slicing with MIG, the MIG strategy."""
    seen_layouts: dict[str, tuple[str, str, dict[str, int]]] = {}
    for where, name, sharing, model in sharing_groups(cfg):
        if name == DEVICE_PLUGIN_DEFAULT_CONFIG and sharing.time_slicing is not None:
            yield Issue(
                config_key(where, "name"),
                f"{name!r} is the device-plugin config of unlabelled nodes, so it cannot be time-sliced; "
                "rename the group",
            )
        gpu = GPU_MODELS.get(model)
        if gpu is None:
            continue  # reported by the model (on-prem) or the SKU rule (AKS)
        key = "layout" if sharing.mig.layout is not None else "profiles"
        try:
            counts = mig_counts(sharing, model)
            check_layout(counts, gpu)
        except LayoutError as e:
            value = sharing.mig.layout if key == "layout" else sharing.mig.profiles
            yield Issue(config_key(where, "mig", key), f"{value!r}: {e}")
            continue
        label = layout_name(sharing)
        if len(label) > 63:
            yield Issue(
                config_key(where, "mig", key),
                f"{label!r} is {len(label)} characters; the nvidia.com/mig.config label value allows 63: "
                "use fewer distinct profiles",
            )
        # One mig-parted config name holds one layout (devices: all), so a name such as
        # all-balanced may not mean different profiles on two GPU models.
        first = seen_layouts.setdefault(label, (where, model, counts))
        if first[2] != counts:
            yield Issue(
                config_key(where, "mig", key),
                f"{label!r} is {counts} on {model} but {first[2]} on {first[1]} ({first[0]}); one MIG config "
                "name is one layout: write mig.profiles for one of the groups",
            )
        if counts and sharing.time_slicing is not None:
            yield Issue(
                config_key(where, "timeSlicing"),
                "time-slicing and a MIG layout on one node group are not supported; "
                "use a separate node group for time-sliced GPUs",
            )
        if counts and cfg.gpu_operator.mig_strategy == "single" and len(counts) > 1:
            yield Issue(
                config_key(where, "mig", key),
                f"{layout_name(sharing)!r} mixes profiles; gpuOperator.migStrategy single allows one profile "
                "per node (set gpuaas:gpuOperator.migStrategy: mixed)",
            )
