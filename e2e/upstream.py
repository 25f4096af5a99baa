"""The upstream fixtures folder: where it is, and that what a test reads from it is upstream's.

Tests validate our objects against upstream CRDs, chart values and schemas, and the e2e suite
installs upstream charts and CRDs. They all read one folder: ``$GPUAAS_UPSTREAM`` when set (``make
UPSTREAM=...`` sets it), else ``<repo>/../shared/upstream``. Nothing is downloaded: a machine
without the folder fails the suite naming the folder and the variable, unless
``GPUAAS_WITHOUT_UPSTREAM=1`` says on purpose that what needs it does not run (and the run says so
in its last line, see ``tests/conftest.py``).

Every file read through :func:`require` (or a path formed from :func:`root`) is checked against
the blob id the folder itself records for it: ``MANIFEST-charts-src.tsv`` (whole charts and
sources) and the tables of its ``README.md`` (single files), each the id of ``git cat-file blob``
at the upstream commit. The id is ``git hash-object``'s: SHA-1 over ``blob <size>\\0`` and the
bytes, computed here so that no git is needed. A file the index does not list, or whose bytes
differ, is not upstream's and fails the test that reads it.

Pure standard library: importable by the unit tests, the e2e harness and ``make cluster`` alike.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
from pathlib import Path

ENV = "GPUAAS_UPSTREAM"
OPT_OUT = "GPUAAS_WITHOUT_UPSTREAM"
MANIFEST = "MANIFEST-charts-src.tsv"
INDEX = "README.md"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT.parent / "shared" / "upstream"

#: A row of the README's tables: the file in backticks first, its blob id last.
_README_ROW = re.compile(r"^\| `(?P<path>[^`]+)` \|.*\| (?P<blob>[0-9a-f]{40}) \|\s*$")


class UpstreamError(Exception):
    """An upstream fixture that cannot be used: the folder is absent, a file is missing or not upstream's."""


class UpstreamAbsentError(UpstreamError):
    """The folder itself (its index) is not there: the one case the opt-out turns into a skip."""


def upstream_dir() -> Path:
    """``$GPUAAS_UPSTREAM`` (relative to the working directory) or ``<repo>/../shared/upstream``."""
    value = os.environ.get(ENV, "")
    return Path(value).absolute() if value else DEFAULT


def opted_out() -> bool:
    """``GPUAAS_WITHOUT_UPSTREAM=1``: the run skips what needs the folder, and says so."""
    return os.environ.get(OPT_OUT, "") == "1"


def absent_message(folder: Path | None = None) -> str:
    folder = folder or upstream_dir()
    source = f"${ENV}" if os.environ.get(ENV) else f"the default; set {ENV} to use another folder"
    return (
        f"the upstream fixtures folder {folder} ({source}) is absent or incomplete (no {MANIFEST} and {INDEX}): "
        f"the tests that validate against upstream charts, CRDs and schemas cannot run. Point {ENV} "
        f"(make UPSTREAM=...) at a copy of shared/upstream, or set {OPT_OUT}=1 to run without them "
        "(the run then says what did not run); nothing is downloaded"
    )


def present(folder: Path | None = None) -> bool:
    folder = folder or upstream_dir()
    return (folder / MANIFEST).is_file() and (folder / INDEX).is_file()


