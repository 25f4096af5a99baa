"""``gpuaas:observability``: the Prometheus stack gpuaas plugs into, idle and starvation alerts, showback prices.

The section says *where* the monitoring objects go and *what* they may assume; the rules, monitors
and dashboards built from it are :mod:`components.observability`'s, the GPU-equivalent weights and
prices per node group :mod:`components.model.accounting`'s. One fact lives here because two areas
read it: the DCGM counters dcgm-exporter collects (:data:`DCGM_COUNTERS`), which
:mod:`components.operators.gpu_operator` renders into ``dcgmExporter.config`` and the alerts name.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import AfterValidator, Field

from components.model.base import Model
from components.model.types import DnsLabel, LabelKey, LabelValue, check_go_duration_seconds

# --------------------------------------------------------------------------------------------
# Durations (Prometheus' own grammar, restricted to one unit so that windows add up in seconds)

_DURATION: Final = re.compile(r"^([1-9][0-9]*)(s|m|h|d)$")
_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """``"90m"`` → 5400. Raises ValueError for anything but ``<n>s|m|h|d``."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(
            f"{text!r} is not a duration; allowed: a positive whole number and one unit of s, m, h, d (e.g. 30m, 1h)"
        )
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def _duration(text: str) -> str:
    check_go_duration_seconds(duration_seconds(text), repr(text))  # Prometheus: "duration out of range"
    return text


Duration = Annotated[str, AfterValidator(_duration)]

#: Where the runbook pages live in the repository, one ``<alert>.md`` each.
RUNBOOK_DIR: Final = "docs/runbooks"
_RUNBOOK_BASE: Final = re.compile(
    r"^(https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?|[A-Za-z0-9._~%+-][A-Za-z0-9._~%/+-]*)$"
)


def _runbook_base(text: str) -> str:
    """An absolute http(s) URL without credentials, or a relative path: the value lands verbatim in
    every alert's ``runbook_url`` annotation (a Go template, sent to every receiver), so no spaces,
    quotes, braces or ``user:password@``."""
    if "@" in text:
        raise ValueError(
            f"{text!r} carries credentials; allowed: a URL without user:password@ (it reaches every alert receiver)"
        )
    if not _RUNBOOK_BASE.match(text):
        raise ValueError(
            f"{text!r} is not a runbook base; allowed: an http(s) URL (https://host/path) or a relative path "
            "of letters, digits and . _ ~ % / + -"
        )
    return text


RunbookBase = Annotated[str, AfterValidator(_runbook_base)]
Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]

# --------------------------------------------------------------------------------------------
# What dcgm-exporter collects

#: The counters list gpuaas gives dcgm-exporter (``dcgmExporter.config``, file ``dcgm-metrics.csv``):
#: (DCGM field, Prometheus type, help). Every name is in dcgm-exporter 4.5.3-4.8.2's
#: ``etc/default-counters.csv`` or in :data:`DCGM_FIELDS_BEYOND_DEFAULTS`; the ECC and retired-page
#: counters are commented out there, and the alerts need them, so this list enables them.
#: ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is the utilization MIG instances report
#: (``DCGM_FI_DEV_GPU_UTIL`` is not reported per MIG instance).
DCGM_COUNTERS: Final[tuple[tuple[str, str, str], ...]] = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending (a GPU reset activates it)"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
)


#: DCGM fields gpuaas collects that dcgm-exporter's ``default-counters.csv`` does not list, even
#: commented out: field → where it is defined. dcgm-exporter resolves a counters-file name through
#: go-dcgm's field table, so any DCGM field name it knows may be collected.
DCGM_FIELDS_BEYOND_DEFAULTS: Final[dict[str, str]] = {
    # Row remapping (Ampere and newer) waits for a GPU reset: NVML nvmlDeviceGetRemappedRows' isPending.
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "NVIDIA/go-dcgm pkg/dcgm/const_fields.go (v1.4611.1): field 396, "
    "'Whether remapping of rows is pending'; NVIDIA/DCGM dcgm_fields.h DCGM_FI_DEV_ROW_REMAP_PENDING 396",
}


