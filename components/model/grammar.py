"""The grammars of what config values flow into: Kubernetes, Azure, OpenSM, shell and line formats.

The rule: a config value is checked at load with the grammar of the thing that consumes it, so a
bad value is a ``gpuaas:<path>`` problem before anything is touched, never a refused apply, a
broken script or a silently mangled file. Each checker here is a port of its consumer's own rule
and cites it; :mod:`components.model.types` wraps them as annotated types for :mod:`components.model.config`.

Every message says what the value is not, the value, and what is allowed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from components.model.errors import Issue, path

# --------------------------------------------------------------------------------------------
# Text that reaches a line-based format (shell, partitions.conf, GUID plan lines, opensm.conf)


def control_characters(text: str) -> list[str]:
    """The control and line-separator characters in ``text``, as escapes (``\\n``, ``\\x1b``, ``\\u2028``).

    Unicode categories Cc (C0, DEL, C1), Zl and Zp: newlines end a line of partitions.conf, the
    GUID plan or a shell word; the others reach terminals and logs unescaped.
    """
    found = []
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            esc = repr(ch)[1:-1]
            if esc not in found:
                found.append(esc)
    return found


def check_line_text(value: str) -> str:
    """A single-line, non-empty string (kubeconfig contexts, group names)."""
    if not value.strip():
        raise ValueError(f"{value!r} is empty; a non-empty name is required")
    bad = control_characters(value)
    if bad:
        raise ValueError(f"{value!r} contains control characters ({', '.join(bad)}); one line of printable text only")
    return value


def control_character_issues(raw: Any, loc: tuple[str | int, ...] = ()) -> Iterator[Issue]:
    """Every string (keys included) anywhere in ``raw`` that holds a control character.

    A general rule beside the per-field grammars: no config string may carry a newline into a
    line-based format, whatever field it is in, including free-form ones.
    """
    if isinstance(raw, str):
        bad = control_characters(raw)
        if bad:
            yield Issue(
                path(loc),
                f"{_short(raw)} contains control characters ({', '.join(bad)}); config strings are one line "
                "of printable text (they reach shell scripts and line-based files)",
            )
    elif isinstance(raw, Mapping):
        for key, value in raw.items():
            if isinstance(key, str) and control_characters(key):
                yield Issue(
                    path((*loc, repr(key)[1:-1])),  # escaped: the path is printed on one line too
                    f"the key {_short(key)} contains control characters; keys are one line of printable text",
                )
                continue
            yield from control_character_issues(value, (*loc, key if isinstance(key, str) else str(key)))
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            yield from control_character_issues(value, (*loc, i))


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------
# Kubernetes quantities: a port of k8s.io/apimachinery/pkg/api/resource/quantity.go
#
#   <quantity>        ::= <signedNumber><suffix>
#   <signedNumber>    ::= <number> | <sign><number>
#   <sign>            ::= "+" | "-"
#   <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
#   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
#   <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
#   <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an integer: strconv.ParseInt)

_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: The characters parseQuantityString lets into a suffix before an exponent's sign and digits.
_SUFFIX_CHARS = "eEinumkKMGTP"
QUANTITY_HELP = (
    "a Kubernetes quantity: a number with an optional suffix Ki Mi Gi Ti Pi Ei (binary), "
    "n u m k M G T P E (decimal) or an exponent e3, e.g. 64, 500m, 512Gi, 1.5Ti"
)


class QuantityError(ValueError):
    """``ParseQuantity`` would return ErrFormatWrong, ErrSuffix or ErrNumeric."""


def _split_quantity(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, numerator, denominator, suffix).

    Like upstream, leading zeros are dropped and ``1.`` and ``.5`` are numbers. Stricter in one
    way: the number needs a digit. Upstream's loop reads ``-``, ``.`` and ``Gi`` as 0, which the
    grammar in its own doc comment (above) does not allow, and a quota of ``Gi`` is a typo.
    """
    if not re.match(r"[+-]?\.?[0-9]", text):
        raise QuantityError(f"{text!r} does not start with a number; {QUANTITY_HELP}")
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        raise QuantityError(f"{text!r} is not {QUANTITY_HELP}")
    return positive, value, num, denom, text[suffix_start:]


