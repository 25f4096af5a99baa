"""``--previous``: the stack's last outputs for the day-2 guards, or a refusal — never a silent first run.

The day-2 guards (MIG layouts, the fabric, the resource model) compare the config against the
stack's last outputs. Offline, those come from a file (``--previous``, ``make plan PREVIOUS=``,
``make diff``'s base plan). A file that is missing, empty, cut short, a list, some other YAML or
another stack's outputs used to read as "no last run", which turned every guard off: a MIG layout
change planned cleanly. So :func:`read_previous` accepts this stack's outputs only, and a missing
file only when the run says it is a first run (``--first-run``; the pull-request workflow passes
it for a stack its base does not have).

Every run exports :data:`STACK_KEY` (its stack name) and :data:`FORMAT_KEY` (:data:`FORMAT`);
the plan writes them as the last lines of ``outputs.yaml``, so a file cut short at any line has
lost them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.guards import fabric as fabric_guard
from components.guards import mig
from components.guards.gate import FORMAT, FORMAT_KEY, STACK_KEY
from components.model import yamlfile
from components.model.errors import ConfigError, Issue

__all__ = ["FORMAT", "FORMAT_KEY", "STACK_KEY", "check_written_by", "read_previous"]

#: What a last run of each platform kind always exported, beside the stamp (a file without them is cut short).
_ALWAYS = {"onprem": (mig.OUTPUT, mig.NODE_OUTPUT, fabric_guard.OUTPUT), "aks": (mig.OUTPUT,)}


def _refuse(file: Path, why: str) -> ConfigError:
    return ConfigError([Issue(f"--previous {file}", why)])


def _unheld_number(data: Any) -> str | None:
    """The path of the first integer past a double's range (Pulumi's outputs are protobuf ``Struct``
    values, numbers as doubles), or ``None``; iterative, so a deep file cannot overflow the stack."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, Mapping):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                float(value)
            except OverflowError:
                return where
    return None


def read_previous(
    file: Path | None, stack: str, first_run: bool = False, planned_as: str | None = None
) -> dict[str, Any] | None:
    """The last outputs of ``stack`` from ``file``; ``None`` for a first run; :class:`ConfigError` otherwise.

    ``first_run``: the run says the stack has never run, so a missing ``file`` (or none) is fine;
    an existing one is still checked (and then used). ``planned_as``: the caller planned ``file``
    itself as this stack (``make diff``'s base, with the base commit's own code), so outputs
    written before they carried the stamp are taken as that stack's.
    """
    if file is None:
        return None
    try:
        data = yamlfile.read_yaml(file, "outputs file", yamlfile.MAX_OUTPUTS_BYTES)
    except yamlfile.YamlError as err:
        if first_run and err.why == "no such outputs file":
            return None
        if err.why == "no such outputs file":
            raise _refuse(
                file,
                "no such file. The day-2 guards compare against the stack's last outputs: name the outputs.yaml "
                "of its last plan, or pass --first-run (make FIRST_RUN=1) if the stack has never run",
            ) from None
        raise ConfigError([Issue(f"--previous {err.where}", err.why)]) from None
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise _refuse(file, f"is {kind}, not the outputs.yaml of a plan (a mapping of stack outputs)")
    if FORMAT_KEY not in data and planned_as == stack:
        data = {**data, FORMAT_KEY: FORMAT, STACK_KEY: stack}  # planned here as this stack, by older code
    fmt, owner = data.get(FORMAT_KEY), data.get(STACK_KEY)
    if fmt is None or owner is None:
        raise _refuse(
            file,
            f"has no {FORMAT_KEY}/{STACK_KEY}: not the outputs.yaml of a plan, or cut short (they are its last "
            "lines); plan the stack's last state again to get a whole one",
        )
    if fmt != FORMAT:
        raise _refuse(file, f"is outputs format {fmt!r}; this gpuaas reads format {FORMAT}")
    if owner != stack:
        raise _refuse(file, f"holds the outputs of stack {owner!r}, not of stack {stack!r}")
    unheld = _unheld_number(data)
    if unheld is not None:
        raise _refuse(
            file,
            f"{unheld} holds a number no stack output can hold (outputs travel as 64-bit floats): not what a run of "
            "this stack wrote",
        )
    kind = data.get("platform")
    missing = [k for k in _ALWAYS.get(str(kind), ()) if not isinstance(data.get(k), Mapping)]
    if kind not in _ALWAYS or missing:
        what = f"platform {kind!r}" if kind not in _ALWAYS else f"no {', '.join(missing)}"
        raise _refuse(file, f"is not whole ({what}): every last run of a stack exports them")
    return dict(data)


#: The fabric values every on-prem run exports (:func:`components.guards.fabric.fabric_layout`).
_FABRIC_ALWAYS = ("vfsPerHca", "guidScheme")
#: The outputs the day-2 guards read as maps of strings (a map of anything else switches its guard off).
_STRING_MAPS = (mig.OUTPUT, mig.NODE_OUTPUT, fabric_guard.OUTPUT)


def check_written_by(last: Mapping[str, Any], kind: str, where: str) -> None:
    """Refuse a last-run record that cannot be what a run of this stack (of platform ``kind``) wrote.

    The guards compare what they find: an edited record switched them off without a word. A
    ``fabricLayout: {}`` (every on-prem run exports its VFs per HCA and GUID scheme) let a
    ``vfsPerHca`` change through without ``reconfigure``; an AKS stack's outputs relabelled with this
    stack's name carried no fabric at all; a map holding a non-string is ignored by its guard.
    """
    problems: list[str] = []
    recorded = last.get("platform")
    if recorded != kind:
        problems.append(f"platform is {recorded!r}, but this stack is {kind!r}")
    for name in _STRING_MAPS:
        value = last.get(name)
        if value is not None and not (
            isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            problems.append(f"{name} is not a map of strings (every run exports one)")
    fabric = last.get(fabric_guard.OUTPUT)
    if kind == "onprem" and recorded == kind and isinstance(fabric, Mapping):
        missing = [k for k in _FABRIC_ALWAYS if not isinstance(fabric.get(k), str)]
        if missing:
            problems.append(f"{fabric_guard.OUTPUT} has no {', '.join(missing)} (every on-prem run exports them)")
        elif not str(fabric["vfsPerHca"]).isascii() or not str(fabric["vfsPerHca"]).isdigit():
            problems.append(f"{fabric_guard.OUTPUT}.vfsPerHca is {fabric['vfsPerHca']!r}, not a count")
    if kind == "aks" and any(last.get(k) for k in (fabric_guard.OUTPUT, mig.NODE_OUTPUT)):
        problems.append(f"{fabric_guard.OUTPUT}/{mig.NODE_OUTPUT} hold values, which an AKS run never exports")
    if problems:
        raise ConfigError(
            [
                Issue(
                    where,
                    f"cannot be what a run of this stack wrote ({'; '.join(problems)}), so the day-2 guards would "
                    "compare against nothing; use the outputs.yaml of the stack's last run as the tool wrote it",
                )
            ]
        )
