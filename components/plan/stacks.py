"""The stacks of a checkout: every ``Pulumi.<stack>.yaml`` beside ``Pulumi.yaml``, whatever it holds.

The two checked-in stacks are examples: a platform team replaces them with its own clusters or adds
more (docs/notes/own-stacks.md). So nothing names them: ``make plans``, the pull-request workflow's
stack matrix (``python -m components.plan.stacks --github-matrix``), ``make cluster`` and the
benchmarks take the list from here, and the tests plan stack files of their own (``tests/stacks``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from components.loader import read_stack_file
from components.model.errors import ConfigError
from components.model.grammar import stack_name_problem

ROOT = Path(__file__).resolve().parents[2]

PREFIX, SUFFIX = "Pulumi.", ".yaml"


def stack_names(root: Path = ROOT) -> list[str]:
    """Every stack with a ``Pulumi.<stack>.yaml`` in ``root``, sorted.

    ``Pulumi.yaml`` (the project) is not a stack; a file whose middle is no Pulumi stack name (say
    ``Pulumi.a b.yaml``) is listed too, so that the plan tool refuses it by name instead of a list
    that silently leaves it out.
    """
    names = [p.name[len(PREFIX) : -len(SUFFIX)] for p in root.glob(f"{PREFIX}*{SUFFIX}") if p.is_file()]
    return sorted(n for n in names if n)


def platform_kind(root: Path, stack: str) -> str:
    """``gpuaas:platform.kind`` of a stack file (``onprem``, ``aks``), or ``unknown`` when it says none."""
    try:
        platform = read_stack_file(root / f"{PREFIX}{stack}{SUFFIX}").get("gpuaas:platform")
    except ConfigError:
        return "unknown"  # the plan diff of that stack names the problem
    kind = platform.get("kind") if isinstance(platform, dict) else None
    return kind if isinstance(kind, str) else "unknown"


def github_matrix(root: Path = ROOT) -> list[dict[str, str]]:
    """One ``{stack, kind}`` per stack: the pull-request workflow's matrix (the kind picks the credentials)."""
    return [{"stack": s, "kind": platform_kind(root, s)} for s in stack_names(root)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.plan.stacks", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the project folder (default: this checkout)")
    parser.add_argument(
        "--github-matrix", action="store_true", help="print a JSON list of {stack, kind} (the workflow's matrix)"
    )
    args = parser.parse_args(argv)
    names = stack_names(args.root)
    bad = [f"{PREFIX}{n}{SUFFIX}: {p}" for n in names if (p := stack_name_problem(n))]
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 2
    if not names:
        print(f"no {PREFIX}<stack>{SUFFIX} in {args.root}", file=sys.stderr)
        return 2
    print(json.dumps(github_matrix(args.root)) if args.github_matrix else "\n".join(names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