def blob_id(data: bytes) -> str:
    """``git hash-object`` of ``data`` (a blob, no filters)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


_INDEXES: dict[Path, dict[str, str]] = {}
_CHECKED: set[Path] = set()


def blob_ids(folder: Path | None = None) -> dict[str, str]:
    """Path relative to the folder -> blob id, from the manifest and the README's tables."""
    folder = folder or upstream_dir()
    if folder not in _INDEXES:
        if not present(folder):
            raise UpstreamAbsentError(absent_message(folder))
        ids: dict[str, str] = {}
        lines = (folder / MANIFEST).read_text(encoding="utf-8").splitlines()
        header = lines[0].split("\t") if lines else []
        if header[:1] != ["local_path"] or header[-1:] != ["blob"]:
            raise UpstreamError(f"{folder / MANIFEST}: not the manifest this suite reads (header {header})")
        for n, line in enumerate(lines[1:], start=2):
            cols = line.split("\t")
            if len(cols) != len(header) or not re.fullmatch(r"[0-9a-f]{40}", cols[-1]):
                raise UpstreamError(f"{folder / MANIFEST}:{n}: not a manifest row: {line!r}")
            ids[cols[0]] = cols[-1]
        for line in (folder / INDEX).read_text(encoding="utf-8").splitlines():
            if m := _README_ROW.match(line):
                ids[m["path"]] = m["blob"]
        _INDEXES[folder] = ids
    return _INDEXES[folder]


def _check_file(folder: Path, path: Path, ids: dict[str, str]) -> None:
    real = path.resolve()
    if real in _CHECKED:
        return
    rel = path.relative_to(folder).as_posix()
    if rel not in ids:
        raise UpstreamError(f"{path} is not an upstream file: neither {MANIFEST} nor {INDEX} in {folder} lists {rel}")
    got = blob_id(path.read_bytes())
    if got != ids[rel]:
        raise UpstreamError(f"{path} differs from upstream: blob {got}, {folder.name}'s index says {ids[rel]}")
    _CHECKED.add(real)


def check(path: Path, folder: Path | None = None) -> Path:
    """Check ``path`` (a file, or every file under a folder) against the index; return it."""
    folder = folder or upstream_dir()
    ids = blob_ids(folder)
    if path.parent == folder and path.name in (MANIFEST, INDEX):
        pass  # the index itself
    elif path.is_file():
        _check_file(folder, path, ids)
    elif path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.is_file() and not (f.parent == folder and f.name in (MANIFEST, INDEX)):
                _check_file(folder, f, ids)
    else:
        rel = path.relative_to(folder) if path.is_relative_to(folder) else path
        raise UpstreamError(f"{rel} is not in the upstream fixtures folder {folder} (${ENV})")
    return path


def require(relpath: str | Path) -> Path:
    """The file or folder ``relpath`` of the upstream folder, checked; raises :class:`UpstreamError`
    naming the folder and the variable where it cannot be used."""
    return _require_in(upstream_dir(), relpath)


def _require_in(folder: Path, relpath: str | Path) -> Path:
    if not present(folder):
        raise UpstreamAbsentError(absent_message(folder))
    rel = Path(relpath)
    if rel.is_absolute() or ".." in rel.parts:
        raise UpstreamError(f"{relpath}: a path inside the upstream folder is relative and has no '..'")
    return check(folder / rel, folder)


class CheckedPath(pathlib.PosixPath):
    """A path under the upstream folder whose children are checked as they are formed: ``root() /
    "kueue/v0.19.2/crds"`` checks every file there, so tests that join paths read only upstream bytes."""

    _folder: Path | None = None  # the folder it was formed from (paths pathlib derives have none)

    def __truediv__(self, key: str | os.PathLike[str]) -> CheckedPath:
        return _checked(self._folder or upstream_dir(), super().__truediv__(key))

    def joinpath(self, *other: str | os.PathLike[str]) -> CheckedPath:
        return _checked(self._folder or upstream_dir(), super().joinpath(*other))


def _checked(folder: Path, path: pathlib.PosixPath) -> CheckedPath:
    if not Path(path).is_relative_to(folder):
        raise UpstreamError(f"{path} is outside the upstream fixtures folder {folder} (${ENV})")
    _require_in(folder, Path(path).relative_to(folder))
    checked = CheckedPath(path)
    checked._folder = folder
    return checked


def root() -> CheckedPath:
    """The upstream folder itself (present, or :class:`UpstreamAbsentError`), as a :class:`CheckedPath`."""
    folder = upstream_dir()
    if not present(folder):
        raise UpstreamAbsentError(absent_message(folder))
    checked = CheckedPath(folder)
    checked._folder = folder
    return checked
