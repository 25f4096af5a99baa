"""Rules of the Kubernetes version a stack runs: support dates, AKS OS SKUs, charts and Kueue.

The facts and their sources are in :mod:`components.model.kubernetes`. On AKS the version is
``platform.kubernetesVersion`` (a default pins it); on-prem it is declared, and required, because
gpuaas checks what it does not create. Both are judged on ``today``, which the caller passes
(``__main__.py`` reads the clock once; tests pin it): a version past its end of support is
refused with the date and the source, one within ``WARN_DAYS`` of it gets a console warning.
Nothing here reaches a plan file, so the plan never depends on the date.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from components.model import kubernetes as k8s
from components.model.config import StackConfig
from components.model.errors import Issue
from components.model.platform import AksPlatform

KEY = "gpuaas:platform.kubernetesVersion"


def _minors(rows: list[k8s.Support], aks: bool) -> str:
    return ", ".join(f"{s.name} (until {k8s.end_of(s, aks)})" for s in rows) or "(none)"


def _declared(cfg: StackConfig) -> tuple[str | None, k8s.Minor | None]:
    v = cfg.platform.kubernetes_version
    return v, (k8s.minor_of(v) if v is not None else None)


def _support(cfg: StackConfig, today: date) -> Iterator[Issue]:
    aks = isinstance(cfg.platform, AksPlatform)
    version, minor = _declared(cfg)
    allowed = k8s.supported(today, aks)
    where = "on AKS" if aks else "upstream"
    choose = f"supported {where} on {today}: {_minors(allowed, aks)}"
    if version is None:
        yield Issue(
            KEY,
            "is required on-prem: declare the cluster's version (kubectl version, e.g. "
            f"{allowed[-1].name + '.0' if allowed else '1.37.2'}) so gpuaas can check it; {choose}",
        )
        return
    if minor is None:
        return  # the grammar refused it already
    row = k8s.support(minor)
    newest = k8s.MINORS[-1]
    if row is None and minor < k8s.MINORS[0].minor:
        oldest = k8s.MINORS[0]
        yield Issue(
            KEY,
            f"{version}: Kubernetes {k8s.fmt(minor)} is older than {oldest.name}, which reached its end of "
            f"{'AKS standard support' if aks else 'life'} on {k8s.end_of(oldest, aks)}; {choose}",
        )
        return
    if row is None:
        yield Issue(
            KEY,
            f"{version}: gpuaas has no support dates for Kubernetes {k8s.fmt(minor)} (its table, "
            f"components/model/kubernetes.py, ends at {newest.name} and was reviewed on {k8s.REVIEWED}); {choose}",
        )
        return
    if aks and (row.aks_ga is None or row.aks_ga > today):
        yield Issue(
            KEY,
            f"{version}: AKS has not made Kubernetes {row.name} generally available by {today} ({k8s.AKS_CALENDAR}"
            f"{f': GA {row.aks_ga}' if row.aks_ga else ''}); {choose}",
        )
        return
    ended = past_end(cfg, today)
    if ended is not None:
        yield ended


def past_end(cfg: StackConfig, today: date) -> Issue | None:
    """The problem of a minor past its end of life (upstream) or of AKS standard support, else ``None``.

    The one version problem that refuses the deploy but not the offline plan (issue 35, item 10):
    a team on a lagging cluster must still see the plan it prepares its upgrade with.
    """
    aks = isinstance(cfg.platform, AksPlatform)
    version, minor = _declared(cfg)
    row = k8s.support(minor) if minor is not None else None
    if version is None or minor is None or row is None:
        return None
    end = k8s.end_of(row, aks)
    if end is None or end >= today:
        return None
    what = "AKS standard support" if aks else "life"
    source = k8s.AKS_CALENDAR if aks else k8s.UPSTREAM
    after = "; only AKS's paid long-term support (premium tier) still runs it" if aks else ""
    nxt = k8s.fmt((minor[0], minor[1] + 1))
    how = (
        f"upgrade one minor at a time (platform.kubernetesVersion {nxt}, docs/guides/day2.md 'Upgrade Kubernetes')"
        if aks
        else "upgrade the cluster, then declare its version"
    )
    reached = f"Kubernetes {row.name} reached the end of its {what} on {end} ({source}){after}"
    allowed = k8s.supported(today, aks)
    choose = f"supported {'on AKS' if aks else 'upstream'} on {today}: {_minors(allowed, aks)}"
    return Issue(KEY, f"{version}: {reached}; {how}; {choose}")


def support_warnings(cfg: StackConfig, today: date) -> list[str]:
    """Console warnings: the version's support ends within :data:`~components.model.kubernetes.WARN_DAYS`."""
    aks = isinstance(cfg.platform, AksPlatform)
    version, minor = _declared(cfg)
    row = k8s.support(minor) if minor is not None else None
    end = k8s.end_of(row, aks) if row is not None else None
    if version is None or row is None or end is None or end < today:
        return []
    left = (end - today).days
    if left > k8s.WARN_DAYS:
        return []
    what = "AKS standard support" if aks else "end of life"
    source = k8s.AKS_CALENDAR if aks else k8s.UPSTREAM
    return [
        f"{KEY}: {version}: Kubernetes {row.name} reaches its {what} on {end}, in {left} days ({source}); "
        f"plan the upgrade to {k8s.fmt((row.minor[0], row.minor[1] + 1))} (README, 'Upgrading Kubernetes')"
    ]


