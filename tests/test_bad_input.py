"""Bad input at load: each value refused with its path, bad value and what is allowed — beside its allowed twin."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from components.loader import parse_config, parse_stack, read_stack_file
from components.model import elastic
from components.model.errors import ConfigError, Issue
from components.model.types import DnsLabel
from components.plan.offline import run_program
from tests.conftest import fixture_config, qualified, raw_stack, stack_path
from tests.rules.test_config_rules import Edit, _issues, _set


def _both(*edits: Edit) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        for e in edits:
            e(raw)

    return edit


# (id, stack, bad edit, expected path, fragment of the reason, allowed twin)
CASES: list[tuple[str, str, Edit, str, str, Edit]] = [
    # Kubernetes quantities (ResourceQuota hard limits)
    (
        "memory-suffix",
        "onprem",
        _set("teams[0].quota.memory", "12XB"),
        "gpuaas:teams[0].quota.memory",
        "'12XB' is not a Kubernetes quantity",
        _set("teams[0].quota.memory", "12Gi"),
    ),
    (
        "memory-two-dots",
        "onprem",
        _set("teams[0].quota.memory", "1.5.Gi"),
        "gpuaas:teams[0].quota.memory",
        "'1.5.Gi' is not a Kubernetes quantity",
        _set("teams[0].quota.memory", "1.5Ti"),
    ),
    (
        "cpu-negative",
        "onprem",
        _set("teams[0].quota.cpu", "-4"),
        "gpuaas:teams[0].quota.cpu",
        "'-4' is negative",
        _set("teams[0].quota.cpu", 192),
    ),
    # Line-based formats: the VF script, the GUID plan lines, opensm.conf
    (
        "hca-shell",
        "onprem",
        _set("platform.nodeGroups[0].hcas", ["mlx5_0; reboot"]),
        "gpuaas:platform.nodeGroups[0].hcas[0]",
        "not an RDMA device name",
        _set("platform.nodeGroups[0].hcas", ["mlx5_0"]),
    ),
    (
        "hca-empty",
        "onprem",
        _set("platform.nodeGroups[0].hcas", []),
        "gpuaas:platform.nodeGroups[0].hcas",
        "a node group needs at least one InfiniBand HCA",
        _set("platform.nodeGroups[0].hcas", ["mlx5_0"]),
    ),
    (
        "hca-dup",
        "onprem",
        _set("platform.nodeGroups[0].hcas", ["mlx5_0", "mlx5_0"]),
        "gpuaas:platform.nodeGroups[0].hcas",
        "duplicate HCA 'mlx5_0'",
        _set("platform.nodeGroups[0].hcas", ["mlx5_0", "mlx5_1"]),
    ),
    (
        "routing-engine",
        "onprem",
        _set("platform.fabric.opensm.routingEngine", "fattree"),
        "gpuaas:platform.fabric.opensm.routingEngine",
        "engines: minhop, updn",
        _set("platform.fabric.opensm.routingEngine", "ftree,updn"),
    ),
    (
        "routing-newline",
        "onprem",
        _set("platform.fabric.opensm.routingEngine", "ftree\nsm_priority 15"),
        "gpuaas:platform.fabric.opensm.routingEngine",
        "control characters",
        _set("platform.fabric.opensm.routingEngine", "ar_updn"),
    ),
    (
        "team-name-newline",
        "onprem",
        _set("teams[5].name", "qa\n"),
        "gpuaas:teams[5].name",
        "control characters",
        _set("teams[5].name", "qa"),
    ),
    (
        "context-newline",
        "onprem",
        _set("platform.kubeconfigContext", "a\nb"),
        "gpuaas:platform.kubeconfigContext",
        "control characters",
        _set("platform.kubeconfigContext", "admin@onprem"),
    ),
    (
        "group-empty",
        "onprem",
        _set("teams[0].groups", [""]),
        "gpuaas:teams[0].groups[0]",
        "is empty",
        _set("teams[0].groups", ["oidc:vision", "oidc:vision-admins"]),
    ),
    # Bounds with reasons
    (
        "ts-replicas",
        "onprem",
        _set("platform.nodeGroups[1].timeSlicing.replicas", 111),
        "gpuaas:platform.nodeGroups[1].timeSlicing.replicas",
        "kubelet maxPods",
        _set("platform.nodeGroups[1].timeSlicing.replicas", 110),
    ),
    # Kubernetes fields
    (
        "selector-key",
        "onprem",
        _set("network.nodeSelector", {"gpu node": "true"}),
        'gpuaas:network.nodeSelector["gpu node"][key]',
        "not a Kubernetes label key",
        _set("network.nodeSelector", {"example.com/gpu-node": "true"}),
    ),
    (
        "selector-value",
        "onprem",
        _set("network.nodeSelector", {"gpu": "yes please"}),
        "gpuaas:network.nodeSelector.gpu",
        "not a Kubernetes label value",
        _set("network.nodeSelector", {"gpu": "yes_please"}),
    ),
    (
        "toleration-exists-value",
        "onprem",
        _set("network.tolerations", [{"key": "gpu", "value": "x"}]),
        "gpuaas:network.tolerations[0]",
        "must be empty with operator Exists",
        _set("network.tolerations", [{"key": "gpu", "operator": "Equal", "value": "x"}]),
    ),
    (
        "toleration-empty-key",
        "onprem",
        _set("network.tolerations", [{"key": "", "operator": "Equal"}]),
        "gpuaas:network.tolerations[0]",
        "needs operator Exists",
        _set("network.tolerations", [{"key": ""}]),
    ),
    (
        "toleration-key",
        "onprem",
        _set("network.tolerations", [{"key": "nvidia com/gpu"}]),
        "gpuaas:network.tolerations[0]",
        "not a Kubernetes label key",
        _set("network.tolerations", [{"key": "nvidia.com/gpu"}]),
    ),
    (
        "extended-resource",
        "aks",
        _set("network.rdmaResourcePrefix", "kubernetes.io"),
        "gpuaas:network",
        "kubernetes.io domain is reserved",
        _set("network.rdmaResourcePrefix", "rdma.example.com"),
    ),
    (
        "image-repo",
        "onprem",
        _set("versions", {"nodeToolsImage": "docker.io/Library/debian"}),
        "gpuaas:versions.nodeToolsImage",
        "not an image repository",
        _set("versions", {"nodeToolsImage": "registry.local:5000/debian"}),
    ),
    (
        "image-tag",
        "onprem",
        _set("versions", {"nodeTools": "12 slim"}),
        "gpuaas:versions.nodeTools",
        "not a pinned image tag",
        _set("versions", {"nodeTools": "12.12-slim@sha256:" + "0" * 64}),
    ),
    (
        "helm-url",
        "onprem",
        _set("versions", {"helmRepository": "helm.ngc.nvidia.com/nvidia"}),
        "gpuaas:versions.helmRepository",
        "not a repository URL",
        _set("versions", {"helmRepository": "oci://registry.local/charts"}),
    ),
    # Azure fields
    (
        "subscription",
        "aks",
        _set("platform.subscriptionId", "my-subscription"),
        "gpuaas:platform.subscriptionId",
        "not an Azure subscription id",
        _set("platform.subscriptionId", "0b3c5f9e-1234-4abc-9def-0123456789ab"),
    ),
    (
        "resource-group",
        "aks",
        _set("platform.resourceGroup.name", "rg gpuaas"),
        "gpuaas:platform.resourceGroup.name",
        "not an Azure resource group name",
        _set("platform.resourceGroup.name", "rg-gpuaas.prod"),
    ),
    (
        "location",
        "aks",
        _set("platform.location", "East US 2"),
        "gpuaas:platform.location",
        "not an Azure region name",
        _set("platform.location", "eastus"),
    ),
    (
        "k8s-version",
        "aks",
        _set("platform.kubernetesVersion", "v1.36.3"),
        "gpuaas:platform.kubernetesVersion",
        "not a Kubernetes version",
        _set("platform.kubernetesVersion", "1.36"),
    ),
    (
        "system-vm-size",
        "aks",
        _set("platform.systemPool.vmSize", "D8ds v5"),
        "gpuaas:platform.systemPool.vmSize",
        "not an Azure VM size",
        _set("platform.systemPool.vmSize", "Standard_D16ds_v5"),
    ),
    (
        "pool-taint",
        "aks",
        _set("platform.gpuPools[0].taints", ["nvidia.com/gpu=present"]),
        "gpuaas:platform.gpuPools[0].taints[0]",
        "not a taint",
        _set("platform.gpuPools[0].taints", ["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute"]),
    ),
    (
        "pool-label",
        "aks",
        _set("platform.gpuPools[0].labels", {"team": "a b"}),
        "gpuaas:platform.gpuPools[0].labels.team",
        "not a Kubernetes label value",
        _set("platform.gpuPools[0].labels", {"example.com/team": "a-b"}),
    ),
    # Collisions between generated names
    (
        "operators-one-namespace",
        "onprem",
        _set("gpuOperator", {"namespace": "nvidia-network-operator"}),
        "gpuaas:gpuOperator.namespace",
        "is also gpuaas:network.namespace",
        _set("gpuOperator", {"namespace": "gpu-operator-2"}),
    ),
    (
        "team-in-operator-namespace",
        "onprem",
        _set("teams[2].namespace", "gpu-operator"),
        "gpuaas:teams[2].namespace",
        "is also gpuaas:gpuOperator.namespace",
        _set("teams[2].namespace", "speech-team"),
    ),
    (
        "team-named-like-operator",
        "aks",
        _set("teams[1].name", "nvidia-network-operator"),
        "gpuaas:teams[1].name",
        "is also gpuaas:network.namespace",
        _set("teams[1].name", "nvidia-finetune"),
    ),
    (
        "team-in-verify-namespace",
        "aks",
        _set("teams[1].namespace", "gpuaas-verify"),
        "gpuaas:teams[1].namespace",
        "verification pool namespace",
        _set("teams[1].namespace", "gpuaas-verify-team"),
    ),
    # Issue #21, item 13: wrongly accepted values, each class with one or two examples.
    (
        "queues-in-kube-system",
        "onprem",
        _set("queues.namespace", "kube-system"),
        "gpuaas:queues.namespace",
        "'kube-system' is a namespace of the cluster itself",
        _set("queues.namespace", "kueue-system"),
    ),
    (
        "queues-in-kube-something",
        "onprem",
        _set("queues.namespace", "kube-queues"),
        "gpuaas:queues.namespace",
        "every kube-*",
        _set("queues.namespace", "queues"),
    ),
    (
        "queues-in-a-team",
        "onprem",
        _set("queues.namespace", "vision"),
        "gpuaas:teams[0].name",
        "namespace 'vision' is also gpuaas:queues.namespace",
        _set("queues.namespace", "vision-queues"),
    ),
    (
        "queues-in-gpu-operator",
        "onprem",
        _set("queues.namespace", "gpu-operator"),
        "gpuaas:queues.namespace",
        "is also gpuaas:gpuOperator.namespace",
        _set("queues.namespace", "kueue-system"),
    ),
    (
        "priority-above-user-range",
        "onprem",
        _set("queues.priorityClasses[0].value", 1_000_000_001),
        "gpuaas:queues.priorityClasses[0].value",
        "less than or equal to 1000000000",
        _set("queues.priorityClasses[0].value", 1_000_000_000),
    ),
    (
        "priority-below-int32",
        "onprem",
        _set("queues.priorityClasses[0].value", -(2**31) - 1),
        "gpuaas:queues.priorityClasses[0].value",
        "greater than or equal to -2147483648",
        _set("queues.priorityClasses[0].value", -(2**31)),
    ),
    (
        "priority-name-longer-than-a-label-value",
        "onprem",
        _set("queues.priorityClasses[0].name", "p" * 64),
        "gpuaas:queues.priorityClasses[0].name",
        "whose value is at most 63 characters",
        _set("queues.priorityClasses[0].name", "p" * 63),
    ),
    (
        "true-as-gpus",
        "onprem",
        _set("teams[0].quota.gpus", True),
        "gpuaas:teams[0].quota.gpus",
        "true is a boolean where a number or a name is expected (true is not 1 here)",
        _set("teams[0].quota.gpus", 12),
    ),
    (
        "true-as-vf-index",
        "onprem",
        _set("teams[1].partition.vfIndex", True),
        "gpuaas:teams[1].partition.vfIndex",
        "true is a boolean",
        _set("teams[1].partition.vfIndex", 1),
    ),
    (
        "false-as-pods",
        "onprem",
        _set("teams[0].quota.pods", False),
        "gpuaas:teams[0].quota.pods",
        "false is a boolean",
        _set("teams[0].quota.pods", 100),
    ),
    (
        "true-in-a-mig-map",
        "onprem",
        _set("teams[3].quota.mig", {"4g.40gb": 4, "1g.10gb": True}),
        'gpuaas:teams[3].quota.mig["1g.10gb"]',
        "true is a boolean",
        _set("teams[3].quota.mig", {"4g.40gb": 4, "1g.10gb": 12}),
    ),
    (
        "bidi-override",
        "onprem",
        _set("teams[0].groups", ["oidc:team-\u202enoisiv"]),
        "gpuaas:teams[0].groups[0]",
        "contains control characters (\\u202e)",
        _set("teams[0].groups", ["oidc:team-vision"]),
    ),
    (
        "zero-width-space",
        "onprem",
        _set("queues.priorityClasses[0].description", "batch\u200b"),
        "gpuaas:queues.priorityClasses[0].description",
        "contains control characters (\\u200b)",
        _set("queues.priorityClasses[0].description", "batch"),
    ),
    (
        "elastic-without-batch-job",
        "onprem",
        _set("queues.integrations", ["pod", "jobset.x-k8s.io/jobset"]),
        "gpuaas:queues.integrations",
        "leaves out batch/job while queues.elastic is true",
        _set("queues.integrations", ["batch/job", "pod"]),
    ),
    (
        "supernet-everything",
        "onprem",
        _both(_set("platform.fabric.ipam", "nv-ipam"), _set("platform.fabric.ipamSupernet", "0.0.0.0/0")),
        "gpuaas:platform.fabric.ipamSupernet",
        "overlaps 0.0.0.0/8 ('this network')",
        _both(_set("platform.fabric.ipam", "nv-ipam"), _set("platform.fabric.ipamSupernet", "10.64.0.0/16")),
    ),
    (
        "supernet-loopback",
        "onprem",
        _both(_set("platform.fabric.ipam", "nv-ipam"), _set("platform.fabric.ipamSupernet", "127.0.0.0/16")),
        "gpuaas:platform.fabric.ipamSupernet",
        "overlaps 127.0.0.0/8 (loopback)",
        _both(_set("platform.fabric.ipam", "nv-ipam"), _set("platform.fabric.ipamSupernet", "172.16.0.0/16")),
    ),
    (
        "supernet-multicast",
        "onprem",
        _both(_set("platform.fabric.ipam", "nv-ipam"), _set("platform.fabric.ipamSupernet", "239.1.0.0/16")),
        "gpuaas:platform.fabric.ipamSupernet",
        "overlaps 224.0.0.0/4 (multicast)",
        _both(_set("platform.fabric.ipam", "nv-ipam"), _set("platform.fabric.ipamSupernet", "192.168.0.0/16")),
    ),
    (
        "cni-conf-dir-dotdot",
        "onprem",
        _set("platform.multus.cniConfDir", "/etc/cni/../../root"),
        "gpuaas:platform.multus.cniConfDir",
        "has a '.' or '..' part",
        _set("platform.multus.cniConfDir", "/var/lib/rancher/k3s/agent/etc/cni/net.d"),
    ),
    (
        "kubeconfig-context-shell",
        "onprem",
        _set("platform.kubeconfigContext", "ctx;rm -rf /"),
        "gpuaas:platform.kubeconfigContext",
        "is not a kubeconfig context name",
        _set("platform.kubeconfigContext", "arn:aws:eks:us-east-1:123456789012:cluster/prod"),
    ),
    (
        "kubeconfig-context-subshell",
        "onprem",
        _set("platform.kubeconfigContext", "$(id)"),
        "gpuaas:platform.kubeconfigContext",
        "is not a kubeconfig context name",
        _set("platform.kubeconfigContext", "kubernetes-admin@kubernetes"),
    ),
    (
        "borrowing-limit-negative",
        "onprem",
        _set("teams[0].queue.borrowingLimit.cpu", "-8"),
        "gpuaas:teams[0].queue.borrowingLimit.cpu",
        "'-8' is negative",
        _set("teams[0].queue.borrowingLimit.cpu", 128),
    ),
]


@pytest.mark.parametrize(("case", "stack", "bad", "where", "why", "good"), CASES, ids=[c[0] for c in CASES])
def test_bad_value_refused_and_its_twin_allowed(
    case: str, stack: str, bad: Edit, where: str, why: str, good: Edit
) -> None:
    issues = _issues(stack, bad)
    assert any(i.startswith(f"{where}: ") and why in i for i in issues), issues
    raw = raw_stack(stack)
    good(raw)
    parse_config(raw)


def _proof_team(name: str) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        raw["verification"] = {"aksPools": True}
        raw["teams"][1].update(name=name, verify=True)

    return edit


def test_a_team_cannot_take_the_names_of_a_pools_proofs() -> None:
    """A verifying team ``pool-ndh100a`` and the pool ``ndh100a``'s proofs would register one URN twice."""
    issues = _issues("aks", _proof_team("pool-ndh100a"))
    assert issues == [
        "gpuaas:teams[1].name: 'pool-ndh100a': its proofs would take the names of gpuaas:platform.gpuPools[0]'s "
        "proofs (verification.aksPools is on); rename the team"
    ]
    raw = raw_stack("aks")
    _proof_team("pool-ndh100b-team")(raw)
    parse_config(raw)


