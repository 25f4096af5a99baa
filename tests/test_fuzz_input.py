"""No input produces a Python traceback: garbage and mutated stacks end in a plan or in gpuaas problems.

Hypothesis writes random YAML text and mutates the tests' own stacks (tests/stacks) (a value replaced by
garbage, a key deleted or added, a list item duplicated). Through the loader (``read_stack_file`` +
``parse_stack``) the only allowed outcomes are a :class:`StackConfig` or a :class:`ConfigError`;
through the plan's entry point (``components.plan.writer.main``), exit code 0 or 2 and no traceback.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.loader import parse_stack, read_stack_file
from components.model.config import StackConfig
from components.model.errors import ConfigError
from components.plan.writer import main
from tests.conftest import fixture_config, stack_path

#: Strings that hit the grammars' edges: control characters, quotes, shell, paths, suffixes.
_TRICKY = [
    "",
    " ",
    "\n",
    "a\nb",
    "\t",
    "\x00",
    "\u2028",
    "'",
    '"',
    "$(reboot)",
    "; rm -rf /",
    "..",
    "../..",
    "/",
    "12XB",
    "1.5.Gi",
    "-1",
    "0x8000",
    "0x7fff",
    "latest",
    "kubernetes.io",
    "Ki",
    "e",
    "1e999999999999",
    "ftree,ftree",
    "nvidia-network-operator",
    "gpu-operator",
    "kube-system",
    "x" * 300,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_TRICKY),
    st.text(max_size=20),
)
garbage = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8) | st.sampled_from(_TRICKY), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_stack(draw: st.DrawFn, stack: str) -> dict[str, Any]:
    config = copy.deepcopy(fixture_config(stack))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(config)[1:]
        where = draw(st.sampled_from(paths))
        parent: Any = config
        for part in where[:-1]:
            parent = parent[part]
        key = where[-1]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "duplicate"]))
        if action == "replace":
            parent[key] = draw(garbage)
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["name", "namespace", "kind", "extra", "pkey", "hcas"]))] = draw(garbage)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return config


def _loads(config: Any) -> None:
    """The loader's contract: a config, or gpuaas problems — nothing else escapes."""
    try:
        assert isinstance(parse_stack(config), StackConfig)
    except ConfigError as err:
        assert err.issues and all(i.path and i.message for i in err.issues)
        assert "Traceback" not in err.render()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), stack=st.sampled_from(["onprem", "aks"]))
def test_mutated_stacks_load_or_list_problems(data: st.DataObject, stack: str) -> None:
    _loads(data.draw(mutated_stack(stack)))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(text=st.one_of(st.text(max_size=200), st.builds(lambda g: yaml.safe_dump({"config": g}), garbage)))
def test_garbage_yaml_is_read_or_located(tmp_path: Path, text: str) -> None:
    f = tmp_path / "Pulumi.fuzz.yaml"
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        config = read_stack_file(f)
    except ConfigError as err:
        # Located: in the file (path:line:col), or at a key with the file's line and column in the
        # reason (a value PyYAML and Pulumi's yaml.v3 read differently, components/model/goyaml.py).
        assert all(i.path.startswith(str(f)) or f"({f.name}:" in i.message for i in err.issues), err.issues
        return
    _loads(config)


@pytest.mark.parametrize("stack", ["onprem", "aks"])
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_stacks_plan_or_exit_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject, stack: str
) -> None:
    """The whole entry point — loader, program under mocks, plan writer — on mutated stacks."""
    config = data.draw(mutated_stack(stack))
    f = tmp_path / f"Pulumi.{stack}.yaml"
    f.write_text(yaml.safe_dump({"config": config}))
    rc = main([stack, "--stack-file", str(f), "--out", str(tmp_path / "plan"), "--quiet"])
    err = capsys.readouterr().err
    assert rc in (0, 2), err
    assert "Traceback" not in err
    if rc == 2:
        assert err.startswith("gpuaas") or "guard" in err.lower(), err


@st.composite
def mutated_text(draw: st.DrawFn, stack: str) -> str:
    """The stack file's text with lines duplicated, dropped, re-indented or garbled."""
    lines = stack_path(stack).read_text().splitlines()
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        action = draw(st.sampled_from(["duplicate", "drop", "tab", "indent", "garble"]))
        if action == "duplicate":
            lines.insert(i, lines[i])
        elif action == "drop" and len(lines) > 1:
            del lines[i]
        elif action == "tab":
            lines[i] = "\t" + lines[i].lstrip(" ")
        elif action == "indent":
            lines[i] = " " * draw(st.integers(min_value=0, max_value=8)) + lines[i].lstrip(" ")
        elif action == "garble" and lines[i]:
            j = draw(st.integers(min_value=0, max_value=len(lines[i]) - 1))
            lines[i] = (
                lines[i][:j]
                + draw(st.sampled_from([":", "{", "[", "'", '"', "&", "*", "-", "#", "\x00"]))
                + lines[i][j:]
            )
    return "\n".join(lines) + "\n"


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), stack=st.sampled_from(["onprem", "aks"]))
def test_mutated_stack_files_load_or_are_located(tmp_path: Path, data: st.DataObject, stack: str) -> None:
    f = tmp_path / f"Pulumi.{stack}.yaml"
    f.write_text(data.draw(mutated_text(stack)))
    try:
        config = read_stack_file(f)
    except ConfigError as err:
        # Located: in the file (path:line:col), or at a key with the file's line and column in the
        # reason (a value PyYAML and Pulumi's yaml.v3 read differently, components/model/goyaml.py).
        assert all(i.path.startswith(str(f)) or f"({f.name}:" in i.message for i in err.issues), err.issues
        return
    _loads(config)
