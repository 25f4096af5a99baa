"""The offline plan reads a stack file as the Pulumi CLI does, or refuses what the two read differently
(issue 35, item 16).

The Pulumi CLI (pulumi/pulumi v3.274.0, ``sdk/go/common/encoding/marshal.go``) reads stack files
with ``gopkg.in/yaml.v3`` v3.0.1; the plan with PyYAML (YAML 1.1). :data:`GO_YAML` is what yaml.v3
v3.0.1 itself answered for ``yaml.Unmarshal([]byte("k: " + s), &v)`` (a Go program against the
module cache, run on 2026-12-04: Go type and ``%v`` of ``v["k"]``), so the port is checked against
the real decoder, not against itself.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from components.loader import read_stack_file
from components.model import goyaml
from components.model.errors import ConfigError

#: text → (Go type, value) as yaml.v3 v3.0.1 decoded it into ``any``.
GO_YAML: dict[str, tuple[str, Any]] = {
    "1:30": ("str", "1:30"),
    "1:0": ("str", "1:0"),
    "2:30": ("str", "2:30"),
    "on": ("str", "on"),
    "no": ("str", "no"),
    "yes": ("str", "yes"),
    "Off": ("str", "Off"),
    "y": ("str", "y"),
    "true": ("bool", True),
    "TRUE": ("bool", True),
    "~": ("null", None),
    "0o17": ("int", 15),
    "0O17": ("int", 15),
    "1_000": ("int", 1000),
    "1__0": ("int", 10),
    "-_1": ("int", -1),
    "0777": ("int", 511),
    "00": ("int", 0),
    "0x1F": ("int", 31),
    "0X1F": ("int", 31),
    "-0x1F": ("int", -31),
    "0x_1f": ("int", 31),
    "0b_1": ("int", 1),
    "-0b101": ("int", -5),
    "0b-101": ("int", -5),
    "+12": ("int", 12),
    "9223372036854775808": ("int", 9223372036854775808),  # uint64
    "18446744073709551616": ("float", 1.8446744073709552e19),
    "1e3": ("float", 1000.0),
    "0.5e3": ("float", 500.0),
    "1.5e+3": ("float", 1500.0),
    "09": ("float", 9.0),
    "08": ("float", 8.0),
    "1.": ("float", 1.0),
    ".5": ("float", 0.5),
    ".5_0": ("float", 0.5),
    "+.inf": ("float", math.inf),
    "1e-999": ("float", 0.0),
    "1.0e+999": ("str", "1.0e+999"),
    "2026-13-01": ("str", "2026-13-01"),
    "=": ("str", "="),
    "2026-12-01": ("timestamp", "2026-12-01"),
    "2026-12-01T10:00:00Z": ("timestamp", "2026-12-01T10:00:00Z"),
}


@pytest.mark.parametrize(("text", "expected"), list(GO_YAML.items()), ids=list(GO_YAML))
def test_the_port_reads_a_plain_scalar_as_yaml_v3_does(text: str, expected: tuple[str, Any]) -> None:
    kind, value = goyaml.go_scalar(text)
    assert kind == expected[0]
    assert value == expected[1] and type(value) is type(expected[1])


def _stack(tmp_path: Path, line: str) -> Path:
    f = tmp_path / "Pulumi.t.yaml"
    f.write_text(f"config:\n  gpuaas:teams:\n    - name: vision\n{line}\n")
    return f


#: (the line as written, the key it sets, what PyYAML makes of it, the twin both read alike)
DIFFERENT: list[tuple[str, str, str, str]] = [
    ("      quota: {cpu: 1:30}", "gpuaas:teams[0].quota.cpu", "the int 90", '      quota: {cpu: "1:30"}'),
    ("      partition: {pkey: 1:0}", "gpuaas:teams[0].partition.pkey", "the int 60", "      partition: {pkey: 0x3c}"),
    ("      privileged: on", "gpuaas:teams[0].privileged", "the bool True", "      privileged: true"),
    ("      protect: no", "gpuaas:teams[0].protect", "the bool False", "      protect: false"),
    ("      quota: {gpus: 0o17}", "gpuaas:teams[0].quota.gpus", "the string '0o17'", "      quota: {gpus: 017}"),
    ("      quota: {cpu: 1e3}", "gpuaas:teams[0].quota.cpu", "the string '1e3'", "      quota: {cpu: '1e3'}"),
    ("      quota: {gpus: 09}", "gpuaas:teams[0].quota.gpus", "the string '09'", "      quota: {gpus: 9}"),
    (
        "      namespace: 2026-12-01",
        "gpuaas:teams[0].namespace",
        "the string '2026-12-01'",
        "      namespace: v2026-12-01",
    ),
    ("      quota: {mig: {yes: 1}}", "gpuaas:teams[0].quota.mig", "the key yes", "      quota: {mig: {'yes': 1}}"),
]


@pytest.mark.parametrize(("line", "key", "py", "twin"), DIFFERENT, ids=[d[0].strip() for d in DIFFERENT])
def test_what_the_two_read_differently_is_refused_naming_the_key(
    tmp_path: Path, line: str, key: str, py: str, twin: str
) -> None:
    with pytest.raises(ConfigError) as err:
        read_stack_file(_stack(tmp_path, line))
    (issue,) = err.value.issues
    assert issue.path == key and py in issue.message and "gopkg.in/yaml.v3" in issue.message, issue
    assert "Pulumi.t.yaml:4:" in issue.message


@pytest.mark.parametrize(("line", "key", "py", "twin"), DIFFERENT, ids=[d[0].strip() for d in DIFFERENT])
def test_its_twin_both_read_alike_is_read(tmp_path: Path, line: str, key: str, py: str, twin: str) -> None:
    assert read_stack_file(_stack(tmp_path, twin))["gpuaas:teams"][0]["name"] == "vision"


@pytest.mark.parametrize(
    ("line", "value"),
    [("      quota: {memory: 1_000}", 1000), ("      quota: {gpus: 0777}", 511), ("      quota: {gpus: 0x1F}", 31)],
)
def test_spellings_both_read_alike_pass_with_their_value(tmp_path: Path, line: str, value: int) -> None:
    quota = read_stack_file(_stack(tmp_path, line))["gpuaas:teams"][0]["quota"]
    assert list(quota.values()) == [value]
