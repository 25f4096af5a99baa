"""``gpuaas:charts``: where Helm takes every operator chart from, and which charts a stack installs.

By default each chart comes from its public home at the version ``gpuaas:versions`` pins: the
Network Operator and GPU Operator charts from NVIDIA's Helm repository, Kueue's from its OCI
registry at registry.k8s.io. An air-gapped site sets a **chart mirror** instead, one per stack:

* ``directory``: a local folder with each chart at its pinned version, as ``helm pull`` writes it
  (``<chart>-<version>.tgz``) or unpacked (``<chart>-<version>/`` with its ``Chart.yaml``). Helm
  matches a version with or without its leading ``v`` (semver), and so does the lookup: Kueue's
  ``0.19.2`` is found as ``kueue-0.19.2.tgz`` or as ``kueue-v0.19.2/`` (a git tag's tree). A
  relative folder is relative to the project folder (where ``Pulumi.yaml`` is: ``pulumi`` runs the
  program and its providers there), and stays relative in the Helm release, so every machine that
  runs ``pulumi up`` from a checkout sends the same release inputs.
* ``registry``: an OCI registry path (``oci://host[:port]/path``) holding every chart under its own
  name (``helm push <chart>.tgz oci://host/path`` puts it at ``oci://host/path/<chart>``), at its
  pinned version; Helm's registry login (``helm registry login``) gives the credentials.

:func:`stack_charts` is the one list of the charts a stack installs, in install order;
:func:`source` turns one into what the Helm release is given (chart, version, repository), and
:func:`mirror_issues` says, before anything is touched, which chart a directory mirror lacks.
The directory lookup takes the filesystem test as an argument (:func:`local_chart`, the one
read of this machine, by default), so that everything else here stays a pure function.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Callable, Iterator
from typing import Annotated

from pydantic import AfterValidator

from components.model.base import Model
from components.model.errors import Issue
from components.model.grammar import OCI_SCHEME, check_image_repository
from components.model.versions import Versions

#: Chart names, as the charts' own ``Chart.yaml`` name them (network-operator v26.4.1,
#: gpu-operator v26.7.0, kueue v0.19.2) and as a mirror holds them.
NETWORK_OPERATOR: str = "network-operator"
GPU_OPERATOR: str = "gpu-operator"
KUEUE: str = "kueue"
HAMI: str = "hami"


# --------------------------------------------------------------------------------------------
# The grammars of a mirror: what Helm takes

#: Linux PATH_MAX, with the NUL.
PATH_MAX = 4096
OCI = OCI_SCHEME


def check_oci_registry(value: str) -> str:
    """A chart mirror in an OCI registry: ``oci://host[:port][/path]``; Helm takes a chart from
    ``<value>/<chart>`` (helm.sh/helm/v3 pkg/registry), whose part after ``oci://`` is an image
    repository (distribution/reference's grammar, :func:`check_image_repository`). No credentials
    in it (they would land in the plan and the state; ``helm registry login`` keeps them), no tag,
    no trailing slash."""
    rest = value.removeprefix(OCI)
    try:
        # The longest chart name gpuaas installs must fit too.
        ok = value.startswith(OCI) and bool(rest) and bool(check_image_repository(f"{rest}/{NETWORK_OPERATOR}"))
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{value!r} is not an OCI chart registry path (oci://host[:port][/path], lowercase path components, "
            "no credentials, tag or trailing slash; Helm takes each chart from <registry>/<chart>), "
            "e.g. oci://harbor.example.com/gpuaas-charts"
        )
    return value


def check_chart_directory(value: str) -> str:
    """A local folder of charts: a path Helm opens as it is (``os.Stat``: no ``~`` expansion, no
    URL), absolute or relative to the project folder, shorter than PATH_MAX."""
    problem = ""
    if not value.strip():
        problem = "it is empty"
    elif value != value.strip():
        problem = "it starts or ends with white space"
    elif "://" in value:
        problem = "it is a URL (an OCI registry goes in charts.registry; a Helm repository in versions.helmRepository)"
    elif value.startswith("~"):
        problem = "Helm does not expand ~: write the folder out"
    elif len(value.encode()) >= PATH_MAX:
        problem = f"it is longer than PATH_MAX ({PATH_MAX} bytes)"
    if problem:
        raise ValueError(
            f"{value!r} is not a chart folder: {problem}; write a local folder, absolute or relative to the "
            "project folder (where Pulumi.yaml is)"
        )
    return value


OciRegistry = Annotated[str, AfterValidator(check_oci_registry)]
ChartDirectory = Annotated[str, AfterValidator(check_chart_directory)]


class Charts(Model):
    """Where Helm takes the operator charts from: unset, their public repositories; for an
    air-gapped site one mirror, either ``directory`` (a local folder of `<chart>-<version>.tgz`
    archives or unpacked `<chart>-<version>/` charts, relative to the project folder) or ``registry``
    (`oci://host/path`, each chart at `<registry>/<chart>`). Every chart is taken at the version
    `gpuaas:versions` pins.

    A mirror replaces ``versions.helmRepository`` and ``versions.kueueChartRef``, which then keep
    their defaults (a rule says so). See the module docstring for the layouts.
    """

    directory: ChartDirectory | None = None
    """A local folder holding every chart the stack installs (see the module docstring)."""
    registry: OciRegistry | None = None
    """An OCI registry path holding every chart under its own name."""

    @property
    def mirror(self) -> str | None:
        """The config key of the mirror in use, or ``None`` for the public repositories."""
        if self.directory is not None:
            return "charts.directory"
        if self.registry is not None:
            return "charts.registry"
        return None


@dataclasses.dataclass(frozen=True)
class Chart:
    """One chart a stack installs: its name, the pinned version and its public home."""

    name: str
    version: str
    repository: str | None
    """The Helm repository it is published in, or ``None`` where ``public`` is an OCI reference."""
    public: str
    """What Helm is given without a mirror: the chart's name (with ``repository``) or its oci:// reference."""
    version_key: str
    """The config key that pins the version, for messages."""


def _key(component: str) -> str:
    return f"versions.{component}Chart"


def stack_charts(v: Versions, elastic: bool, hami: bool = False) -> list[Chart]:
    """Every chart a stack installs, in install order (components/platform.py registers these
    releases): both operators, HAMi where a node group shares its GPUs with it (``hami``), and
    Kueue where the stack's queues are ``elastic``."""
    out = [
        Chart(NETWORK_OPERATOR, v.network_operator_chart, v.helm_repository, NETWORK_OPERATOR, _key("networkOperator")),
        Chart(GPU_OPERATOR, v.gpu_operator_chart, v.helm_repository, GPU_OPERATOR, _key("gpuOperator")),
    ]
    if hami:
        out.append(Chart(HAMI, v.hami_chart, v.hami_helm_repository, HAMI, _key("hami")))
    if elastic:
        out.append(Chart(KUEUE, v.kueue_chart, None, v.kueue_chart_ref, _key("kueue")))
    return out


def chart(v: Versions, name: str) -> Chart:
    """The chart ``name`` at the versions ``v`` pins (a name gpuaas never installs is a bug: KeyError)."""
    for c in stack_charts(v, elastic=True, hami=True):
        if c.name == name:
            return c
    raise KeyError(f"the stack installs no chart {name!r}")


@dataclasses.dataclass(frozen=True)
class Source:
    """What a Helm release is given: ``chart`` (a name, an oci:// reference or a local path),
    ``version`` and the repository URL (``None``: none, Helm takes ``chart`` as it is)."""

    chart: str
    version: str
    repository: str | None


def _versions(version: str) -> list[str]:
    """``version``, then the same with its leading ``v`` added or removed (Helm matches either)."""
    other = version[1:] if version.startswith("v") else f"v{version}"
    return [version, other]


def directory_candidates(directory: str, name: str, version: str) -> list[str]:
    """Where a directory mirror may hold ``name`` at ``version``, in the order they are tried:
    the archive ``helm pull`` writes, then an unpacked chart, each with the version as pinned and
    then with its ``v`` toggled."""
    return [posixpath.join(directory, f"{name}-{ver}{suffix}") for ver in _versions(version) for suffix in (".tgz", "")]


#: ``is_chart(path)``: whether ``path`` is a chart archive (a file) or a chart folder (with Chart.yaml).
IsChart = Callable[[str], bool]


def local_chart(path: str) -> bool:
    """The real :data:`IsChart`: what Helm would load from ``path`` (an archive file, or a folder
    with its ``Chart.yaml``; pulumi-kubernetes ``localChart`` and Helm's ``LocateChart`` test the same).
    Relative paths are relative to the working directory, the project folder under ``pulumi``."""
    if path.endswith(".tgz"):
        return os.path.isfile(path)
    return os.path.isfile(os.path.join(path, "Chart.yaml"))


def source(charts: Charts, c: Chart, is_chart: IsChart = local_chart) -> Source:
    """Where ``c`` comes from under ``charts``.

    A directory mirror without the chart gives its first candidate (what ``helm pull`` would
    write); :func:`mirror_issues` refuses that case before any resource is registered.
    """
    if charts.registry is not None:
        return Source(f"{charts.registry}/{c.name}", c.version, None)
    if charts.directory is not None:
        candidates = directory_candidates(charts.directory, c.name, c.version)
        found = next((p for p in candidates if is_chart(p)), candidates[0])
        return Source(found, c.version, None)
    return Source(c.public, c.version, c.repository)


def pull(c: Chart) -> str:
    """The ``helm pull`` command that fetches ``c`` from its public home (what a mirror holds)."""
    repo = f" --repo {c.repository}" if c.repository is not None else ""
    return f"helm pull {c.public}{repo} --version {c.version}"


def mirror_issues(charts: Charts, wanted: list[Chart], is_chart: IsChart = local_chart) -> Iterator[Issue]:
    """A directory mirror that lacks a chart of ``wanted``: one issue per chart, naming every
    place looked at and the key that pins the version."""
    directory = charts.directory
    if directory is None:
        return
    for c in wanted:
        candidates = directory_candidates(directory, c.name, c.version)
        if not any(is_chart(p) for p in candidates):
            yield Issue(
                "gpuaas:charts.directory",
                f"{directory!r} holds no chart {c.name} at {c.version} (gpuaas:{c.version_key}): looked for "
                f"{', '.join(candidates)} (an archive from `{pull(c)}`, or the chart unpacked, with its Chart.yaml)",
            )
