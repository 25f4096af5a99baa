"""Unknown config namespaces are refused, naming the nearest known key (issue 33, item 6).

``gpuas:teams:`` (a typo in the namespace) once planned a stack with no teams, silently. A key whose
namespace is neither gpuaas', Pulumi's nor a provider's (``KNOWN_CONFIG_NAMESPACES``), nor listed in
``gpuaas:extraConfigNamespaces``, is a problem beside every other one; so is an unknown ``gpuaas:``
key, with the same "did you mean" hint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.loader import parse_stack
from components.model.errors import ConfigError
from components.plan.offline import run_program
from components.plan.writer import main as plan_main
from tests.conftest import fixture_config

KNOWN = "known namespaces: gpuaas, pulumi, kubernetes, azure-native"

REFUSED: list[tuple[str, str, Any, str]] = [
    # (id, key, value, the problem line, whole)
    ("namespace-typo", "gpuas:teams", [],
     f"gpuas:teams: unknown config namespace 'gpuas' (did you mean gpuaas:teams?); {KNOWN}; a namespace your own "
     "program reads goes in gpuaas:extraConfigNamespaces"),
    ("provider-typo", "kubernets:context", "lab",
     f"kubernets:context: unknown config namespace 'kubernets' (did you mean kubernetes:context?); {KNOWN}; a "
     "namespace your own program reads goes in gpuaas:extraConfigNamespaces"),
    ("azure-typo", "azure-natve:location", "eastus",
     f"azure-natve:location: unknown config namespace 'azure-natve' (did you mean azure-native:location?); {KNOWN}; "
     "a namespace your own program reads goes in gpuaas:extraConfigNamespaces"),
    ("own-namespace-unlisted", "myteam:owner", "me",
     f"myteam:owner: unknown config namespace 'myteam'; {KNOWN}; a namespace your own program reads goes in "
     "gpuaas:extraConfigNamespaces"),
    ("no-namespace", "teams", [],
     f"teams: has no namespace (Pulumi config keys are <namespace>:<name>) (did you mean gpuaas:teams?); {KNOWN}; a "
     "namespace your own program reads goes in gpuaas:extraConfigNamespaces"),
    ("gpuaas-key-typo", "gpuaas:team", [],
     "gpuaas:team: unknown key (did you mean gpuaas:teams?); allowed: charts, extraConfigNamespaces, gpuOperator, "
     "network, observability, platform, queues, quotaPolicy, teams, verification, versions"),
    ("gpuaas-key-case", "gpuaas:gpuoperator", {},
     "gpuaas:gpuoperator: unknown key (did you mean gpuaas:gpuOperator?); allowed: charts, extraConfigNamespaces, "
     "gpuOperator, network, observability, platform, queues, quotaPolicy, teams, verification, versions"),
]  # fmt: skip

ALLOWED: list[tuple[str, dict[str, Any]]] = [
    # the allowed twins: the same intent, written right
    ("namespace-typo", {"gpuaas:teams": []}),
    ("provider-typo", {"kubernetes:context": "lab"}),
    ("azure-typo", {"azure-native:location": "eastus"}),
    ("own-namespace-listed", {"myteam:owner": "me", "gpuaas:extraConfigNamespaces": ["myteam"]}),
    ("pulumi-own", {"pulumi:tags": {"team": "ml"}}),
    ("secure-value", {"kubernetes:kubeconfig": {"secure": "v1:c2VjcmV0"}}),
]


def _config(**extra: Any) -> dict[str, Any]:
    return {**fixture_config("onprem"), **extra}


@pytest.mark.parametrize(("case", "key", "value", "line"), REFUSED, ids=[c[0] for c in REFUSED])
def test_an_unknown_namespace_or_key_is_a_problem_naming_the_nearest(
    case: str, key: str, value: Any, line: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack({**fixture_config("onprem"), key: value})
    assert [str(i) for i in err.value.issues] == [line]


@pytest.mark.parametrize(("case", "extra"), ALLOWED, ids=[c[0] for c in ALLOWED])
def test_known_and_listed_namespaces_are_allowed(case: str, extra: dict[str, Any]) -> None:
    cfg = parse_stack({**fixture_config("onprem"), **extra})
    assert cfg.extra_config_namespaces == tuple(extra.get("gpuaas:extraConfigNamespaces", ()))


def test_every_problem_at_once_with_the_models() -> None:
    config = _config(**{"gpuas:teams": [], "gpuaas:queus": {}, "kubernets:context": "x"})
    config["gpuaas:teams"][0]["quota"]["gpus"] = -1
    with pytest.raises(ConfigError) as err:
        parse_stack(config)
    assert [i.path for i in err.value.issues] == [
        "gpuaas:queus",
        "gpuaas:teams[0].quota.gpus",
        "gpuas:teams",
        "kubernets:context",
    ]
    assert "(did you mean gpuaas:queues?)" in str(err.value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (["my team"], "gpuaas:extraConfigNamespaces[0]: String should match pattern"),
        ("myteam", "gpuaas:extraConfigNamespaces: Input should be a valid tuple"),
    ],
)
def test_the_list_of_extra_namespaces_is_checked(value: Any, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack(_config(**{"gpuaas:extraConfigNamespaces": value}))
    assert any(str(i).startswith(problem) for i in err.value.issues), err.value
    # the twin: names of projects and packages
    parse_stack(_config(**{"gpuaas:extraConfigNamespaces": ["myteam", "aws", "my_project.v2"]}))


def test_the_program_stops_on_a_namespace_typo_before_any_resource() -> None:
    """Through the loader's own path (``load_config`` under the Pulumi runtime): one line, no traceback."""
    with pytest.raises(pulumi.RunError) as err:
        run_program("onprem", config=_config(**{"gpuas:teams": []}))
    assert "  gpuas:teams: unknown config namespace 'gpuas' (did you mean gpuaas:teams?)" in str(err.value)
    # the twin: the program reads the whole config map, so a listed namespace is no problem there either
    run = run_program("onprem", config=_config(**{"myteam:owner": "me", "gpuaas:extraConfigNamespaces": ["myteam"]}))
    assert run.records


def test_the_plan_places_the_key_in_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack = tmp_path / "Pulumi.lab.yaml"
    stack.write_text(yaml.safe_dump({"config": _config(**{"gpuas:teams": []})}, sort_keys=False))
    assert plan_main(["lab", "--stack-file", str(stack), "--out", str(tmp_path / "plan"), "--quiet"]) == 2
    err = capsys.readouterr().err
    line = next(n for n, text in enumerate(stack.read_text().splitlines(), 1) if text.startswith("  gpuas:teams:"))
    assert f"(did you mean gpuaas:teams?); {KNOWN}" in err and f"(Pulumi.lab.yaml:{line}:" in err, (
        err
    )  # the line of the key as written
    assert "Traceback" not in err
