"""A team lead's edit that reaches other tenants or the cluster is refused, naming both keys (issue 35, item 14).

The PR workflow plans untrusted config: a team's groups, its name and namespace, and the platform's
namespaces must each stay inside what they own. Each refusal beside its allowed twin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.loader import gpuaas_section, parse_config
from components.model.errors import ConfigError
from components.plan.offline import ROOT, stack_config
from tests.conftest import raw_stack


def _raw(stack: str) -> dict[str, Any]:
    if stack in ("onprem", "aks"):
        return raw_stack(stack)
    return dict(gpuaas_section(stack_config("onprem", ROOT / "tests" / "stacks" / f"{stack}.yaml")))


Edit = Callable[[dict[str, Any]], None]


def _issues(stack: str, *edits: Edit) -> list[str]:
    raw = _raw(stack)
    for edit in edits:
        edit(raw)
    try:
        parse_config(raw)
    except ConfigError as err:
        return [str(i) for i in err.issues]
    return []


def team(i: int, **values: Any) -> Edit:
    return lambda raw: raw["teams"][i].update(values)


def section(name: str, **values: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        node = raw.setdefault(name, {})
        for key, value in values.items():
            *parents, last = key.split("__")
            for p in parents:
                node = node.setdefault(p, {})
            node[last] = value

    return edit


OBSERVABILITY = section("observability", enabled=True)
ELASTIC = section("queues", elastic=True)

#: (case, stack, refused edits, allowed twin edits, key reported, other key named, words)
CASES: list[tuple[str, str, list[Edit], list[Edit], str, str, str]] = [
    (
        "every signed-in user",
        "onprem",
        [team(0, groups=["system:authenticated"], privileged=True)],
        [team(0, groups=["oidc:vision-ml"], privileged=True)],
        "gpuaas:teams[0].groups[0]",
        "system:serviceaccounts:vision",
        "every signed-in user",
    ),
    (
        "every service account",
        "onprem",
        [team(0, groups=["system:serviceaccounts"])],
        [team(0, groups=["system:serviceaccounts:vision"])],
        "gpuaas:teams[0].groups[0]",
        "system:serviceaccounts:vision",
        "every service account",
    ),
    (
        "the superusers",
        "onprem",
        [team(0, groups=["ml", "system:masters"])],
        [team(0, groups=["ml", "masters"])],
        "gpuaas:teams[0].groups[1]",
        "system:serviceaccounts:vision",
        "superusers",
    ),
    (
        "the kubelets",
        "onprem",
        [team(0, groups=["system:nodes"])],
        [team(0, groups=["nodes-team"])],
        "gpuaas:teams[0].groups[0]",
        "system:serviceaccounts:vision",
        "kubelet",
    ),
    (
        "another team's service accounts",
        "onprem",
        [team(0, groups=["system:serviceaccounts:language"])],
        [team(1, groups=["system:serviceaccounts:language"])],
        "gpuaas:teams[0].groups[0]",
        "gpuaas:teams[1].name",
        "not this team's 'vision'",
    ),
    (
        "an operator's service accounts",
        "onprem",
        [team(0, groups=["system:serviceaccounts:gpu-operator"])],
        [team(0, groups=["gpu-operator-admins"])],
        "gpuaas:teams[0].groups[0]",
        "system:serviceaccounts:vision",
        "namespace 'gpu-operator'",
    ),
    (
        "a team in the monitoring stack's namespace",
        "onprem",
        [OBSERVABILITY, team(0, namespace="monitoring")],
        [OBSERVABILITY, team(0, namespace="vision-monitoring")],
        "gpuaas:teams[0].namespace",
        "gpuaas:observability.prometheus.namespace",
        "does not create",
    ),
    (
        "a team named like Grafana's namespace",
        "onprem",
        [OBSERVABILITY, section("observability", grafana__namespace="grafana"), team(2, name="grafana")],
        [OBSERVABILITY, section("observability", grafana__namespace="grafana"), team(2, name="grafana-ops")],
        "gpuaas:teams[2].name",
        "gpuaas:observability.grafana.namespace",
        "Grafana's",
    ),
    (
        "the platform's rules in a team's namespace",
        "onprem",
        [OBSERVABILITY, section("observability", prometheus__namespace="vision")],
        [OBSERVABILITY, section("observability", prometheus__namespace="prometheus")],
        "gpuaas:teams[0].name",
        "gpuaas:observability.prometheus.namespace",
        "the Prometheus stack's",
    ),
    (
        "the Network Operator in the monitoring namespace",
        "onprem",
        [OBSERVABILITY, section("network", namespace="monitoring")],
        [OBSERVABILITY, section("network", namespace="network-operator")],
        "gpuaas:network.namespace",
        "gpuaas:observability.prometheus.namespace",
        "on destroy the namespace itself",
    ),
    (
        "the GPU Operator in the monitoring namespace",
        "onprem",
        [OBSERVABILITY, section("gpuOperator", namespace="monitoring")],
        [OBSERVABILITY, section("gpuOperator", namespace="gpu-operator-resources")],
        "gpuaas:gpuOperator.namespace",
        "gpuaas:observability.prometheus.namespace",
        "does not create",
    ),
    (
        "Kueue in the monitoring namespace",
        "onprem",
        [OBSERVABILITY, ELASTIC, section("queues", namespace="monitoring")],
        [OBSERVABILITY, ELASTIC, section("queues", namespace="kueue")],
        "gpuaas:queues.namespace",
        "gpuaas:observability.prometheus.namespace",
        "does not create",
    ),
    (
        "a team in a trusted operator's namespace",
        "onprem",
        [ELASTIC, team(0, namespace="kubeflow")],
        [ELASTIC, team(0, namespace="kubeflow-vision")],
        "gpuaas:teams[0].namespace",
        "gpuaas:queues.controllers[1].serviceAccount",
        "trusted operator kubeflow/training-operator",
    ),
    (
        "a team in HAMi's namespace",
        "onprem",
        [team(1, namespace="hami-system")],
        [team(1, namespace="hami-team")],
        "gpuaas:teams[1].namespace",
        "HAMi's namespace",
        "namespace of its own",
    ),
    (
        "a team named like HAMi's namespace on a HAMi stack",
        "onprem-hami",
        [team(0, name="hami-system")],
        [team(0, name="hami-users")],
        "gpuaas:teams[0].name",
        "HAMi's namespace",
        "namespace of its own",
    ),
]


@pytest.mark.parametrize(
    ("stack", "refused", "allowed", "key", "other", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_reach_beyond_the_team_is_refused_naming_both_keys(
    stack: str, refused: list[Edit], allowed: list[Edit], key: str, other: str, words: str
) -> None:
    mine = [i for i in _issues(stack, *refused) if i.startswith(f"{key}:")]
    assert mine, f"nothing reported at {key}: {_issues(stack, *refused)}"
    assert other in mine[0] and words in mine[0], mine


@pytest.mark.parametrize(
    ("stack", "refused", "allowed", "key", "other", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_its_allowed_twin_plans(
    stack: str, refused: list[Edit], allowed: list[Edit], key: str, other: str, words: str
) -> None:
    assert _issues(stack, *allowed) == []
