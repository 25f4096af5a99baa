"""A Go module of the e2e tools and the binaries built from it: the types, the go commands, the cache.

What :mod:`e2e.toolsets` declares and :mod:`e2e.toolchain` builds share this: a set's pinned
version read from its go.mod, the versions ``go list`` resolves, the cache directory keyed by
what decides the binaries. Kept apart from the build so that the set definitions (which read
module zips for stamps and stages) and the builder import it without importing each other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

E2E = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Target:
    """One binary: its name in the cache, the package to build, and its version stamp."""

    name: str
    package: str
    ldflags: Callable[[dict[str, str]], list[str]] = lambda _v: []
    # Set for a file that is copied from the Go module cache instead of built (a script that
    # upstream ships next to a binary): returns its path there.
    copy_from: Callable[[ToolSet], Path] | None = None
    # Set for a file written from what the module holds (KWOK's default stages): its text.
    render: Callable[[ToolSet], str] | None = None
    # Names this binary also answers to (a multi-call binary dispatching on argv[0]): symlinks
    # to it in the bin directory.
    links: tuple[str, ...] = ()
    # Go build tags (``go build -tags``).
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ToolSet:
    """A Go module under ``e2e/`` and the binaries built from it."""

    name: str
    module_dir: Path
    # The module whose required version names the set (k8s.io/kubernetes, ...).
    version_of: str
    targets: tuple[Target, ...]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    # Writes files the build needs that upstream generates (paths under module_dir, gitignored,
    # listed in ``generated`` so that they stay out of the cache key).
    prepare: Callable[[ToolSet], None] | None = None
    generated: tuple[str, ...] = ()
    # Files outside the module that decide a target too (requirements.txt's SDK pin).
    key_files: tuple[Path, ...] = ()
    # Called first (by the cache key, so before any go command): checks and links what the set
    # builds from outside the repository (the upstream sources its replace directives name),
    # fails with SystemExit naming what is missing, and returns bytes that join the cache key.
    stage: Callable[[ToolSet], bytes] | None = None
    # The go.mod this set builds with, in module_dir: another than ``go.mod`` is passed as
    # ``-modfile`` (its go.sum is the same name with ``.sum``), so several sets share one
    # directory of sources (the control plane of each Kubernetes minor).
    modfile: str = "go.mod"
    # The set's name in the cache directory (default: ``name``); the version follows it.
    cache_name: str = ""

    @property
    def modflags(self) -> list[str]:
        return [] if self.modfile == "go.mod" else [f"-modfile={self.modfile}"]

    @property
    def sumfile(self) -> str:
        return self.modfile.removesuffix(".mod") + ".sum"


def say(msg: str) -> None:
    print(f"toolchain: {msg}", file=sys.stderr, flush=True)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    # Never a workspace of the caller's: each set's go.mod alone decides what is built.
    env["GOWORK"] = "off"
    env.setdefault("GOFLAGS", "-mod=readonly")
    return env


def required_versions(ts: ToolSet) -> dict[str, str]:
    """Module path -> version of every requirement in the set's go.mod (the replace targets win)."""
    out = subprocess.run(
        ["go", "list", *ts.modflags, "-m", "-json", "all"],
        cwd=ts.module_dir,
        env=go_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    versions: dict[str, str] = {}
    for chunk in _json_stream(out):
        rep = chunk.get("Replace") or {}
        versions[str(chunk["Path"])] = str(rep.get("Version") or chunk.get("Version", ""))
    return versions


def _json_stream(text: str) -> list[dict[str, Any]]:
    dec = json.JSONDecoder()
    i, items = 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        items.append(obj)
    return items


def cache_root() -> Path:
    return Path(os.environ.get("GPUAAS_TOOLS_CACHE") or Path.home() / ".cache" / "gpuaas-tools")


def _go_version() -> str:
    return subprocess.run(
        ["go", "env", "GOVERSION"], env=go_env(), check=True, capture_output=True, text=True
    ).stdout.strip()


def cache_key(ts: ToolSet) -> str:
    """A hash of everything that decides the binaries: the set's go.mod and go.sum, our sources
    and build settings (targets, tags, links), Go itself."""
    staged = ts.stage(ts) if ts.stage is not None else b""
    h = hashlib.sha256(_go_version().encode())
    if staged:
        h.update(staged)
    skip = {ts.module_dir / g for g in ts.generated}
    for f in sorted(ts.module_dir.rglob("*")):
        if f in skip or not f.is_file():
            continue
        if f.suffix in {".go", ".json"} or f.name in {ts.modfile, ts.sumfile}:
            h.update(str(f.relative_to(ts.module_dir)).encode())
            h.update(f.read_bytes())
    for f in ts.key_files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    # Links and tags change what is built from the same files (hashed only where set, so the
    # keys of the sets without them stay as they were).
    extras = [(t.name, t.links, t.tags) for t in ts.targets if t.links or t.tags]
    if extras:
        h.update(repr(extras).encode())
    return h.hexdigest()[:12]


def pinned_version(ts: ToolSet) -> str:
    """The version the set is named for, read from its go.mod without running go (cheap)."""
    text = (ts.module_dir / ts.modfile).read_text()
    m = re.search(rf"^\s*(?:require\s+)?{re.escape(ts.version_of)}\s+(v\S+)", text, re.M)
    if not m:
        raise SystemExit(f"toolchain: {ts.module_dir}/{ts.modfile} does not require {ts.version_of}")
    return m.group(1)


def bin_dir(ts: ToolSet) -> Path:
    return cache_root() / f"{ts.cache_name or ts.name}-{pinned_version(ts)}-{cache_key(ts)}" / "bin"


def names(ts: ToolSet) -> list[str]:
    return [n for t in ts.targets for n in (t.name, *t.links)]


def download_json(module: str, version: str, cwd: Path) -> dict[str, str]:
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env=go_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    info: dict[str, str] = json.loads(res.stdout)
    return info
