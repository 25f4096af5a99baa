"""The consumers' grammars (components/model/grammar.py): each refusal beside a value the consumer takes."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.model import azure_grammar
from components.model import grammar as g

# --------------------------------------------------------------------------------------------
# Kubernetes quantities, cases from apimachinery's quantity_test.go and its grammar


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", Decimal(0)),
        ("64", Decimal(64)),
        ("500m", Decimal("0.5")),
        ("512Gi", Decimal(512 * 2**30)),
        ("1.5Gi", Decimal("1.5") * 2**30),
        ("1Ki", Decimal(1024)),
        ("1k", Decimal(1000)),
        ("1E", Decimal(10) ** 18),  # Exa, not an exponent
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5e+3", Decimal(1500)),
        ("1e-3", Decimal("0.001")),
        ("5n", Decimal("5e-9")),
        ("5u", Decimal("5e-6")),
        ("+1", Decimal(1)),
        ("-1", Decimal(-1)),
        ("1.", Decimal(1)),  # upstream: "we currently allow 1.G"
        (".5", Decimal("0.5")),
        ("007", Decimal(7)),
        ("0Mi", Decimal(0)),
    ],
)
def test_quantities_the_api_server_takes(text: str, value: Decimal) -> None:
    assert g.parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    [
        *["", "12XB", "1.5.Gi", "1 Gi", "1Gi ", " 1", "1i", "0.1mi", ".5i", "1+1.0M", "-3.01e-", "aoeu", "1K", "1kK"],
        "1e",
        # No digit: upstream's loop reads these as 0; its documented grammar (and this port) does not.
        *["-", "+", ".", "Gi", "-Mi", ".e3"],
    ],
)
def test_quantities_the_api_server_refuses(text: str) -> None:
    with pytest.raises(g.QuantityError):
        g.parse_quantity(text)


#: The shape ParseQuantity's own error message states every quantity has (quantity.go).
_UPSTREAM_SHAPE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.text(alphabet="0123456789.+-eEinumkKMGTPx ", max_size=12), st.text(max_size=8)))
def test_any_string_parses_or_is_refused_and_parsed_ones_have_the_upstream_shape(text: str) -> None:
    try:
        g.parse_quantity(text)
    except g.QuantityError:
        return
    assert _UPSTREAM_SHAPE.fullmatch(text) and re.match(r"[+-]?\.?[0-9]", text), text


def test_quota_quantities_are_never_negative_and_yaml_numbers_count() -> None:
    with pytest.raises(ValueError, match="negative"):
        g.check_quantity("-4")
    with pytest.raises(ValueError, match="negative"):
        g.check_quantity(-1)
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        g.check_quantity(True)
    assert g.check_quantity("4") == "4"
    assert g.check_quantity(64) == "64"
    assert g.check_quantity(0.5) == "0.5"


# --------------------------------------------------------------------------------------------
# Table: (checker, refused, allowed) — every refusal has its allowed twin

Check = Callable[[str], str]

CASES: list[tuple[str, Check, str, str]] = [
    ("label key spaces", g.check_label_key, "a b", "a-b"),
    ("label key prefix", g.check_label_key, "Example.com/x", "example.com/x"),
    ("label key empty prefix", g.check_label_key, "/x", "x"),
    ("label key long", g.check_label_key, "k" * 64, "k" * 63),
    ("label key trailing dash", g.check_label_key, "key-", "key"),
    ("label value", g.check_label_value, "a b", "a_b"),
    ("label value long", g.check_label_value, "v" * 64, ""),
    ("taint effect", g.check_taint, "nvidia.com/gpu=present:NoPlace", "nvidia.com/gpu=present:NoSchedule"),
    ("taint no effect", g.check_taint, "nvidia.com/gpu=present", "nvidia.com/gpu:NoExecute"),
    ("taint key", g.check_taint, "bad key=x:NoSchedule", "good-key=x:PreferNoSchedule"),
    ("image uppercase", g.check_image_repository, "nvcr.io/NVIDIA/pytorch", "nvcr.io/nvidia/pytorch"),
    ("image with tag", g.check_image_repository, "nvcr.io/nvidia/pytorch:25.10", "localhost:5000/nvidia/pytorch"),
    ("image double dash sep", g.check_image_repository, "a/b..c", "a/b__c"),
    ("tag latest", g.check_image_tag, "latest", "25.10-py3"),
    ("tag latest pinned", g.check_image_tag, "latest@sha256:" + "g" * 64, "latest@sha256:" + "0" * 64),
    ("tag leading dot", g.check_image_tag, ".v1", "v1"),
    ("tag digest", g.check_image_tag, "v1@sha256:abc", "v1@sha256:" + "a" * 64),
    ("tag space", g.check_image_tag, "v1 0", "v1_0"),
    ("url scheme", g.check_url, "ftp://helm.ngc.nvidia.com/nvidia", "https://helm.ngc.nvidia.com/nvidia"),
    ("url quote", g.check_url, "https://h/'x", "oci://ghcr.io/charts"),
    ("url no host", g.check_url, "https:///nvidia", "http://127.0.0.1:8080/charts"),
    ("subscription", azure_grammar.check_subscription_id, "x", "0b3c5f9e-1234-4abc-9def-0123456789ab"),
    ("resource group dot end", azure_grammar.check_resource_group, "rg.", "rg-gpuaas.prod"),
    ("resource group chars", azure_grammar.check_resource_group, "rg/gpu", "rg_(gpu)"),
    ("resource group long", azure_grammar.check_resource_group, "r" * 91, "r" * 90),
    ("location", azure_grammar.check_location, "East US", "eastus"),
    ("k8s version v", azure_grammar.check_kubernetes_version, "v1.33.5", "1.33.5"),
    ("k8s version word", azure_grammar.check_kubernetes_version, "latest", "1.33"),
    ("vm size", azure_grammar.check_vm_size, "D8ds v5", "Standard_D8ds_v5"),
    ("hca shell", g.check_hca, "mlx5_0;reboot", "mlx5_0"),
    ("hca space", g.check_hca, "mlx5 0", "ibp12s0"),
    ("hca path", g.check_hca, "../mlx5_0", "mlx5_bond_0"),
    ("routing unknown", g.check_routing_engine, "fattree", "ftree"),
    ("routing spaces", g.check_routing_engine, "ftree, updn", "ftree,updn"),
    ("routing twice", g.check_routing_engine, "ftree,ftree", "ftree,minhop,no_fallback"),
    ("routing newline", g.check_routing_engine, "ftree\nlog_flags 0xff", "ar_updn"),
    ("line text empty", g.check_line_text, " ", "oidc:team-vision"),
    ("line text newline", g.check_line_text, "team\nsecond", "team second"),
    ("line text escape", g.check_line_text, "team\x1b[31m", "team[31m"),
    ("line text separator", g.check_line_text, "a\u2028b", "a b"),
]


@pytest.mark.parametrize(("case", "check", "refused", "allowed"), CASES, ids=[c[0] for c in CASES])
def test_grammar_refuses_and_allows(case: str, check: Check, refused: str, allowed: str) -> None:
    with pytest.raises(ValueError) as err:
        check(refused)
    assert repr(refused)[:40] in str(err.value) or refused == ""  # names the bad value
    assert check(allowed) == allowed


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("rdma", "domain prefix"),
        ("kubernetes.io/rdma", "reserved"),
        ("node.kubernetes.io/rdma", "reserved"),
        ("rdma/has space", "letters, digits"),
        ("rdma/" + "x" * 64, "letters, digits"),
        ("R.io/x", "letters, digits"),
    ],
)
def test_extended_resource_names(name: str, problem: str) -> None:
    found = g.extended_resource_problem(name)
    assert found is not None and problem in found
    assert g.extended_resource_problem("rdma/hca_shared_devices_a") is None
    assert g.extended_resource_problem("nvidia.com/sriov8001") is None


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "", "x" * 101, "on prem", "prod\n"])
def test_stack_names_refused(name: str) -> None:
    assert g.stack_name_problem(name) is not None


@pytest.mark.parametrize("name", ["onprem", "aks", "dev.eu-1", "feature_x", "x" * 100])
def test_stack_names_allowed(name: str) -> None:
    assert g.stack_name_problem(name) is None


def test_control_characters_anywhere_in_the_config() -> None:
    raw = {"teams": [{"name": "a", "groups": ["ok", "x\ny"]}], "free\tkey": 1, "fine": {"k": "v"}}
    issues = [str(i) for i in g.control_character_issues(raw)]
    assert issues == [
        "gpuaas:teams[0].groups[1]: 'x\\ny' contains control characters (\\n); config strings are one line of "
        "printable text (they reach shell scripts and line-based files)",
        "gpuaas:[\"free\\tkey\"]: the key 'free\\tkey' contains control characters; keys are one line of "
        "printable text",
    ]
    assert list(g.control_character_issues({"teams": [{"name": "a", "groups": ["ok"]}]})) == []