def _pool_skus(cfg: StackConfig) -> list[tuple[str, str, str]]:
    """``(config key, pool name, OS SKU)`` of the AKS system pool and every GPU pool; none on-prem."""
    p = cfg.aks
    if p is None:
        return []
    pools: list[tuple[str, str, str]] = [("gpuaas:platform.systemPool", p.system_pool.name, p.system_pool.os_sku)]
    pools += [(f"gpuaas:platform.gpuPools[{i}]", pool.name, pool.os_sku) for i, pool in enumerate(p.gpu_pools)]
    return pools


def os_sku_warnings(cfg: StackConfig) -> list[str]:
    """Console warnings: a pool's OS SKU runs this minor but not the next (AKS upgrade-os-version).

    The rule (:func:`_os_skus`) refuses a minor the OS does not run, when it is too late to do
    anything but migrate first; this says so one minor ahead, with the migration. The system pool
    is inline in the ManagedCluster, which is protected (components/clusters/aks.py): it is not
    changed in place but replaced by a new System-mode pool.
    """
    p = cfg.aks
    minor = k8s.minor_of(p.kubernetes_version) if p is not None else None
    if p is None or minor is None:
        return []
    nxt = (minor[0], minor[1] + 1)
    out = []
    for key, name, sku in _pool_skus(cfg):
        lo, hi = k8s.AKS_OS_SKUS[sku]
        if not lo <= minor <= hi or nxt <= hi:
            continue  # refused by the rule already, or fine for the next minor too
        fits = [s for s, (a, b) in k8s.AKS_OS_SKUS.items() if a <= minor and nxt <= b]
        to = " or ".join(fits) or "an OS SKU AKS supports there"
        if key.endswith("systemPool"):
            how = (
                f"the system pool sits inline in the protected ManagedCluster and is not changed in place: add a "
                f"System-mode pool on {to} (az aks nodepool add --mode System --os-sku {fits[0] if fits else '...'}), "
                f"drain '{name}' (kubectl drain), remove it, then set {key}.osSku and pulumi refresh"
            )
        else:
            how = (
                f"set osSku {to} on '{name}' in a run of its own on this minor (AKS reimages its nodes), or add a "
                f"pool on {to} beside it, drain '{name}' (kubectl drain) and remove it"
            )
        out.append(
            f"{key}.osSku: {sku} runs Kubernetes {k8s.fmt(lo)} to {k8s.fmt(hi)} only ({k8s.AKS_OS_DOC}); the cluster "
            f"runs {p.kubernetes_version}, so the next minor, {k8s.fmt(nxt)}, needs {to} first. Migrate before "
            f"upgrading: {how}; move every pool in the same run (the GPU Operator runs one OS per cluster; README "
            "'Upgrading Kubernetes')"
        )
    return out


