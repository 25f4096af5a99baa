"""The bounded YAML reader (issue #21, item 13): no traceback, hang or memory blow-up, whatever the file.

Each case used to be a traceback (recursion, a cyclic object), minutes and gigabytes (an alias bomb,
``/dev/zero``) or a Python object no field takes (``!!set``, a date). Each is now one line naming
the file and the position, beside the twin the reader takes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from components.model import yamlfile
from components.plan.writer import main as plan_main

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 10) if prev else ', '.join(['x'] * 10)}]\n"
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh", strict=True)
)


@pytest.mark.parametrize(
    ("text", "where", "why"),
    [
        ("a: &x [1, *x]\n", "1:4", "this anchor is used by an alias inside itself"),
        ("a: &x {b: {c: *x}}\n", "1:4", "this anchor is used by an alias inside itself"),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", "1:67", f"nested more than {yamlfile.MAX_DEPTH} levels deep"),
        ("a: !!set {x, y}\n", "1:4", "the tag 'tag:yaml.org,2002:set' is not allowed"),
        ("a: !!python/object:os.system x\n", "1:4", "is not allowed"),
        ("a: !!binary aGk=\n", "1:4", "is not allowed"),
        ("a: !mine x\n", "1:4", "the tag '!mine' is not allowed"),
        (BOMB, "5:4", f"its aliases expand the document by more than {yamlfile.ALIAS_BUDGET} nodes"),
    ],
    ids=["self-alias", "nested-self-alias", "deep", "set", "python", "binary", "local-tag", "bomb"],
)
def test_a_hostile_document_is_one_line_with_its_position(text: str, where: str, why: str) -> None:
    started = time.process_time()
    with pytest.raises(yamlfile.YamlError) as err:
        yamlfile.load(text, "f.yaml")
    assert err.value.where == f"f.yaml:{where}" and why in err.value.why, str(err.value)
    assert "\n" not in str(err.value)
    assert time.process_time() - started < 5  # generous: the whole point is that nothing runs away


def test_what_a_stack_file_uses_is_read() -> None:
    """The twins: anchors and merges within the budget, explicit core tags, a date kept as text."""
    text = "a: &t {x: 1, y: [2, 3]}\nb:\n  <<: *t\n  x: 4\nc: !!str 5\nd: 2024-01-01\ne: " + "[" * 20 + "]" * 20 + "\n"
    data = yamlfile.load(text, "f.yaml")
    assert data["b"] == {"x": 4, "y": [2, 3]} and data["c"] == "5" and data["d"] == "2024-01-01"
    four = "".join(BOMB.splitlines(keepends=True)[:4])  # 11111 nodes written out: within the budget
    assert yamlfile.load(four, "f.yaml")["d"][0][0][0][0] == "x"


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/urandom", "fifo", "dir", "big"])
def test_only_regular_files_of_bounded_size_are_read(tmp_path: Path, special: str) -> None:
    path = Path(special)
    if special == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)  # nobody writes it: opening it for reading must not wait
    elif special == "dir":
        path = tmp_path
    elif special == "big":
        path = tmp_path / "big.yaml"
        path.write_bytes(b"#" * (yamlfile.MAX_BYTES + 1))
    with pytest.raises(yamlfile.YamlError) as err:
        yamlfile.read_text(path, "stack file")
    assert ("is not a regular file" if special != "big" else f"at most {yamlfile.MAX_BYTES} bytes") in err.value.why
    ok = tmp_path / "ok.yaml"
    ok.write_text("config: {}\n")
    assert yamlfile.read_yaml(ok) == {"config": {}}


def test_the_plan_refuses_a_stack_file_from_dev_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert plan_main(["onprem", "--stack-file", "/dev/zero", "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "/dev/zero: is not a regular file (a character device)" in err and "Traceback" not in err
