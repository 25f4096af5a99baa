"""The offline plan: what a stack would deploy, written as files a reviewer can diff.

``python -m components.plan <stack> [--out plan]`` runs the real program under the mock runtime
(:mod:`components.plan.offline`) and writes ``plan/<stack>/``:

- ``k8s/<namespace|_cluster>/<Kind>-<name>.yaml`` — every Kubernetes object, one per file;
- ``helm/<namespace>-<release>.yaml`` — chart, repository, version, options and values;
- ``azure/<Type>-<logical name>.yaml`` — every Azure resource's inputs and options;
- ``opensm/partitions.conf`` and ``opensm/opensm.conf`` — the exact files to install (on-prem);
- ``outputs.yaml`` (secrets masked) and ``summary.txt`` (also printed).

Two runs write byte-identical trees: file names come from explicit object names, keys are
sorted below the top level, and nothing time- or host-dependent is written.

One piece: the command line, the day-2 guards' --previous checks (the trap, tampering, bounds) and
the files written share one run's state; split planned with the scale work (issue 37).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi
import yaml

from components.guards.disruptions import disruptions, guard_warnings
from components.loader import parse_stack, render_located
from components.model import yamlfile
from components.model.config import StackConfig
from components.model.errors import ConfigError, Issue
from components.model.grammar import stack_name_problem
from components.model.kubernetes import REVIEWED
from components.plan.api_limits import object_size_issues
from components.plan.index import INDEX, plan_index, resource_counts
from components.plan.offline import ROOT, Record, Run, gc_paused, run_program, stack_config
from components.plan.offline import stack_file as own_file
from components.plan.previous import FORMAT_KEY, STACK_KEY, check_written_by, read_previous
from components.plan.stdout import emit
from components.plan.summary import render_summary
from components.rules.versions import past_end

_TOP_ORDER = ("apiVersion", "kind", "metadata", "spec", "data", "stringData", "rules", "subjects", "roleRef")
_SKIP_TYPES = ("pulumi:providers:",)
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET = "[secret]"


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _ordered(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level keys in Kubernetes reading order, everything below sorted."""
    first = [k for k in _TOP_ORDER if k in obj]
    rest = sorted(k for k in obj if k not in _TOP_ORDER)
    return {k: _sorted(obj[k]) for k in [*first, *rest]}


_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's emitter: ~10x faster


class _Dumper(_BaseDumper):  # type: ignore[misc]
    """Block style; multi-line strings (scripts, configs) as literal blocks so diffs stay readable."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


def dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def integral(value: Any) -> Any:
    """Whole-number floats back to ints: Pulumi's wire format (protobuf ``Struct``) carries every
    number as a double, and the Kubernetes provider sends integral ones as integers, which the API
    needs (``weight: 100.0`` is refused: "cannot unmarshal number 100.0 into ... int32")."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value


def manifest(record: Record) -> dict[str, Any]:
    """A Kubernetes record's inputs as the object the API server would receive."""
    inputs = integral(dict(record.inputs))
    if record.type.endswith("Patch") and "kind" not in inputs:
        inputs["kind"] = record.type.rsplit(":", 1)[1].removesuffix("Patch")
    return _ordered(inputs)


def _k8s_path(obj: Mapping[str, Any], record: Record) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or "_cluster"
    kind = obj.get("kind") or record.type.rsplit(":", 1)[1]
    suffix = ".patch" if record.type.endswith("Patch") else ""
    return f"k8s/{ns}/{kind}-{meta.get('name', record.name)}{suffix}.yaml"


def _options_comment(record: Record) -> str:
    """A comment line naming the Pulumi options that change how the object is managed, if any.

    A comment keeps the file a plain manifest while the plan diff still shows, say, a team
    namespace losing its ``protect``.
    """
    options = [
        name
        for name, on in (
            ("protect", record.protect),
            ("retainOnDelete", record.retain_on_delete),
            ("deleteBeforeReplace", record.delete_before_replace),
        )
        if on
    ]
    if record.ignore_changes:
        options.append(f"ignoreChanges {','.join(record.ignore_changes)}")
    return f"# pulumi options: {'; '.join(options)}\n" if options else ""


def _helm(record: Record) -> tuple[str, dict[str, Any]]:
    i = record.inputs
    ns = i.get("namespace", "default")
    doc = {
        "release": i.get("name"),
        "namespace": ns,
        "chart": i.get("chart"),
        "repository": (i.get("repositoryOpts") or {}).get("repo"),
        "version": i.get("version"),
        "options": {
            k: i[k] for k in sorted(i) if k not in ("name", "namespace", "chart", "repositoryOpts", "version", "values")
        },
        "values": _sorted(i.get("values") or {}),
    }
    return f"helm/{ns}-{i.get('name', record.name)}.yaml", doc