def _os_skus(cfg: StackConfig) -> Iterator[Issue]:
    """AKS OS SKUs for the cluster's minor, one OS for the whole cluster (the GPU Operator's)."""
    p = cfg.aks
    if p is None:
        return
    minor = k8s.minor_of(p.kubernetes_version)
    pools = [("platform.systemPool", p.system_pool.os_sku)] + [
        (f"platform.gpuPools[{i}]", pool.os_sku) for i, pool in enumerate(p.gpu_pools)
    ]
    for where, sku in pools:
        lo, hi = k8s.AKS_OS_SKUS[sku]
        if minor is not None and not lo <= minor <= hi:
            fits = [s for s, (a, b) in k8s.AKS_OS_SKUS.items() if a <= minor <= b]
            yield Issue(
                f"gpuaas:{where}.osSku",
                f"{sku}: AKS supports it on Kubernetes {k8s.fmt(lo)} to {k8s.fmt(hi)} only ({k8s.AKS_OS_DOC}), and "
                f"platform.kubernetesVersion is {p.kubernetes_version}; use {' or '.join(fits) or 'another version'} "
                "(Ubuntu 24.04 brings containerd 2.0, and the DOCA driver image becomes its -ubuntu24.04 build; "
                "docs/guides/day2.md 'Upgrade Kubernetes')",
            )
    skus = sorted({sku for _w, sku in pools})
    if len(skus) > 1:
        yield Issue(
            "gpuaas:platform.gpuPools",
            f"pools run {' and '.join(skus)}: the NVIDIA GPU Operator is not compatible with multiple OS versions "
            "on the same AKS cluster (learn.microsoft.com/azure/aks/nvidia-gpu-operator); give systemPool and every "
            "GPU pool the same osSku",
        )


def _deployed_charts(cfg: StackConfig) -> list[tuple[str, str, str]]:
    """(config key, chart, version) of every chart the stack installs."""
    v = cfg.versions
    out = [
        ("gpuaas:versions.networkOperatorChart", "network-operator", v.network_operator_chart),
        ("gpuaas:versions.gpuOperatorChart", "gpu-operator", v.gpu_operator_chart),
    ]
    if cfg.queues.elastic:
        out.append(("gpuaas:versions.kueueChart", "kueue", v.kueue_chart))
    return out


def _charts(cfg: StackConfig) -> Iterator[Issue]:
    version, minor = _declared(cfg)
    if version is None or minor is None:
        return
    for key, chart, chart_version in _deployed_charts(cfg):
        constraint = k8s.CHART_KUBE_VERSIONS.get((chart, chart_version))
        if constraint is not None and not k8s.satisfies(version, constraint):
            yield Issue(
                key,
                f"{chart_version}: chart {chart} declares kubeVersion {constraint!r} (its Chart.yaml), which "
                f"Kubernetes {version} does not meet; Helm refuses to install it there",
            )
    if cfg.queues.elastic and minor < k8s.KUEUE_MIN_KUBERNETES:
        yield Issue(
            KEY,
            f"{version}: Kueue {cfg.versions.kueue} requires Kubernetes {k8s.fmt(k8s.KUEUE_MIN_KUBERNETES)} or newer "
            "(its README), and queues.elastic deploys it",
        )


def check(cfg: StackConfig, today: date) -> Iterator[Issue]:
    """Every version problem of ``cfg`` on ``today``."""
    yield from _support(cfg, today)
    yield from _os_skus(cfg)
    yield from _charts(cfg)
