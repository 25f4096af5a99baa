"""Compare two offline plans: what was added, changed and removed, per team and per component.

``python -m components.plandiff --stack onprem --base <git ref | plan folder> [--head <plan folder>]``
(``make diff BASE=…``) plans the base (a git ref is exported with ``git archive`` and planned with
its own code) and the working tree (with the base's outputs as the stack's last run, so the
day-2 guards fire as in ``pulumi up``), then prints:

1. the counts, then per team and per component the files added (``+``), changed (``~``) and
   removed (``-``) — grouped by the plan's ``index.yaml``;
2. the unified diff of every changed file (``--- base/<path>`` / ``+++ head/<path>``).

Exit status: 0 no change, 1 changes (like ``diff``), 2 a problem. The report, and both plan
trees, are written under ``--out`` (``plan.diff``, ``base/``, ``head/``).
"""

from __future__ import annotations

import argparse
import difflib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import yaml

from components.model.errors import ConfigError, Issue
from components.plan.index import INDEX
from components.plan.offline import ROOT
from components.plan.previous import read_previous
from components.plan.stdout import emit
from components.plan.writer import GUARDS_PREFIX, PLAN_MARKERS, WARNING, plan_target, write_plan

SUMMARY = "summary.txt"
#: Files every plan has that say nothing an object diff does not (the summary is read on its own).
_NOT_OBJECTS = (INDEX,)


def read_tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (a plan folder), relative path → text; ``{}`` when it is absent."""
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _index(files: Mapping[str, str]) -> dict[str, dict[str, str]]:
    try:
        data = yaml.safe_load(files.get(INDEX, "")) or {}
    except (yaml.YAMLError, ValueError):  # ValueError: an int past Python's 4300-digit limit
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


@dataclass
class PlanDiff:
    """Paths added, changed and removed between two plan trees, and whom each belongs to."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    owner: dict[str, tuple[str | None, str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)


def compare(base: Mapping[str, str], head: Mapping[str, str]) -> PlanDiff:
    """Pure: the file-level diff of two plans, each path owned by (team, component).

    Owners come from the head's index, then the base's (a removed file is only in the base);
    a plan written before plans had an index groups its files under ``(unindexed)``.
    """
    index = {**_index(base), **_index(head)}
    base, head = _comparable(base), _comparable(head)
    out = PlanDiff()
    for path in sorted(set(base) | set(head)):
        if path in _NOT_OBJECTS:
            continue
        if path not in base:
            out.added.append(path)
        elif path not in head:
            out.removed.append(path)
        elif base[path] != head[path]:
            out.changed.append(path)
        else:
            continue
        entry = index.get(path, {})
        team = entry.get("team")
        out.owner[path] = (str(team) if team else None, str(entry.get("component", "(unindexed)")))
    return out


def _comparable(files: Mapping[str, str]) -> dict[str, str]:
    """The files as compared: the summary without its day-2 guards line, which says what this plan was
    compared against (nothing for a base planned on its own, the base for the head), not what it holds."""
    out = dict(files)
    if SUMMARY in out:
        out[SUMMARY] = "".join(
            line for line in out[SUMMARY].splitlines(keepends=True) if not line.startswith(GUARDS_PREFIX)
        )
    return out


def _counts(added: int, changed: int, removed: int) -> str:
    return f"{added} added, {changed} changed, {removed} removed"


def render(diff: PlanDiff, base: Mapping[str, str], head: Mapping[str, str], title: str) -> str:
    """The report: counts, the grouped file list, then the unified diffs."""
    lines = [title, _counts(len(diff.added), len(diff.changed), len(diff.removed))]
    # What the head's summary says a reviewer must read first (a deploy the plan cannot have).
    lines += [line for line in head.get(SUMMARY, "").splitlines() if line.startswith(WARNING)]
    if diff.empty:
        lines.append("No change to the offline plan.")
        return "\n".join(lines) + "\n"
    base, head = _comparable(base), _comparable(head)
    marks = {**dict.fromkeys(diff.added, "+"), **dict.fromkeys(diff.changed, "~"), **dict.fromkeys(diff.removed, "-")}
    groups: dict[tuple[int, str], list[str]] = defaultdict(list)
    for path in sorted(marks):
        team, component = diff.owner[path]
        key = (0, f"team {team}") if team else (1, f"component {component}")
        groups[key].append(path)
    for (_order, name), paths in sorted(groups.items()):
        n = [sum(marks[p] == m for p in paths) for m in "+~-"]
        lines += ["", f"{name}: {_counts(*n)}"]
        for path in paths:
            team, component = diff.owner[path]
            suffix = f"  ({component})" if team else ""
            lines.append(f"  {marks[path]} {path}{suffix}")
    lines.append("")
    text = "\n".join(lines) + "\n"
    diffs = {
        path: list(
            difflib.unified_diff(
                base.get(path, "").splitlines(keepends=True),
                head.get(path, "").splitlines(keepends=True),
                fromfile=f"base/{path}" if path in base else "/dev/null",
                tofile=f"head/{path}" if path in head else "/dev/null",
            )
        )
        for path in sorted(marks)
    }
    for body in _long_lines_once(diffs).values():
        text += "".join(body)
        if not text.endswith("\n"):
            text += "\n\\ No newline at end of file\n"
    return text