def test_every_problem_at_once() -> None:
    issues = _issues(
        "onprem",
        _set("teams[0].quota.memory", "12XB"),
        _set("teams[1].quota.cpu", "-1"),
        _set("platform.fabric.opensm.routingEngine", "fattree"),
        _set("platform.nodeGroups[2].hcas", []),
        _set("teams[3].groups", ["ok", "two\nlines"]),
    )
    assert [i.split(": ", 1)[0] for i in issues] == [
        "gpuaas:platform.fabric.opensm.routingEngine",
        "gpuaas:platform.nodeGroups[2].hcas",
        "gpuaas:teams[0].quota.memory",
        "gpuaas:teams[1].quota.cpu",
        "gpuaas:teams[3].groups[1]",
    ]


def test_a_bad_platform_value_does_not_invent_capacity_problems() -> None:
    """Pruning the bad time-slicing block must not report the inference team's quota as over the fleet."""
    issues = _issues("onprem", _set("platform.nodeGroups[1].timeSlicing.replicas", 111))
    assert [i.split(": ", 1)[0] for i in issues] == ["gpuaas:platform.nodeGroups[1].timeSlicing.replicas"]


def test_dns_names_refuse_a_trailing_newline() -> None:
    """Python's ``$`` matches before a final newline: the type itself must refuse ``vision\\n``."""
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[str] = TypeAdapter(DnsLabel)
    with pytest.raises(ValidationError, match="not a DNS-1123 label"):
        adapter.validate_python("vision\n")
    assert adapter.validate_python("vision") == "vision"


