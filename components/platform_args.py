"""The stack config mapped onto each component's own arguments: the one place that reads ``StackConfig``
for a component (issue #33).

Every component takes ``(name, args, opts)`` with an arguments type of its own (a frozen dataclass in
the component's module, every field documented there), so a program that is not gpuaas' can build one
from hand-written arguments. :class:`components.platform.Platform` builds them from a parsed stack
config through the functions below: pure (no resource is created here; ordering and the day-2 gate are
handed in as values), one per component, tested in ``tests/test_platform_args.py``.
"""

from __future__ import annotations

from components.model import charts
from components.model.config import StackConfig
from components.operators.network_operator import DEFAULT_CNI_NETWORK_DIRECTORY, NetworkOperatorArgs


def chart_source(cfg: StackConfig, name: str) -> charts.Source:
    """The chart ``name`` at the stack's pinned version, from the stack's chart source (``gpuaas:charts``)."""
    return charts.source(cfg.charts, charts.chart(cfg.versions, name))


def network_operator(cfg: StackConfig) -> NetworkOperatorArgs:
    """The Network Operator: ``gpuaas:network``; on-prem Multus' CNI directory; on AKS the IB VFs' rule."""
    onprem = cfg.onprem
    return NetworkOperatorArgs(
        network=cfg.network,
        chart=chart_source(cfg, charts.NETWORK_OPERATOR),
        cni_network_directory=(
            onprem.multus.cni_conf_dir
            if onprem is not None and onprem.multus is not None
            else DEFAULT_CNI_NETWORK_DIRECTORY
        ),
        azure_vfs=cfg.aks is not None,
    )
