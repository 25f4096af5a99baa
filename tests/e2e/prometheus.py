"""The real promtool and prometheus (tool set ``prometheus`` of e2e/toolchain.py, built from the Go module)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from e2e import toolchain


def bin_dir() -> Path:
    """The tool set's bin directory (built first if the cache lacks it); its absence fails the test."""
    ts = toolchain.TOOLSETS.get("prometheus")
    if ts is None:
        pytest.fail("e2e/toolchain.py has no `prometheus` tool set (github.com/prometheus/prometheus v0.316.0)")
    return toolchain.build(ts)


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir() / "promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def prometheus(data: Path, config: str = "global: {}\n") -> Iterator[str]:
    """A real Prometheus on loopback over the TSDB in ``data``; yields its URL."""
    port = _free_port()
    (data.parent / "prometheus.yml").write_text(config)
    log = (data.parent / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            str(bin_dir() / "prometheus"),
            f"--config.file={data.parent / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not become ready: {(data.parent / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def parse_query(url: str, expr: str) -> dict[str, Any]:
    """The real PromQL parser's AST of ``expr`` (Prometheus' /api/v1/parse_query), or its error."""
    body = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(f"{url}/api/v1/parse_query", data=body, timeout=30) as r:
            out: dict[str, Any] = json.load(r)
    except urllib.error.HTTPError as e:
        out = json.load(e)
    return out


def selector_names(ast: Any) -> set[str]:
    """Every metric name a parsed expression selects (vector and matrix selectors)."""
    names: set[str] = set()
    if isinstance(ast, dict):
        if ast.get("type") in ("vectorSelector", "matrixSelector") and ast.get("name"):
            names.add(str(ast["name"]))
        for v in ast.values():
            names |= selector_names(v)
    elif isinstance(ast, list):
        for v in ast:
            names |= selector_names(v)
    return names
