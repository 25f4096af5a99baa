"""The showback command against local servers on 127.0.0.1: what a Prometheus (or something posing as
one) answers is input from outside. Each shape it may take, a server that trickles or never stops,
label values carrying terminal escapes or spreadsheet formulas, and URLs that are not http(s).

Every server loop here is bounded (a fixed number of bytes or answers), so a test that regresses
fails instead of hanging."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from components.observability import rules as r
from components.observability import showback
from components.observability.showback import PrometheusError, main, query

AT = datetime(2026, 12, 2, tzinfo=UTC)
PERIOD = ["--from", "2026-12-01", "--to", "2026-12-02"]


def vector(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    """An instant-vector answer as the Prometheus HTTP API writes it."""
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [AT.timestamp(), v]} for m, v in samples]},
    }


@contextmanager
def prometheus(answer: Callable[[str], Any]) -> Iterator[str]:
    """A fake Prometheus: ``answer(expr)`` is the JSON document (or ``bytes`` sent as they are)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            expr = urllib.parse.parse_qs(self.rfile.read(length).decode())["query"][0]
            doc = answer(expr)
            body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
            self.send_response(200)
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


@contextmanager
def raw_server(talk: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that reads the request head and then runs ``talk`` on the socket."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            sock.settimeout(5)
            got = b""
            for _ in range(1000):  # the request head and its small form body, read whole: unread bytes
                head, sep, body = got.partition(b"\r\n\r\n")  # at close would reset the connection
                length = next(
                    (int(h.split(b":", 1)[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")),
                    0,
                )
                if sep and len(body) >= length:
                    break
                chunk = sock.recv(4096)
                if not chunk:
                    return
                got += chunk
            with contextlib.suppress(OSError):  # the client hung up: what a deadline does
                talk(sock)
                sock.shutdown(socket.SHUT_WR)
                for _ in range(1000):  # until the client has read all and closed
                    if not sock.recv(4096):
                        break

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fleet(expr: str, team: str = "vision", currency: str = "EUR") -> dict[str, Any]:
    """A Prometheus holding the gpuaas rules: a 60 s step, 2 (hours, or cost) per series for one team,
    every kind it held priced."""
    if expr == r.STEP:
        return vector(({}, "60"))
    if "unless" in expr:  # the kinds without a price
        return vector()
    return vector(({"team": team, "currency": currency}, "2"))


# ----------------------------------------------------------------------------------------------
# Hangs and bounds (issue 35, item 18)


def _trickle(head: bytes, body: bytes, every: float) -> Callable[[socket.socket], None]:
    def talk(sock: socket.socket) -> None:
        sock.sendall(head)
        for byte in body:  # bounded: the body's length
            sock.sendall(bytes([byte]))
            time.sleep(every)

    return talk


_BODY = json.dumps(vector(({"team": "vision"}, "2"))).encode()
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(_BODY)


def test_a_server_trickling_its_body_meets_the_deadline() -> None:
    # One byte every 50 ms: the whole answer takes about 6 s, each read well inside any read timeout.
    with raw_server(_trickle(_HEAD, _BODY, 0.05)) as url, pytest.raises(PrometheusError) as err:
        query(url, "up", AT, deadline=0.5)
    assert str(err.value) == f"Prometheus at {url} did not answer within 0.5 s; stopped waiting"


def test_a_server_trickling_its_headers_meets_the_deadline() -> None:
    with raw_server(_trickle(b"", _HEAD + _BODY, 0.05)) as url, pytest.raises(PrometheusError) as err:
        query(url, "up", AT, deadline=0.5)
    assert "did not answer within 0.5 s" in str(err.value)


def test_a_prompt_server_answers_within_the_deadline() -> None:
    # The allowed twin: the same answer at once is read.
    with raw_server(_trickle(_HEAD + _BODY, b"", 0)) as url:
        assert query(url, "up", AT, deadline=5) == [({"team": "vision"}, 2.0)]


def test_a_body_without_end_stops_at_the_size_bound() -> None:
    chunk = b" " * 65536

    def endless(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        for _ in range(64):  # 4 MiB at most: four times the bound the client is given
            sock.sendall(chunk)

    with raw_server(endless) as url, pytest.raises(PrometheusError) as err:
        query(url, "up", AT, max_body=1024 * 1024)
    assert str(err.value) == f"Prometheus at {url} answered more than 1048576 bytes; stopped reading"


def test_a_body_within_the_bound_is_read() -> None:
    padded = _BODY + b" " * (1024 * 1024 - len(_BODY))  # JSON allows trailing whitespace: exactly the bound
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(padded)
    with raw_server(_trickle(head + padded, b"", 0)) as url:
        assert query(url, "up", AT, max_body=1024 * 1024) == [({"team": "vision"}, 2.0)]


def test_the_default_bounds_hold_a_large_fleet() -> None:
    # 50 000 teams' samples (far past the scale benchmarks' 1024) fit in the default body bound.
    many = json.dumps(vector(*[({"team": f"team-{i:05d}", "currency": "EUR"}, "12.5") for i in range(50_000)]))
    assert len(many) < showback.MAX_BODY


# ----------------------------------------------------------------------------------------------
# Answers of another shape (item 17): one line, exit 1, never a traceback


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"status": "success"}, "answered success without data.result"),
        ([1, 2], "answered something that is not a JSON object"),
        (b"not json", "answered something that is not a JSON object"),
        ({"status": "success", "data": {"result": {"a": 1}}}, "answered success without data.result"),
        ({"status": "success", "data": {"result": [{"metric": {}}]}}, "answered a sample that is not"),
        ({"status": "success", "data": {"result": [{"metric": {}, "value": [1]}]}}, "answered a sample that is not"),
        ({"status": "success", "data": {"result": [42]}}, "answered a sample that is not"),
        (vector(({}, "sixty")), "answered a sample whose value is not a number: 'sixty'"),
        (vector(({}, "0")), f"answered {r.STEP} = 0.0; a step is positive seconds"),
        (vector(({}, "NaN")), f"answered {r.STEP} = nan; a step is positive seconds"),
        ({"status": "error", "error": "bad\x1b[2J"}, "answered an error: bad\\x1b[2J"),
    ],
)
def test_an_answer_of_another_shape_is_one_line(answer: Any, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(lambda expr: answer) as url:
        assert main(["--prometheus", url, *PERIOD]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"showback: Prometheus at {url} ") and why in err[-1]
    assert "Traceback" not in "\n".join(err)


def test_an_answer_of_the_api_shape_makes_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(fleet) as url:
        assert main(["--prometheus", url, *PERIOD]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "team",
        "allocated",
        "GPU-h",
        "used",
        "GPU-h",
        "borrowed",
        "GPU-h",
        "lent",
        "GPU-h",
        "cost",
    ]
    # The hours are summed in PromQL: each answer (2) is a team's figure as it is.
    assert out[1].split() == ["vision", *(["2.00"] * 4), "2.00", "EUR"]


# ----------------------------------------------------------------------------------------------
# What is printed from labels, and which URLs are read (item 20)


def test_terminal_escapes_in_label_values_are_written_out(capsys: pytest.CaptureFixture[str]) -> None:
    evil = "vision\x1b]0;owned\x07\x1b[2J\x9b31m"

    with prometheus(lambda expr: fleet(expr, evil, "E\x1bUR")) as url:
        assert main(["--prometheus", url, *PERIOD]) == 0
        table = capsys.readouterr().out
        assert main(["--prometheus", url, *PERIOD, "--csv"]) == 0
        csv_text = capsys.readouterr().out
    for text in (table, csv_text):
        assert not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F for c in text)
        assert "vision\\x1b]0;owned\\x07\\x1b[2J\\x9b31m" in text and "E\\x1bUR" in text


@pytest.mark.parametrize("team", ['=HYPERLINK("http://x.invalid")', "+1+1", "-2+3", "@SUM(A1)", "-cmd|' /C calc'!A0"])
def test_a_csv_cell_a_spreadsheet_would_run_is_quoted(team: str, capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(lambda expr: fleet(expr, team, "=EUR")) as url:
        assert main(["--prometheus", url, *PERIOD, "--csv"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    cells = row.split(",")
    assert cells[0].strip('"').startswith("'") and cells[-1] == "'=EUR"


def test_a_plain_csv_cell_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    # The allowed twin: ordinary names and numbers are written as they are.
    with prometheus(fleet) as url:
        assert main(["--prometheus", url, *PERIOD, "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "vision,2.00,2.00,2.00,2.00,2.00,EUR"


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://prometheus:21", "data:,{}", "prometheus:9090", "http://", "http://x:port"]
)
def test_only_http_urls_are_read(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--prometheus", url, *PERIOD]) == 1
    err = capsys.readouterr().err
    assert err.startswith("showback: --prometheus ") and "Traceback" not in err


@pytest.mark.parametrize("scheme", ["http", "HTTP"])
def test_http_urls_are_read(scheme: str, capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(fleet) as url:
        assert main(["--prometheus", url.replace("http", scheme, 1) + "/", *PERIOD]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("vision")