# --------------------------------------------------------------------------------------------
# Across namespaces: azure-native:location


def test_provider_location_must_agree_with_the_platform() -> None:
    config = fixture_config("aks")
    config["azure-native:location"] = "westus"
    with pytest.raises(ConfigError) as err:
        parse_stack(config)
    assert [str(i) for i in err.value.issues] == [
        "gpuaas:platform.location: 'eastus', but azure-native:location is 'westus'; the cluster and the provider's "
        "default region must agree (set both to one region)"
    ]
    config["azure-native:location"] = "East US"  # Azure's display name of eastus
    assert parse_stack(config).aks is not None


def test_location_conflict_is_listed_with_the_other_problems() -> None:
    config = fixture_config("aks")
    config["azure-native:location"] = "westus"
    config["gpuaas:teams"][0]["quota"]["memory"] = "1.5.Gi"
    with pytest.raises(ConfigError) as err:
        parse_stack(config)
    assert [i.path for i in err.value.issues] == ["gpuaas:platform.location", "gpuaas:teams[0].quota.memory"]


# --------------------------------------------------------------------------------------------
# YAML: file, line and column


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "config:\n  gpuaas:teams: []\n  gpuaas:teams:\n    - name: a\n",
            "{f}:3:3: YAML: found duplicate key 'gpuaas:teams' (first at line 2, column 3); a key may appear once in "
            "a mapping",
        ),
        (
            "config:\n  gpuaas:teams:\n    - name: a\n      name: b\n",
            "{f}:4:7: YAML: found duplicate key 'name' (first at line 3, column 7); a key may appear once in a mapping",
        ),
        (
            "config:\n\tgpuaas:teams: []\n",
            "{f}:2:1: YAML: found character '\\t' that cannot start any token (YAML indents with spaces; tabs are "
            "not allowed there)",
        ),
        ("- config\n", "{f}:1:1: the top level is a list; a stack file is a mapping"),
        ("config: [a, b]\n", "{f}: config: is a list; write a mapping of keys"),
        ("config:\n  gpuaas:teams: [\n", "{f}:3:1: YAML: expected the node content, but found '<stream end>'"),
        (
            'config:\n  gpuaas:teams: "\x00"\n',
            "{f}:2:18: YAML: character '\\x00' is not allowed in YAML (special characters are not allowed)",
        ),
    ],
    ids=["dup-top", "dup-nested", "tab", "list", "config-list", "unclosed", "nul"],
)
def test_yaml_problems_have_file_line_and_column(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "Pulumi.bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_stack_file(f)
    assert [str(i) for i in err.value.issues] == [expected.format(f=f)]


def test_yaml_twins_are_read(tmp_path: Path) -> None:
    """The same keys once each, a merge key overridden explicitly, and an empty file, are all fine."""
    f = tmp_path / "Pulumi.ok.yaml"
    f.write_text(
        "config:\n  gpuaas:teams:\n    - &t {name: a, verify: false}\n    - <<: *t\n      name: b\n"
        "  gpuaas:quotaPolicy: {allowOversubscription: true}\n"
    )
    assert read_stack_file(f)["gpuaas:teams"] == [{"name": "a", "verify": False}, {"name": "b", "verify": False}]
    f.write_text("")
    assert read_stack_file(f) == {}
    assert read_stack_file(stack_path("onprem")) == fixture_config("onprem")


def test_two_teams_keys_no_longer_plan_zero_teams(tmp_path: Path) -> None:
    """The bad-input run's case: a second ``gpuaas:teams`` key used to replace the first silently."""
    text = (stack_path("onprem")).read_text() + "  gpuaas:teams: []\n"
    f = tmp_path / "Pulumi.onprem.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match="duplicate key 'gpuaas:teams'"):
        read_stack_file(f)


def test_qualified_round_trip_is_unchanged() -> None:
    raw = raw_stack("onprem")
    assert parse_stack(qualified(copy.deepcopy(raw))) == parse_config(raw)


def test_problems_point_at_their_line_in_the_stack_file(tmp_path: Path) -> None:
    from components.loader import render_located

    f = tmp_path / "Pulumi.onprem.yaml"
    f.write_text("config:\n  gpuaas:teams:\n    - name: a\n      quota:\n        memory: 12XB\n    - name: b\n")
    err = ConfigError(
        [
            Issue("gpuaas:teams[0].quota.memory", "bad"),  # written: its own line
            Issue("gpuaas:teams[1].quota", "missing"),  # not written: the team that should hold it
            Issue("gpuaas:teams[*].quota.gpus", "sum"),  # a wildcard: the list
            Issue("stack", "not from the file"),
        ]
    )
    assert render_located(err, f).splitlines()[1:] == [
        "  gpuaas:teams[0].quota.memory: bad  (Pulumi.onprem.yaml:5:17)",
        "  gpuaas:teams[1].quota: missing  (Pulumi.onprem.yaml:6:7)",
        "  gpuaas:teams[*].quota.gpus: sum  (Pulumi.onprem.yaml:3:5)",
        "  stack: not from the file",
    ]


def test_the_program_itself_checks_the_provider_location() -> None:
    """``pulumi up`` runs ``load_config``, which reads ``azure-native:location`` from the runtime too."""
    import pulumi

    from components.plan.offline import run_program

    config = fixture_config("aks")
    config["azure-native:location"] = "westeurope"
    with pytest.raises(pulumi.RunError, match="'eastus', but azure-native:location is 'westeurope'"):
        run_program("aks", config=config)
    config["azure-native:location"] = "eastus"
    assert run_program("aks", config=config).records


@pytest.mark.parametrize(("written", "ceiling"), [(128, "320"), ("128", "320"), ("1e2", "292"), ("100500m", "292500m")])
def test_one_quantity_grammar_everywhere(written: Any, ceiling: str) -> None:
    """Issue #21, item 13: ``borrowingLimit.cpu: 128`` unquoted was refused (while ``quota.cpu: 128``
    worked), and ``1e2`` met the elastic code's own narrower parser. Now both read the loader's."""
    raw = raw_stack("onprem")
    raw["teams"][0]["queue"]["borrowingLimit"]["cpu"] = written
    cfg = parse_config(raw)
    assert elastic.quota_ceilings(cfg, cfg.teams[0])["requests.cpu"] == ceiling  # quota 192 + the limit


def test_the_kubeconfig_context_reaches_only_the_kubernetes_provider() -> None:
    """Issue #21, item 13: besides its grammar (no shell syntax), the context name goes nowhere a
    shell or a file format reads: only into the Kubernetes provider's ``context`` and the summary."""
    raw = raw_stack("onprem")
    marker = "ctx-marker@cluster.example:6443/admin"
    raw["platform"]["kubeconfigContext"] = marker
    run = run_program("onprem", config=qualified(raw))
    carriers = {r.type for r in run.records if marker in json.dumps(r.inputs)}
    assert carriers == {"pulumi:providers:kubernetes"}
    assert marker not in json.dumps(run.outputs)