def _azure(record: Record) -> tuple[str, dict[str, Any]]:
    kind = record.type.rsplit(":", 1)[1]
    doc = {
        "type": record.type,
        "name": record.name,
        "options": {
            "protect": record.protect,
            "ignoreChanges": record.ignore_changes,
            "dependsOn": [d.rsplit("::", 1)[1] for d in record.dependencies],
        },
        "inputs": _sorted(record.inputs),
    }
    return f"azure/{kind}-{record.name}.yaml", doc


def plan_files(run: Run) -> dict[str, str]:
    """Every file of the plan, path → content; pure given a run."""
    files: dict[str, str] = {}
    owners: dict[str, Record] = {}

    def put(path: str, text: str, owner: Record | None = None) -> None:
        if path in files:
            # The config rules (components/rules/namespaces.py) refuse the collisions a config can cause; one
            # reaching here is a gpuaas bug, still reported as a problem rather than a traceback.
            raise ConfigError(
                [
                    Issue(
                        path,
                        "two objects of the plan have this kind, namespace and name; one would overwrite the other",
                    )
                ]
            )
        files[path] = text
        if owner is not None:
            owners[path] = owner

    urns = Counter(r.urn for r in run.records)
    twice = sorted(u for u, n in urns.items() if n > 1)
    if twice:
        # The engine refuses a URN registered twice ("Duplicate resource URN"); the mocks do not.
        raise ConfigError(
            [Issue(u, "registered twice: two resources of the program have one logical name") for u in twice]
        )
    for r in run.records:
        if not r.custom or r.type.startswith(_SKIP_TYPES):
            continue
        if r.type == HELM_RELEASE:
            path, doc = _helm(r)
            put(path, dump(doc), r)
        elif r.type.startswith("kubernetes:"):
            obj = manifest(r)
            put(_k8s_path(obj, r), _options_comment(r) + dump(obj), r)
        elif r.type.startswith("azure-native:"):
            path, doc = _azure(r)
            put(path, dump(doc), r)
    for key, name in (("partitionsConf", "partitions.conf"), ("opensmConf", "opensm.conf")):
        if isinstance(run.outputs.get(key), str):
            put(f"opensm/{name}", run.outputs[key])
    shown = {k: (SECRET if k in run.secret_outputs else v) for k, v in run.outputs.items()}
    outputs = dump(_stamp_last(_sorted(shown)))
    if len(outputs.encode()) > yamlfile.MAX_OUTPUTS_BYTES:
        # What --previous and make diff read back: a plan writes no outputs it would refuse to read.
        raise ConfigError(
            [
                Issue(
                    "outputs.yaml",
                    f"would be {len(outputs.encode())} bytes; the day-2 guards read outputs of at most "
                    f"{yamlfile.MAX_OUTPUTS_BYTES} bytes (components/model/yamlfile.py)",
                )
            ]
        )
    put("outputs.yaml", outputs)
    files[INDEX] = dump(plan_index(run, owners))
    return files


def _is_object(record: Record) -> bool:
    return record.custom and record.type.startswith("kubernetes:") and record.type != HELM_RELEASE


def _stamp_last(outputs: dict[str, Any]) -> dict[str, Any]:
    """The stack name and outputs format as the file's last lines: a file cut short has lost them."""
    stamp = [k for k in (STACK_KEY, FORMAT_KEY) if k in outputs]
    return {**{k: v for k, v in outputs.items() if k not in stamp}, **{k: outputs[k] for k in stamp}}


def write_plan(
    stack: str,
    out: Path,
    stack_file: Path | None = None,
    previous: Path | Mapping[str, Any] | None = None,
    first_run: bool = False,
) -> tuple[Run, str]:
    """Run ``stack`` offline and write its plan under ``out/<stack>``; returns the summary.

    ``stack_file`` replaces ``Pulumi.<stack>.yaml`` (e.g. a candidate config in review);
    ``previous`` is the ``outputs.yaml`` of an earlier plan (e.g. the base branch's), standing in
    for the stack's last outputs that the day-2 guards compare against: only this stack's outputs
    are taken, and a missing file only with ``first_run`` (:mod:`components.plan.previous`). A
    mapping is outputs the caller has read and checked already.
    """
    target = plan_target(stack, out)
    if isinstance(previous, Path):
        check_previous_outside(previous, target)
    config = stack_config(stack, stack_file)
    if stack_file is not None:
        check_stack_kind(stack, stack_file, config)
    # Bad config stops here, before the program registers anything; a minor past its end is planned
    # (the deploy refuses it) with a warning at the top of the summary and the diff.
    cfg = parse_stack(config, plan=True)
    last = dict(previous) if isinstance(previous, Mapping) else read_previous(previous, stack, first_run)
    if last is not None:
        check_written_by(
            last, cfg.platform.kind, "the base's outputs" if isinstance(previous, Mapping) else f"--previous {previous}"
        )
    with gc_paused():  # rendering walks every record too: no full collections over the run's heap
        run = run_program(stack, config=config, previous=last)
        files = plan_files(run)
        too_big = object_size_issues([manifest(r) for r in run.records if _is_object(r)], config)
        if too_big:  # refused by the API server mid-`pulumi up`: refused here, naming the key
            raise ConfigError(too_big)
        summary = render_summary(
            cfg, run, resource_counts(run), files, guards_line(previous, first_run), plan_warnings(cfg, last)
        )
    files["summary.txt"] = summary
    write_tree(target, files)
    return run, summary