def parse_quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity string, or :class:`QuantityError` where the API refuses it."""
    if not text:
        raise QuantityError(f"{text!r} is not {QUANTITY_HELP}")
    if text == "0":
        return Decimal(0)
    positive, _value, num, denom, suffix = _split_quantity(text)
    if suffix in _DECIMAL_SI:
        scale = Decimal(10) ** _DECIMAL_SI[suffix]
    elif suffix in _BINARY_SI:
        scale = Decimal(2) ** _BINARY_SI[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        exponent = int(suffix[1:])
        if not -(2**63) <= exponent < 2**63:  # strconv.ParseInt(..., 10, 64)
            raise QuantityError(f"{text!r}: the exponent {suffix[1:]} is out of range")
        # Upstream then narrows it to int32 (a huge exponent wraps); only validity and sign
        # matter here, so the magnitude is clamped instead.
        scale = Decimal(10) ** max(min(exponent, 10**6), -(10**6))
    else:
        raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}; {QUANTITY_HELP}")
    try:
        amount = Decimal(f"{num}.{denom or '0'}") * scale
    except InvalidOperation:
        raise QuantityError(f"{text!r} is not {QUANTITY_HELP}") from None
    return amount if positive else -amount


def check_quantity(value: Any) -> str:
    """A non-negative quantity (requests, limits, quotas); YAML numbers are taken as their text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not {QUANTITY_HELP}")
    text = value if isinstance(value, str) else str(value)
    amount = parse_quantity(text)
    if amount < 0:
        raise ValueError(f"{text!r} is negative; a quota or request is 0 or more")
    return text


# --------------------------------------------------------------------------------------------
# Kubernetes names: apimachinery/pkg/util/validation/validation.go

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_HELP = (
    "an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit (e.g. example.com/my-key)"
)


