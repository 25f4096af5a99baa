"""Multus namespace isolation: what the NicClusterPolicy tells Multus, and what that lets a pod do.

``multus_allows`` restates Multus' documented rule (k8snetworkplumbingwg/multus-cni
docs/configuration.md, "Namespace Isolation" and "globalNamespaces") so the rendered config can be
checked for every pair of teams, not only read back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components import platform_args
from components.fabric import multus
from components.loader import parse_config
from components.model.config import StackConfig
from components.operators.network_operator import network_operator_values
from components.operators.nic_cluster_policy import nic_cluster_policy
from components.plan.index import resource_counts
from components.plan.offline import Run
from components.plan.summary import render_summary
from components.plan.writer import plan_files
from tests import tenancy_objects
from tests.conftest import raw_stack

NCP = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"


def multus_allows(conf: dict[str, Any], pod_namespace: str, nad_namespace: str) -> bool:
    """Whether Multus attaches ``<nad_namespace>/<nad>`` to a pod in ``pod_namespace``."""
    if not conf.get("namespaceIsolation", False) or pod_namespace == nad_namespace:
        return True
    global_ns = conf.get("globalNamespaces", "")
    allowed = global_ns.split(",") if global_ns else ["default"]
    return nad_namespace in allowed


def rendered_conf(cfg: StackConfig) -> dict[str, Any]:
    section = nic_cluster_policy(platform_args.nic_cluster_policy(cfg))["spec"]["secondaryNetwork"]["multus"]
    conf: dict[str, Any] = json.loads(section["config"])
    return conf


def test_no_team_reaches_another_teams_nad(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    conf = rendered_conf(cfg)
    with_nad = [t for t in cfg.teams if tenancy_objects.nad(cfg, t) is not None]
    assert len(with_nad) >= 2
    for a in with_nad:
        for b in with_nad:
            assert multus_allows(conf, a.ns, b.ns) == (a is b), (a.name, b.name)
        # ``default`` is global in Multus unless globalNamespaces says otherwise.
        assert not multus_allows(conf, a.ns, "default")


def test_without_gpuaas_config_multus_would_let_teams_cross() -> None:
    """The check above can fail: Multus' own default (no isolation) lets any team in."""
    assert multus_allows({}, "team-a", "team-b")
    assert multus_allows({"namespaceIsolation": True}, "team-a", "default")


def test_primary_network_comes_from_config(cfg_of: Callable[[str], StackConfig]) -> None:
    cfg = cfg_of("onprem")
    conf = rendered_conf(cfg)
    assert cfg.onprem is not None and cfg.onprem.multus is not None
    assert conf["clusterNetwork"] == cfg.onprem.multus.cluster_network == "k8s-pod-network"
    # Multus looks the name up among the conf files of confDir; its own default dir is empty on nodes.
    assert conf["confDir"] == "/etc/cni/net.d"
    assert conf["readinessindicatorfile"] == "/etc/cni/net.d/10-calico.conflist"
    assert conf["kubeconfig"] == "/etc/cni/net.d/multus.d/multus.kubeconfig"
    # hostPort and bandwidth annotations keep working through Multus.
    assert conf["capabilities"] == {"portMappings": True, "bandwidth": True}


def test_one_cni_directory_for_multus_its_kubeconfig_and_the_operator() -> None:
    """k3s/RKE2 keep CNI confs elsewhere: the operator must write Multus' files where Multus reads."""
    raw = raw_stack("onprem")
    raw["platform"]["multus"]["cniConfDir"] = "/var/lib/rancher/k3s/agent/etc/cni/net.d"
    cfg = parse_config(raw)
    conf = rendered_conf(cfg)
    assert conf["confDir"] == "/var/lib/rancher/k3s/agent/etc/cni/net.d"
    assert conf["kubeconfig"] == "/var/lib/rancher/k3s/agent/etc/cni/net.d/multus.d/multus.kubeconfig"
    values = network_operator_values(platform_args.network_operator(cfg))["operator"]
    assert values["cniNetworkDirectory"] == "/var/lib/rancher/k3s/agent/etc/cni/net.d"
    assert conf["name"] != conf["clusterNetwork"], "Multus would delegate to itself"


def test_cluster_network_may_not_be_multus_itself() -> None:
    raw = raw_stack("onprem")
    raw["platform"]["multus"]["clusterNetwork"] = multus.NETWORK_NAME
    with pytest.raises(Exception) as err:
        parse_config(raw)
    assert "gpuaas:platform.multus.clusterNetwork: 'multus-cni-network' is the Multus network itself" in str(err.value)


def test_without_partitions_multus_stays_in_auto_mode() -> None:
    raw = raw_stack("onprem")
    del raw["platform"]["multus"]
    raw["teams"] = [{"name": "interns"}]
    section = nic_cluster_policy(platform_args.nic_cluster_policy(parse_config(raw)))["spec"]["secondaryNetwork"][
        "multus"
    ]
    assert "config" not in section


def test_plan_carries_the_isolating_config(run_of: Callable[[str], Run]) -> None:
    (policy,) = run_of("onprem").of_type(NCP)
    conf = json.loads(policy.inputs["spec"]["secondaryNetwork"]["multus"]["config"])
    assert conf["namespaceIsolation"] is True
    assert "default" not in conf["globalNamespaces"].split(",")


def test_summary_says_how_networks_are_isolated(
    cfg_of: Callable[[str], StackConfig], run_of: Callable[[str], Run]
) -> None:
    run = run_of("onprem")
    summary = render_summary(cfg_of("onprem"), run, resource_counts(run), plan_files(run))
    line = next(x for x in summary.splitlines() if x.startswith("Multus:"))
    assert "namespaceIsolation on" in line and "'k8s-pod-network'" in line and "(not default)" in line
