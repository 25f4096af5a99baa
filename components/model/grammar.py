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
from typing import Any
from urllib.parse import urlsplit

from components.model.errors import Issue, path
from components.model.quantity import QUANTITY_HELP as QUANTITY_HELP
from components.model.quantity import QuantityError as QuantityError
from components.model.quantity import check_quantity as check_quantity
from components.model.quantity import parse_quantity as parse_quantity

# --------------------------------------------------------------------------------------------
# Text that reaches a line-based format (shell, partitions.conf, GUID plan lines, opensm.conf)


def control_characters(text: str) -> list[str]:
    """The control, line-separator and invisible formatting characters in ``text``, as escapes
    (``\\n``, ``\\x1b``, ``\\u2028``, ``\\u202e``).

    Unicode categories Cc (C0, DEL, C1), Zl and Zp: newlines end a line of partitions.conf, the
    GUID plan or a shell word; the others reach terminals and logs unescaped. And Cf, the
    invisible formatting characters: bidi overrides and isolates (U+202A..U+202E, U+2066..U+2069)
    and zero-width ones (U+200B..U+200D, U+2060, U+FEFF) make a value read as another in review
    ("Trojan Source", CVE-2021-42574): ``vision\\u200b`` looks like ``vision`` and is not.
    """
    found = []
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
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


#: Kubeconfig context names as clusters' tools write them: ``onprem-admin``, ``kubernetes-admin@kubernetes``,
#: EKS ``arn:aws:eks:us-east-1:123456789012:cluster/prod``, GKE ``gke_proj_us-central1-a_prod``,
#: OpenShift ``default/api-example-com:6443/kube:admin``. Nothing a shell reads as syntax.
_CONTEXT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:/+=,-]{0,252}$")


def check_kubeconfig_context(value: str) -> str:
    """A kubeconfig context name: it only selects a context of the kubeconfig (the Kubernetes
    provider's ``context``) and is shown in the plan's summary; never shell syntax, refused if it
    looks like some (``ctx;rm -rf /``) rather than trusted never to reach a shell."""
    check_line_text(value)
    if not _CONTEXT.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a kubeconfig context name (1-253 letters, digits and . _ @ : / + = , -, starting "
            "with a letter or digit; no spaces, quotes or shell characters)"
        )
    return value


def check_host_path(value: str) -> str:
    """An absolute path on the nodes (a hostPath, a file Multus waits for): no ``.`` or ``..`` part,
    which would lead a hostPath volume or the Multus config out of the directory named."""
    if not re.fullmatch(r"(/[A-Za-z0-9_.-]+)+/?", value):
        raise ValueError(f"{value!r} is not an absolute path (/ then letters, digits, '_', '.', '-' per part)")
    parts = [p for p in value.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"{value!r} has a '.' or '..' part; name the directory itself (e.g. /etc/cni/net.d)")
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
    """A chart repository URL: https, http or oci, with a host, no spaces or quotes, no credentials.

    ``https://user:token@host/charts`` would work, and put the token into the plan files, the
    Pulumi state and every log line naming the repository: credentials belong to ``helm repo add
    --username`` or ``helm registry login``, never the URL (RFC 3986 3.2.1 deprecates them there).
    """
    bad = set(value) & set(" \t\"'`<>\\")
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("https", "http", "oci") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # a malformed port or IPv6 host
        ok = False
    if bad or not ok:
        raise ValueError(f"{value!r} is not a repository URL (https://host/path, http:// or oci://host/path)")
    if "@" in parts.netloc:
        raise ValueError(
            f"{_without_userinfo(value)!r} (credentials removed) is not a repository URL: it carries a user name or "
            "password, which would land in the plan files and the state; write the URL without them "
            "(https://host/path) and log in with helm repo add --username or helm registry login"
        )
    return value


def _without_userinfo(value: str) -> str:
    scheme, sep, rest = value.partition("://")
    netloc, slash, tail = rest.partition("/")
    return f"{scheme}{sep}***@{netloc.rpartition('@')[2]}{slash}{tail}"


#: Helm's scheme for charts in an OCI registry.
OCI_SCHEME = "oci://"


def check_oci_reference(value: str) -> str:
    """A chart as an OCI reference, ``oci://<registry>[:port]/<path>`` (Helm's ``oci://`` scheme,
    helm.sh/helm/v3 pkg/registry): after the scheme an image repository with its registry
    (distribution/reference's grammar), no tag or digest (the version is given beside it) and no
    credentials."""
    rest = value.removeprefix(OCI_SCHEME)
    registry = rest.partition("/")[0]
    # distribution/reference: the first component is the registry when it has a '.' or ':' or is localhost.
    has_registry = "." in registry or ":" in registry or registry == "localhost"
    ok = value.startswith(OCI_SCHEME) and "/" in rest and has_registry
    try:
        ok = ok and bool(check_image_repository(rest))
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{value!r} is not an OCI chart reference (oci://<registry>[:port]/<path>/<chart>, lowercase path "
            "components, no tag, digest, spaces or credentials), e.g. oci://registry.k8s.io/kueue/charts/kueue"
        )
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