#: The summary line saying what the day-2 guards compared against (the plan diff leaves it out: a
#: base is planned on its own, its head against the base, so the line always differs).
GUARDS_PREFIX = "Day-2 guards"
#: What the day-2 guards must compare against, said wherever a plan had nothing to compare with.
COMPARE_WITH_BASE = (
    "compare with the base's plan (make diff BASE=main), or name the outputs.yaml of the stack's last run with "
    "PREVIOUS= (a file outside plan/<stack>, which every plan replaces)"
)


def check_previous_outside(previous: Path, target: Path) -> None:
    """Refuse a ``--previous`` file inside the plan folder this run replaces.

    ``make plan PREVIOUS=plan/onprem/outputs.yaml`` reads the outputs of the last *plan*, which a plain
    ``make plan`` of the changed config has already overwritten: the guards then compare the change
    with itself, and a MIG layout change passes while the tool says it was checked.
    """
    try:
        inside = previous.resolve() == target.resolve() or target.resolve() in previous.resolve().parents
    except (OSError, RuntimeError):  # a symlink loop: not inside, and read_previous reports it
        return
    if inside:
        raise ConfigError(
            [
                Issue(
                    f"--previous {previous}",
                    f"is inside the plan folder this run writes ({target}): that is the output of the last plan, "
                    "which any plain `make plan` has already replaced with the changed config, so the day-2 guards "
                    f"would compare the change with itself. The guards compare against the stack's last run: "
                    f"{COMPARE_WITH_BASE}",
                )
            ]
        )


def guards_line(previous: Path | Mapping[str, Any] | None, first_run: bool) -> str:
    """The summary's line on what the day-2 guards compared this plan against."""
    checked = f"{GUARDS_PREFIX} (MIG layouts, fabric, resource model, Kubernetes version): checked against"
    if isinstance(previous, Mapping):
        return f"{checked} the base's outputs"
    if previous is not None and (previous.exists() or not first_run):
        return f"{checked} {previous}"
    if first_run:
        return f"{GUARDS_PREFIX}: first run (--first-run): nothing to compare against"
    return (
        f"{GUARDS_PREFIX}: NOT CHECKED (no --previous: this plan is not compared with the stack's last run); "
        + COMPARE_WITH_BASE
    )


#: How a summary line that must be read first starts; the plan diff puts these lines at its top.
WARNING = "WARNING: "


def plan_warnings(cfg: StackConfig, last: Mapping[str, Any] | None) -> list[str]:
    """What a reviewer must read before anything else: a deploy this plan cannot have, the changes
    against the last run that evict pods or move their VFs, and the day-2 guards' warnings (a
    ``reconfigure`` left on), which `pulumi up` only logs. The plan diff and its pull-request
    comment put these lines at their top."""
    out: list[str] = []
    ended = past_end(cfg, REVIEWED)
    if ended is not None:
        out.append(f"{WARNING}PLAN ONLY: `pulumi up` refuses this stack: {ended}")
    out += [WARNING + line for line in disruptions(cfg, last)]
    out += [WARNING + line for line in guard_warnings(cfg, last)]
    return out


def plan_target(stack: str, out: Path) -> Path:
    """``out/<stack>``, once ``stack`` is a Pulumi stack name; never a path that leaves ``out``.

    The stack name becomes a folder that the plan replaces: ``..`` would make it ``out``'s
    parent (the repository, with the default ``--out plan``).
    """
    problem = stack_name_problem(stack)
    if problem:
        raise ConfigError([Issue("stack", f"{stack!r} is not a stack name: {problem}")])
    target = out / stack
    if target.resolve().parent != out.resolve():
        raise ConfigError([Issue("stack", f"{stack!r} resolves outside {out} ({target.resolve()})")])
    return target


