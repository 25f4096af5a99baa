"""Every command block the docs mark runs, from the page itself, against the stacks the tests own.

A page's blocks run in order in a fresh copy of the repository's files; ``<!-- docs-test: file
NAME -->`` writes the YAML block after it to NAME, ``<!-- docs-test: run -->`` runs the sh block
after it with ``bash -euo pipefail``, with ``PROMETHEUS`` the URL of a stand-in Prometheus on
127.0.0.1 (for the showback commands; it answers every query with one sample of team ``vision``).
The copy's ``Pulumi.onprem.yaml`` and ``Pulumi.aks.yaml`` are the tests' own stacks where they
exist (:func:`tests.docs.pages.test_stack_file`), so a team that makes the root stacks its own
still passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.plan.offline import ROOT
from tests.docs.pages import Block, marked_blocks, pages, test_stack_file

PAGES = [p for p in pages() if marked_blocks(p)]


def sandbox(tmp_path: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored), its virtualenv linked."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    root = tmp_path / "repo"
    for name in filter(None, listed.split("\0")):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)  # mtimes kept: make's stamps judge them as in the clone
    (root / ".venv").symlink_to((ROOT / ".venv").resolve())
    for stack in ("onprem", "aks"):
        shutil.copy2(test_stack_file(stack), root / f"Pulumi.{stack}.yaml")
    return root


#: What the stand-in Prometheus answers to every instant query: one hour of one GPU of team vision.
SAMPLE = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [{"metric": {"team": "vision", "node_group": "h100-full"}, "value": [1764633600, "1"]}],
    },
}


@contextmanager
def stand_in_prometheus() -> Iterator[str]:
    """A Prometheus HTTP API on 127.0.0.1 that answers every query with :data:`SAMPLE`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            asked = urllib.parse.parse_qs(self.rfile.read(length).decode()).get("query")
            body = json.dumps(SAMPLE if asked else {"status": "error", "error": "no query"}).encode()
            self.send_response(200 if asked else 400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run(block: Block, root: Path, prometheus: str = "") -> None:
    if block.action == "file":
        (root / block.argument).write_text(block.body)
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "GPUAAS_TODAY"))}
    env["PROMETHEUS"] = prometheus
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.where()}: exit {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def test_the_readme_marks_its_first_plan() -> None:
    """The five-minute path is run, not only shown: its file and its commands are marked."""
    actions = [(b.action, b.argument) for b in marked_blocks(ROOT / "README.md")]
    assert actions == [("file", "my-cluster.yaml"), ("run", "")]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_pages_commands_run(page: Path, tmp_path: Path) -> None:
    root = sandbox(tmp_path)
    with stand_in_prometheus() as prometheus:
        for block in marked_blocks(page):
            run(block, root, prometheus)
