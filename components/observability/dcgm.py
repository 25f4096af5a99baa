"""dcgm-exporter's series under names that survive its renames, per device where a pod must not matter.

**Either name, one unit.** dcgm-exporter 4.9.0 renamed the fields DCGM 4.7 deprecates and changed
units (percent → 0-1 ratio, MiB → bytes; NVIDIA/dcgm-exporter release 4.9.0), and 4.10.0 renamed the
PCIe and NVLink profiling fields (release 4.10.0). Every rule, alert and panel reads the
``gpuaas:dcgm:*`` and ``gpuaas:gpu_device:*`` series recorded here, each from the new name *or* the
old one converted to the new name's unit, so an exporter upgrade (or a fleet half upgraded) leaves
the showback and the alerts as they were. :data:`RENAMES` lists each pair with its source and
whether that source is NVIDIA's own.

**Per device, not per pod.** dcgm-exporter puts the pod holding a GPU on every series of that GPU
(``internal/pkg/transformation/kubernetes.go``): when the pod ends, a counter continues on a new
series without ``pod``, where ``increase`` starts again at 0 and an error that ended the pod is
lost. The error counters and states are therefore recorded by ``node, gpu, UUID`` first
(:data:`DEVICE`), and the pod that held the GPU is joined back from :data:`HOLDER`.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from components.model.config import StackConfig
from components.model.observability import duration_seconds
from components.observability.promql import Group, Recording

#: One physical GPU.
DEVICE: Final = "node, gpu, UUID"
#: One series of a GPU or MIG instance, with the pod and DRA claim dcgm-exporter attributes it to.
ENTITY: Final = "node, gpu, UUID, modelName, GPU_I_ID, GPU_I_PROFILE, namespace, pod, container, dra_claim_namespace"

GPU_UTIL: Final = "gpuaas:dcgm:gpu_utilization:ratio"
GR_ENGINE: Final = "gpuaas:dcgm:gr_engine_active:ratio"
FB_USED: Final = "gpuaas:dcgm:fb_used:bytes"
GPU_TEMP: Final = "gpuaas:dcgm:gpu_temperature:celsius"
#: A pod holding a GPU now (value 1), by device and pod.
HOLDER: Final = "gpuaas:gpu_device:holder"
XID_LAST: Final = "gpuaas:gpu_device:xid_last"
#: An XID that appeared at this evaluation (label ``xid``), with the pod that held the GPU then.
XID_EVENT: Final = "gpuaas:gpu_xid:event"
ECC_DBE: Final = "gpuaas:gpu_device:ecc_dbe_volatile_total"
RETIRED_DBE: Final = "gpuaas:gpu_device:retired_pages_dbe_total"
RETIRED_PENDING: Final = "gpuaas:gpu_device:retired_pages_pending"
REMAP_FAILED: Final = "gpuaas:gpu_device:row_remap_failed"
REMAP_PENDING: Final = "gpuaas:gpu_device:row_remap_pending"
REMAP_UNCORRECTABLE: Final = "gpuaas:gpu_device:row_remap_uncorrectable_total"


class Rename(NamedTuple):
    old: str
    new: str
    #: PromQL that brings a value of the old name into the new name's unit ("": unit unchanged).
    old_to_new: str
    source: str
    #: True where the new name was read in NVIDIA's own sources; False where only a third party
    #: or the naming pattern gives it (the rules read it anyway: an absent name costs nothing).
    confirmed: bool


_GO_DCGM: Final = "NVIDIA/go-dcgm pkg/dcgm/const_fields.go v1.4611.1 (DCGM 4.6.1 names)"
_R490: Final = "dcgm-exporter 4.9.0 release notes (units: percent → ratio, MiB → bytes)"

#: The fields gpuaas reads, old (dcgm-exporter ≤ 4.8) → new name. dcgm-exporter 4.9.0's notes
#: give the units but not the 23 names; the names are DCGM's own field names, where NVIDIA's Go
#: bindings define them. ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` and ``DCGM_FI_DEV_ROW_REMAP_PENDING``
#: keep their names (same file). The 4.10.0 renames (``DCGM_FI_PROF_PCIE_TX_BYTES`` →
#: ``..._BYTES_PER_SECOND``, RX, NVLink TX/RX) name no field gpuaas reads.
RENAMES: Final[tuple[Rename, ...]] = (
    Rename("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO", " / 100", f"{_GO_DCGM}: field 203; {_R490}", True),
    Rename(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
        "",
        "third-party DCGM field table (not in go-dcgm v1.4611.1); the _UTIL_RATIO pattern of field 203",
        False,
    ),
    Rename(
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_USED_BYTES",
        " * 1048576",
        f"{_R490}; the name by the _BYTES pattern of go-dcgm's BAR1 deprecations (DCGM_FI_DEV_BAR1_USED_BYTES)",
        False,
    ),
    Rename("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "", f"{_GO_DCGM}: field 150", True),
    Rename("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", "", f"{_GO_DCGM}: field 230", True),
    Rename("DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL", "", f"{_GO_DCGM}: field 391", True),
    Rename("DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_PAGE_RETIRED_PENDING", "", f"{_GO_DCGM}: field 392", True),
    Rename("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED", "", f"{_GO_DCGM}: field 395", True),
    Rename(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
        "",
        f"{_GO_DCGM}: field 393",
        True,
    ),
    Rename(
        "DCGM_FI_DRIVER_VERSION",
        "DCGM_FI_SYSTEM_DRIVER_VERSION",
        "",
        f"{_GO_DCGM}: field 1; dcgm-exporter 4.9.0 release notes (a label on every metric; no rule reads it)",
        True,
    ),
)
_NEW: Final = {r.old: r for r in RENAMES}


def either(old: str, by: str = ENTITY) -> str:
    """The new name or, where absent, ``old`` converted to the new name's unit, by ``by``.

    Aggregated first, so that the driver-version label (renamed too) and the exporter's own
    target labels never make two series of one GPU.
    """
    rename = _NEW[old]
    return f"max by ({by}) ({rename.new}) or max by ({by}) ({old}){rename.old_to_new}"


def dcgm_group(cfg: StackConfig) -> Group:
    """The stable-name series, then the per-device error series (evaluated before every other group)."""
    o = cfg.observability
    step = duration_seconds(o.evaluation_interval)
    held = f'{GPU_TEMP}{{pod!=""}} or {GPU_UTIL}{{pod!=""}} or {GR_ENGINE}{{pod!=""}}'
    # The holder at the XID: the pod may be gone by the evaluation that sees the XID (an XID 31
    # or 43 ends its process), so the holders of the last two evaluations count.
    recent = f"max_over_time({HOLDER}[{2 * step}s])"
    new_xid = f'count_values by ({DEVICE}) ("xid", ({XID_LAST} != {XID_LAST} offset {step}s) > 0)'
    rules = (
        # In the new names' units: a 0-1 ratio (what the utilization rules and the idle alert
        # compare) and bytes (the memory showback's unit).
        Recording(GPU_UTIL, either("DCGM_FI_DEV_GPU_UTIL")),
        Recording(GR_ENGINE, either("DCGM_FI_PROF_GR_ENGINE_ACTIVE")),
        Recording(FB_USED, either("DCGM_FI_DEV_FB_USED")),
        Recording(GPU_TEMP, either("DCGM_FI_DEV_GPU_TEMP")),
        Recording(HOLDER, f"group by ({DEVICE}, namespace, pod) ({held})"),
        Recording(XID_LAST, either("DCGM_FI_DEV_XID_ERRORS", by=DEVICE)),
        Recording(
            XID_EVENT,
            f"({recent} * on ({DEVICE}) group_left (xid) {new_xid}) or ({new_xid} unless on ({DEVICE}) {recent})",
        ),
        Recording(ECC_DBE, f"max by ({DEVICE}) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL)"),
        Recording(RETIRED_DBE, either("DCGM_FI_DEV_RETIRED_DBE", by=DEVICE)),
        Recording(RETIRED_PENDING, either("DCGM_FI_DEV_RETIRED_PENDING", by=DEVICE)),
        Recording(REMAP_FAILED, either("DCGM_FI_DEV_ROW_REMAP_FAILURE", by=DEVICE)),
        Recording(REMAP_PENDING, f"max by ({DEVICE}) (DCGM_FI_DEV_ROW_REMAP_PENDING)"),
        Recording(REMAP_UNCORRECTABLE, either("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", by=DEVICE)),
    )
    return Group("gpuaas-dcgm", o.evaluation_interval, rules)


def held_by(expr: str, window: str) -> str:
    """``expr`` (one series per device) once per pod that held the device within ``window``, and as
    it is for a device no pod held: the alert names the pods whose work the fault touched."""
    recent = f"max_over_time({HOLDER}[{window}])"
    return f"({recent} * on ({DEVICE}) group_left () ({expr})) or (({expr}) unless on ({DEVICE}) {recent})"