#: Files every plan has: a folder without them is not a plan, and is never replaced.
PLAN_MARKERS = ("summary.txt", "outputs.yaml")


def write_tree(target: Path, files: Mapping[str, str]) -> None:
    """Replace ``target`` by ``files``, touching nothing outside it.

    An existing ``target`` is removed only if it is a plan written earlier (it has
    :data:`PLAN_MARKERS`) or empty; a symlink or anything else is refused, so that
    ``--out . <stack>`` cannot delete a source folder that happens to share the stack's name.
    """
    root = target.resolve()
    for rel in files:
        if (target / rel).resolve().parent != root and root not in (target / rel).resolve().parents:
            raise ConfigError([Issue(rel, f"plan file path leaves the plan folder {target}")])
    if target.is_symlink():
        raise ConfigError([Issue(str(target), "is a symbolic link; the plan replaces only a folder it wrote")])
    if target.exists():
        if not target.is_dir() or (any(target.iterdir()) and not all((target / m).is_file() for m in PLAN_MARKERS)):
            raise ConfigError(
                [
                    Issue(
                        str(target), "exists and is not an earlier plan (no summary.txt/outputs.yaml); not replacing it"
                    )
                ]
            )
        shutil.rmtree(target)
    for rel in sorted(files):
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel])


def platform_kind(config: Mapping[str, Any]) -> str | None:
    platform = config.get("gpuaas:platform")
    kind = platform.get("kind") if isinstance(platform, Mapping) else None
    return kind if isinstance(kind, str) else None


def check_stack_kind(stack: str, stack_file: Path, config: Mapping[str, Any]) -> None:
    """Refuse a ``--stack-file`` of another platform kind than the named stack's own file.

    Stack ``onprem`` planned from an AKS file would write an AKS plan under ``plan/onprem`` (and,
    with ``--previous``, compare it against the on-prem stack's outputs).
    """
    if not own_file(stack).is_file() or own_file(stack).resolve() == stack_file.resolve():
        return
    mine, theirs = platform_kind(stack_config(stack, own_file(stack))), platform_kind(config)
    if mine is not None and theirs is not None and mine != theirs:
        raise ConfigError(
            [
                Issue(
                    f"{stack_file}: gpuaas:platform.kind",
                    f"{theirs!r}, but stack {stack!r} is {mine!r} ({own_file(stack).name}); plan it as a stack of "
                    "its kind or name another stack",
                )
            ]
        )


def default_out(stack: str, stack_file: Path | None) -> Path:
    """``plan/``, or for a config that is not the stack's own file ``plan/variants/<file stem>/``:
    a variant's plan never lands on the checked-in stack's ``plan/<stack>``."""
    if stack_file is None or (own_file(stack).is_file() and own_file(stack).resolve() == stack_file.resolve()):
        return ROOT / "plan"
    return ROOT / "plan" / "variants" / (stack_file.stem.removeprefix("Pulumi.") or "variant")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan", description=__doc__.splitlines()[0])
    parser.add_argument("stack", nargs="?", default="onprem")
    parser.add_argument(
        "--out", type=Path, help="where <stack>/ goes (default plan/, a --stack-file's plan/variants/<its name>/)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the summary")
    parser.add_argument("--stack-file", type=Path, help="read the config from this file instead of Pulumi.<stack>.yaml")
    parser.add_argument(
        "--previous", type=Path, help="outputs.yaml of an earlier plan: the stack's last outputs (day-2 guards)"
    )
    parser.add_argument(
        "--first-run",
        action="store_true",
        help="the stack has never run: a missing --previous file is no error (the guards have nothing to compare)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out or default_out(args.stack, args.stack_file)
    try:
        _, summary = write_plan(args.stack, out, args.stack_file, args.previous, args.first_run)
    except ConfigError as err:
        file = args.stack_file or (own_file(args.stack) if stack_name_problem(args.stack) is None else None)
        print(render_located(err, file) if file is not None else err.render(), file=sys.stderr)
        return 2
    except pulumi.RunError as err:  # a day-2 guard (components/guards/mig.py) stopped the run
        print(str(err), file=sys.stderr)
        return 2
    except FileNotFoundError as err:
        print(f"gpuaas: no such file {err.filename}", file=sys.stderr)
        return 2
    except OSError as err:  # a folder given as a file, no permission, a full disk
        print(f"gpuaas: {err.filename or out}: {err.strerror or err}", file=sys.stderr)
        return 2
    if not args.quiet and not emit(summary):
        return 1
    print(guards_line(args.previous, args.first_run), file=sys.stderr)
    print(f"plan written to {out / args.stack}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