def qualified_name_problem(value: str) -> str | None:
    """``IsQualifiedName``: label keys, annotation keys, taint and toleration keys."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return "its prefix before '/' is empty"
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return f"its prefix {prefix!r} is not a DNS-1123 subdomain (lowercase, at most 253 characters)"
    if not name:
        return "its name part is empty"
    if len(name) > 63:
        return f"its name part is {len(name)} characters (at most 63)"
    if not _QUALIFIED_NAME.fullmatch(name):
        return f"its name part {name!r} is not letters, digits, '-', '_' or '.' starting and ending alphanumeric"
    return None


def check_label_key(value: str) -> str:
    problem = qualified_name_problem(value)
    if problem:
        raise ValueError(f"{value!r} is not a Kubernetes label key: {problem}; allowed: {QUALIFIED_HELP}")
    return value


def check_label_value(value: str) -> str:
    """``IsValidLabelValue``: empty, or at most 63 alphanumerics, '-', '_', '.' (alphanumeric ends)."""
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes label value (empty or at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return value


def extended_resource_problem(name: str) -> str | None:
    """``IsExtendedResourceName`` (apis/core/validation): ``<domain>/<name>``, not kubernetes.io's."""
    if "/" not in name:
        return "an extended resource name needs a domain prefix, e.g. rdma/hca_shared_devices_a"
    prefix = name.split("/", 1)[0]
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return "the kubernetes.io domain is reserved for Kubernetes' own resources"
    # Quotas name it requests.<name>, which must itself be a qualified name.
    problem = qualified_name_problem(f"requests.{name}")
    if problem is not None or qualified_name_problem(name) is not None:
        return f"{QUALIFIED_HELP} (also as requests.<name> in a ResourceQuota)"
    return None


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def check_taint(value: str) -> str:
    """An AKS ``nodeTaints`` entry ``key[=value]:Effect`` (the kubectl taint form AKS takes)."""
    key_value, colon, effect = value.rpartition(":")
    if not colon:
        raise ValueError(f"{value!r} is not a taint; write key=value:Effect or key:Effect")
    key, _eq, val = key_value.partition("=")
    problems = []
    if effect not in TAINT_EFFECTS:
        problems.append(f"effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    key_problem = qualified_name_problem(key)
    if key_problem:
        problems.append(f"key {key!r}: {key_problem}")
    if len(val) > 63 or not _LABEL_VALUE.fullmatch(val):
        problems.append(f"value {val!r} is not a label value")
    if problems:
        raise ValueError(f"{value!r} is not a taint key[=value]:Effect: {'; '.join(problems)}")
    return value


# --------------------------------------------------------------------------------------------
# Images: github.com/distribution/reference regexp.go

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_REPOSITORY = re.compile(rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # Go regexp \w is ASCII
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
#: distribution/reference NameTotalLengthMax.
NAME_TOTAL_LENGTH_MAX = 255


def check_image_repository(value: str) -> str:
    """An image name without tag: ``[registry[:port]/]path``, lowercase path components."""
    if len(value) > NAME_TOTAL_LENGTH_MAX or not _REPOSITORY.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an image repository (distribution/reference: [registry[:port]/]name/..., "
            "lowercase letters, digits and single separators '.', '_', '__' or '-', no tag; "
            f"at most {NAME_TOTAL_LENGTH_MAX} characters), e.g. nvcr.io/nvidia/pytorch"
        )
    return value


def check_image_tag(value: str) -> str:
    """A pinned tag, optionally with its digest (``v1.3.0``, ``v1.3.0@sha256:…``).

    ``latest`` alone is a moving tag; with a digest it is pinned (the digest wins when pulling),
    which is how an image published only under moving tags is pinned.
    """
    tag, at, digest = value.partition("@")
    if (tag == "latest" and not at) or not _TAG.fullmatch(tag) or (at and not _DIGEST.fullmatch(digest)):
        raise ValueError(
            f"{value!r} is not a pinned image tag (1-128 letters, digits, '_', '.', '-', not starting with '.' "
            "or '-', optionally followed by @sha256:<64 hex digits>; 'latest' only with a digest)"
        )
    return value


def check_url(value: str) -> str:
    """A chart repository URL: https, http or oci, with a host, no spaces or quotes."""
    bad = set(value) & set(" \t\"'`<>\\")
    parts = urlsplit(value)
    if bad or parts.scheme not in ("https", "http", "oci") or not parts.hostname:
        raise ValueError(f"{value!r} is not a repository URL (https://host/path, http:// or oci://host/path)")
    return value


# --------------------------------------------------------------------------------------------
# InfiniBand: HCA device names, OpenSM routing engines

#: RDMA device names (``ibv_devices``, /sys/class/infiniband/<name>): IB_DEVICE_NAME_MAX is 64
#: with the NUL (include/rdma/ib_verbs.h). gpuaas writes them into a bash script and the GUID
#: plan lines, so only the characters kernel and udev names use are allowed.
_HCA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def check_hca(value: str) -> str:
    if not _HCA.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an RDMA device name as ibv_devices prints it (e.g. mlx5_0: 1-63 letters, "
            "digits, '_', '.', '-', starting with a letter or digit)"
        )
    return value


#: Engines of linux-rdma/opensm (opensm/osm_opensm.c routing_modules; opensm(8) -R), plus
#: ``ar_updn``, NVIDIA OpenSM's adaptive-routing up/down (NVIDIA's default; UFM opensm.conf notes).
ROUTING_ENGINES = (
    "minhop",
    "updn",
    "dnup",
    "file",
    "ftree",
    "lash",
    "dor",
    "torus-2QoS",
    "nue",
    "dfsssp",
    "sssp",
    "ar_updn",
)


def check_routing_engine(value: str) -> str:
    """``routing_engine``: a comma list tried in order, optionally ending in ``no_fallback``."""
    names = value.split(",")
    engines = names[:-1] if len(names) > 1 and names[-1] == "no_fallback" else names
    unknown = [n for n in engines if n not in ROUTING_ENGINES]
    if unknown or len(set(engines)) != len(engines):
        raise ValueError(
            f"{value!r} is not an OpenSM routing_engine list (comma-separated, no spaces, each once, optionally "
            f"ending in no_fallback); engines: {', '.join(ROUTING_ENGINES)}"
        )
    return value


# --------------------------------------------------------------------------------------------
# Pulumi

#: pulumi/pulumi pkg/backend/httpstate: stackNameAndProjectRegexp ``^[A-Za-z0-9_.-]{1,100}$``.
_STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def stack_name_problem(name: str) -> str | None:
    """Why ``name`` is not a Pulumi stack name (or a path in disguise), or ``None``."""
    if not _STACK_NAME.fullmatch(name):
        return "Pulumi stack names are 1-100 letters, digits, '-', '_' or '.'"
    if name.strip(".") == "":
        return "'.' and '..' are directories, not stack names"
    return None