def dcgm_counters_csv() -> str:
    """The counters list in dcgm-exporter's CSV format (``# `` comments, ``field, type, help``)."""
    lines = [
        "# gpuaas: the DCGM fields dcgm-exporter collects (components/model/observability.py).",
        "# DCGM FIELD, Prometheus metric type, help message",
        *(f"{field}, {kind}, {text}" for field, kind, text in DCGM_COUNTERS),
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The section


class PrometheusStack(Model):
    """The Prometheus stack gpuaas plugs into (prometheus-operator, as kube-prometheus-stack installs it).

    gpuaas installs no Prometheus. It needs the prometheus-operator CRDs (ServiceMonitor,
    PrometheusRule) and kube-state-metrics (no label allowlist); without the CRDs ``pulumi up``
    stops before any monitoring object is created. Defaults: kube-prometheus-stack's, released as
    ``kube-prometheus-stack`` in ``monitoring`` (its Prometheus selects monitors and rules by the
    ``release`` label unless ``*SelectorNilUsesHelmValues: false``).
    """

    namespace: DnsLabel = "monitoring"
    """Namespace of the existing Prometheus stack (default ``monitoring``)."""
    monitor_labels: dict[LabelKey, LabelValue] = Field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    """Labels Prometheus' ``serviceMonitorSelector`` selects: put on every ServiceMonitor gpuaas creates."""
    rule_labels: dict[LabelKey, LabelValue] = Field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    """Labels Prometheus' ``ruleSelector`` selects: put on every PrometheusRule gpuaas creates."""


class IdleAlert(Model):
    """A GPU allocated to a pod but idle: utilization under ``thresholdPercent`` for ``window``."""

    threshold_percent: Annotated[float, Field(gt=0, lt=100, allow_inf_nan=False)] = 5.0
    """GPU utilization, in percent (more than 0, under 100; default 5), under which an allocated GPU counts as idle
    (alert ``GpuaasGpuAllocatedIdle`` and the dashboards' idle panels)."""
    window: Duration = "1h"
    """How long an allocated GPU must stay under ``thresholdPercent`` before the alert fires (a Prometheus duration
    with one unit: ``30m``, ``1h``; default ``1h``)."""


class Grafana(Model):
    """Dashboards as ConfigMaps for the Grafana sidecar (kube-prometheus-stack ``grafana.sidecar.dashboards``)."""

    namespace: DnsLabel | None = None
    """Defaults to the Prometheus stack's namespace (the sidecar's default search namespace)."""
    label: LabelKey = "grafana_dashboard"
    """The sidecar loads ConfigMaps carrying this label (``sidecar.dashboards.label``/``labelValue``)."""
    label_value: LabelValue = "1"
    """Value of ``label`` on the dashboard ConfigMaps (the sidecar's ``labelValue``; default ``1``)."""


class Prices(Model):
    """Showback prices per GPU-hour; a kind without a price is shown without a cost.

    A MIG profile without a price of its own costs its weight × its GPU model's price; a
    time-sliced share costs its weight (1 / replicas) × the GPU model's price.
    """

    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")] = "USD"
    """Currency of every price here, an ISO 4217 code of three capital letters (default ``USD``); it labels the cost
    metrics and the showback report."""
    gpu_models: dict[str, Price] = Field(default_factory=dict)
    """Price of one whole GPU for one hour, by ``gpuModel`` (the catalog's names, e.g. ``H100-80GB``)."""
    mig_profiles: dict[str, Price] = Field(default_factory=dict)
    """Price of one MIG instance for one hour, by profile (e.g. ``1g.10gb``)."""


class Observability(Model):
    """Monitoring, alerts, dashboards and showback of the GPUs, per team (``gpuaas:observability``).

    Off (the default): no monitoring object is created and dcgm-exporter keeps the GPU
    Operator's defaults.
    """

    enabled: bool = False
    """Create gpuaas's monitoring objects: ServiceMonitors, PrometheusRules (alerts, and the recordings showback reads)
    and Grafana dashboards. Default false: none, and dcgm-exporter keeps the GPU Operator's defaults."""
    prometheus: PrometheusStack = PrometheusStack()
    """The existing Prometheus stack the monitors and rules are written for: its namespace and the labels its
    selectors pick."""
    idle: IdleAlert = IdleAlert()
    """The idle-GPU alert: a GPU allocated to a pod but under ``thresholdPercent`` utilization for ``window``."""
    starvation_window: Duration = "30m"
    """A team's queue has pending GPU work this long while its cohort has idle nominal quota."""
    evaluation_interval: Duration = "1m"
    """Evaluation interval of every rule group; GPU-hours are summed at this step."""
    alert_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Labels added to every alert, for Alertmanager routing (each alert also carries ``team`` where it has one)."""
    runbook_base_url: RunbookBase = RUNBOOK_DIR
    """Base of every alert's ``runbook_url`` annotation: the alert's page is ``<base>/<alert>.md``.

    Defaults to the pages' path in this repository (``docs/runbooks``); set it to where the pages
    are published (e.g. ``https://gpuaas.example.com/runbooks``) so that a page links from the alert.
    """
    mig_weights: dict[str, Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]] = Field(default_factory=dict)
    """GPU-equivalents of one MIG instance, by profile; defaults to compute slices / the GPU's slices."""
    prices: Prices = Prices()
    """Showback prices per GPU-hour by GPU model and MIG profile; default none (usage is shown without a cost)."""
    grafana: Grafana = Grafana()
    """Where the dashboard ConfigMaps go and the label the Grafana sidecar loads them by."""

    @property
    def dashboards_namespace(self) -> str:
        return self.grafana.namespace if self.grafana.namespace is not None else self.prometheus.namespace
