"""The stack-file JSON Schema (issue #33, item 5): current, with every field's description, and every
stack file — the samples and the tests' own — valid against it and pointing editors at it."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from components.model import base
from components.model.config import StackConfig
from components.plan.schema import SCHEMA, main, modeline, render

ROOT = Path(__file__).resolve().parent.parent
STACK_FILES = sorted([*ROOT.glob("Pulumi.*.yaml"), *(ROOT / "tests" / "stacks").glob("*.yaml")])
STACK_FILES = [f for f in STACK_FILES if "config" in (yaml.safe_load(f.read_text()) or {})]


def _schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA.read_text()))


def test_the_committed_schema_is_what_the_model_renders() -> None:
    assert SCHEMA.read_text() == render(), "schema/stack.schema.json is stale: run `make schema`"
    assert main(["--check"]) == 0


def test_a_stale_schema_is_reported(tmp_path: Path) -> None:
    stale = tmp_path / "stack.schema.json"
    stale.write_text(render().replace('"description"', '"title"', 1))
    assert main(["--check", "--out", str(stale)]) == 1
    fresh = tmp_path / "fresh.json"
    assert main(["--out", str(fresh)]) == 0 and main(["--check", "--out", str(fresh)]) == 0


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_stack_file_is_valid_and_names_the_schema(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    assert first == modeline(path), f"{path.name}: first line should be {modeline(path)!r}"
    target = (path.parent / first.split("$schema=", 1)[1]).resolve()
    assert target == SCHEMA.resolve()
    jsonschema.Draft202012Validator(_schema()).validate(yaml.safe_load(path.read_text()))


def _errors(doc: dict[str, Any]) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(_schema()).iter_errors(doc)]


def _onprem() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((ROOT / "tests" / "stacks" / "onprem.yaml").read_text()))


def test_an_unknown_gpuaas_key_is_refused_and_other_namespaces_pass() -> None:
    doc = _onprem()
    doc["config"]["gpuaas:teamz"] = []
    assert any("gpuaas:teamz" in m for m in _errors(doc))
    allowed = _onprem()
    allowed["config"]["kubernetes:context"] = "prod"
    allowed["config"]["mycompany:owner"] = "platform"
    assert _errors(allowed) == []


def test_a_secure_value_is_allowed_where_a_plain_one_is_and_a_bad_type_is_not() -> None:
    doc = _onprem()
    doc["config"]["gpuaas:observability"] = {"secure": "v1:abc"}
    doc["secretsprovider"] = "passphrase"
    doc["encryptionsalt"] = "v1:salt"
    assert _errors(doc) == []
    bad = _onprem()
    bad["config"]["gpuaas:teams"] = "vision"
    assert _errors(bad) != []


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        for t in _types(field.annotation):
            if isinstance(t, type) and issubclass(t, BaseModel):
                _models(t, seen)


def _types(annotation: Any) -> list[Any]:
    args = getattr(annotation, "__args__", ()) or ()
    out = [annotation]
    for a in args:
        out.extend(_types(a))
    meta = getattr(annotation, "__metadata__", None)
    if meta is not None:
        out.extend(_types(getattr(annotation, "__origin__", None)))
    return out


def test_every_field_of_the_stack_config_has_its_description_once() -> None:
    seen: set[type[BaseModel]] = set()
    _models(StackConfig, seen)
    assert len(seen) > 10
    missing = [f"{m.__name__}.{n}" for m in seen for n, f in m.model_fields.items() if not f.description]
    assert missing == [], f"fields without a description (a string literal right after the field): {missing}"
    # One source: the description is the literal after the field, never a `#:` comment above it.
    model_dir = Path(base.__file__).parent
    left: list[str] = []
    for p in sorted(model_dir.glob("*.py")):
        lines = p.read_text().splitlines()
        for i, line in enumerate(lines[:-1]):
            if line.strip().startswith("#:") and re.match(r"^    [a-z_][a-z0-9_]*: ", lines[i + 1]):
                left.append(f"{p.name}:{i + 1}")
    assert left == [], f"`#:` field comments left (write the description after the field): {left}"