def _changed(line: str) -> bool:
    """An added or removed line of a unified diff (not its ``---``/``+++`` header)."""
    return line[:1] in "+-" and not line.startswith(("+++ ", "--- "))


#: A changed line longer than this is shown once in the report (:func:`_long_lines_once`).
LONG_LINE = 200


def _long_lines_once(diffs: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Each long added or removed line in full once; where it recurs (indented or not) in another
    file, a pointer to it.

    partitions.conf is written three times (``opensm/partitions.conf``, the in-cluster SM's
    ConfigMap, the ``partitionsConf`` output), and each of its lines lists a partition's GUIDs on
    every HCA of every node (2,441 characters at 24 nodes): one team added showed each such line
    three times. The full line stays where it stands unindented (the file as a file, the one an
    operator loads), else in the first file that has it.
    """
    found: dict[tuple[str, str], list[tuple[str, bool]]] = defaultdict(list)
    for path, body in diffs.items():
        for line in body:
            if _changed(line) and len(line.strip()) > LONG_LINE:
                text = line[1:].rstrip("\n")
                found[(line[0], text.strip())].append((path, text == text.strip()))
    home = {key: next((p for p, unindented in where if unindented), where[0][0]) for key, where in found.items()}
    out: dict[str, list[str]] = {}
    for path, body in diffs.items():
        out[path] = []
        for line in body:
            key = (line[:1], line[1:].strip())
            if _changed(line) and key in home and home[key] != path:
                indent = line[1 : len(line) - len(line[1:].lstrip())]
                out[path].append(
                    f"{line[0]}{indent}… the same {len(key[1])}-character line as in {home[key]} (shown there once)\n"
                )
            else:
                out[path].append(line)
    return out


# --------------------------------------------------------------------------------------------
# The shell: plan a git ref or take a folder


def _plan_folder(folder: Path, stack: str) -> Path | None:
    """``folder`` itself or ``folder/<stack>`` when it holds a plan (its marker files)."""
    for candidate in (folder, folder / stack):
        if all((candidate / m).is_file() for m in PLAN_MARKERS):
            return candidate
    return None


def resolve_ref(ref: str) -> str:
    """The commit ``ref`` names, checked the way git does (``git rev-parse --verify``), as a full id.

    A pull request controls the base it is diffed against: a value like ``--output=FILE`` must
    never reach git as an option (``git archive`` would write FILE), so it is refused here, and
    only the commit id this returns is handed on.
    """
    if not ref or ref.startswith("-") or any(ord(c) < 0x20 or c in "\x7f" for c in ref):
        raise ConfigError([Issue("--base", f"{ref!r} is neither a plan folder nor a git ref")])
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    commit = found.stdout.strip()
    if found.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        raise ConfigError(
            [Issue("--base", f"{ref!r} is neither a plan folder nor a git ref (git rev-parse --verify refuses it)")]
        )
    return commit


def extract(archive: bytes, into: Path) -> list[str]:
    """Unpack a ``git archive`` tar into ``into``; the members left out, by name.

    tarfile's ``data`` filter refuses what could write outside ``into`` (an absolute symlink, a link
    out of the tree, a device), and it raises on the first such member (``AbsoluteLinkError``), which
    ended every diff against a commit holding one. A commit's links are never what its plan reads
    (the program and stack files are regular files), so such a member is left out, and the rest
    extracted; if the plan did need it, planning the base fails and says so.
    """
    skipped: list[str] = []

    def data_only(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, path)
        except tarfile.FilterError:
            skipped.append(member.name)
            return None

    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter=data_only)
    except tarfile.TarError as err:
        raise ConfigError([Issue("--base", f"git archive gave a tar that cannot be read ({err})")]) from None
    return skipped


def plan_ref(ref: str, stack: str, out: Path, first_run: bool = False) -> Path | None:
    """Plan ``stack`` as commit ``ref`` has it, with that commit's own code, into ``out/<stack>``.

    Returns the plan folder, or ``None`` when the commit has no such stack and ``first_run`` says
    this change adds it (the diff is then against an empty plan). A base that has the stack but
    cannot plan it is a problem, not an empty plan: the day-2 guards would have nothing to check.
    """
    commit = resolve_ref(ref)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "--"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise ConfigError([Issue("--base", f"{ref!r}: git archive failed ({_first(archive.stderr)})")])
    with tempfile.TemporaryDirectory(prefix="gpuaas-base-") as tmp:
        extract(archive.stdout, Path(tmp))
        if not (Path(tmp) / f"Pulumi.{stack}.yaml").is_file():
            if first_run:
                return None
            raise ConfigError(
                [
                    Issue(
                        "--base",
                        f"{ref} has no Pulumi.{stack}.yaml: if this change adds stack {stack}, say so with "
                        "--first-run (make diff FIRST_RUN=1); otherwise diff against a base that has it",
                    )
                ]
            )
        proc = subprocess.run(
            [sys.executable, "-m", "components.plan", "--out", str(out), "--quiet", "--", stack],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        raise ConfigError(
            [Issue("--base", f"{ref} could not plan stack {stack} with its own code: {_first(proc.stderr.encode())}")]
        )
    return out / stack


def _first(stderr: bytes) -> str:
    text = stderr.decode(errors="replace").strip().splitlines()
    return text[-1] if text else "no message"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plandiff", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="onprem")
    parser.add_argument("--base", default="HEAD", help="a git ref (planned with its own code) or a plan folder")
    parser.add_argument("--head", type=Path, help="a plan folder (default: plan the working tree)")
    parser.add_argument(
        "--stack-file", type=Path, help="plan the head from this file instead of the working tree's Pulumi.<stack>.yaml"
    )
    parser.add_argument("--out", type=Path, help="where base/, head/ and plan.diff go (default: plan/diff-<stack>)")
    parser.add_argument("--quiet", action="store_true", help="write plan.diff, print only the counts")
    parser.add_argument(
        "--first-run",
        action="store_true",
        help="this change adds the stack: a base without it diffs as an empty plan (the guards have no last run)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out or ROOT / "plan" / f"diff-{args.stack}"

    try:
        plan_target(args.stack, out)  # a stack name, never a path
        out.mkdir(parents=True, exist_ok=True)
        warning = ""
        planned_here = False
        base_dir = _plan_folder(Path(args.base), args.stack) if Path(args.base).is_dir() else None
        if base_dir is None and Path(args.base).is_dir():
            raise ConfigError([Issue("--base", f"{args.base} holds no plan of stack {args.stack}")])
        if base_dir is None:
            base_dir = plan_ref(args.base, args.stack, out / "base", args.first_run)
            planned_here = base_dir is not None
            if base_dir is None:
                warning = f"{args.base} has no stack {args.stack} (--first-run)"
        base = read_tree(base_dir) if base_dir is not None else {}
        if args.head is not None:
            head_dir = _plan_folder(args.head, args.stack)
            if head_dir is None:
                raise ConfigError([Issue("--head", f"{args.head} holds no plan of stack {args.stack}")])
        else:
            # The base's outputs stand for the stack's last run (day-2 guards); one this tool planned
            # itself with older code carries no stamp, but is this stack's (components/plan/previous.py).
            last = None
            if base_dir is not None:
                last = read_previous(
                    base_dir / "outputs.yaml", args.stack, planned_as=args.stack if planned_here else None
                )
            write_plan(args.stack, out / "head", args.stack_file, previous=last, first_run=last is None)
            head_dir = out / "head" / args.stack
        head = read_tree(head_dir)
    except ConfigError as err:
        print(err.render(), file=sys.stderr)
        return 2
    except pulumi.RunError as err:  # a day-2 guard stopped the head plan
        print(str(err), file=sys.stderr)
        return 2
    except OSError as err:  # git missing, a folder not writable
        print(f"gpuaas: {err}", file=sys.stderr)
        return 2
    if warning:
        print(f"warning: {warning}; diffing against an empty plan", file=sys.stderr)
    diff = compare(base, head)
    report = render(
        diff, base, head, f"Plan diff of stack {args.stack}: base {args.base}, head {args.head or 'working tree'}"
    )
    (out / "plan.diff").write_text(report)
    if not emit(report.splitlines()[1] + "\n" if args.quiet else report):
        return 2
    return 0 if diff.empty else 1


if __name__ == "__main__":
    raise SystemExit(main())
