"""Annotated domain types shared by the config model.

Each type normalises what users write (``1``, ``"0x1"``, ``"0x8001"`` are one P_Key) so that
uniqueness checks and renderers compare canonical values, never spellings.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from components.model import azure_grammar, grammar

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SEMVER_TAG = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$")
GUID_TEXT = re.compile(r"^(0x)?[0-9a-fA-F]{1,16}$")
GUID_COLONS = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){7}$")
AKS_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")

#: Team partitions use 15-bit keys; 0x7fff is the default partition every port is in.
PKEY_MIN = 0x0001
PKEY_MAX = 0x7FFE
DEFAULT_PKEY = 0x7FFF
FULL_MEMBER_BIT = 0x8000


def _dns_label(value: str) -> str:
    if len(value) > 63 or not DNS1123_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters)"
        )
    return value


def _dns_subdomain(value: str) -> str:
    if len(value) > 253 or not DNS1123_SUBDOMAIN.fullmatch(value):
        raise ValueError(f"{value!r} is not a DNS-1123 subdomain (at most 253 characters)")
    return value


def parse_pkey(value: Any) -> int:
    """Return the 15-bit partition key of ``value`` however it is written.

    ``1``, ``"1"``, ``"0x1"``, ``"0x0001"`` and the kernel's full-member form ``"0x8001"`` all
    name partition 0x0001 (the membership bit is per port, not per partition; OpenSM ignores it).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a P_Key; write it as a number or hex string like 0x0001")
    if isinstance(value, int):
        raw = value
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            if not text.isascii():  # int() reads every Unicode digit ('１'); OpenSM reads ASCII only
                raise ValueError(text)
            raw = int(text, 16) if text.startswith("0x") else int(text, 10)
        except ValueError:
            raise ValueError(f"{value!r} is not a P_Key; write it as a number or hex string like 0x0001") from None
    else:
        raise ValueError(f"{value!r} is not a P_Key; write it as a number or hex string like 0x0001")
    if raw < 0 or raw > 0xFFFF:
        raise ValueError(f"{format_pkey(raw) if raw >= 0 else raw} is not a 16-bit P_Key")
    key = raw & 0x7FFF
    if not PKEY_MIN <= key <= PKEY_MAX:
        shown = value if isinstance(value, str) else format_pkey(raw)
        raise ValueError(f"{shown} is outside 0x0001..0x7ffe (0x7fff is the default partition)")
    return key


def format_pkey(key: int) -> str:
    """``0x0001`` — the 15-bit form OpenSM's partitions.conf uses."""
    return f"0x{key:04x}"


def full_member_pkey(key: int) -> str:
    """``0x8001`` — the form sysfs prints for a full member (what the pKeys selector matches)."""
    return f"0x{key | FULL_MEMBER_BIT:04x}"


def parse_guid(value: Any) -> int:
    """A 64-bit EUI-64 GUID from ``0x0002c90300000001``, ``02:c9:03:00:00:00:00:01`` or an int."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a GUID")
    if isinstance(value, int):
        guid = value
    elif isinstance(value, str) and GUID_COLONS.match(value.strip()):
        guid = int(value.strip().replace(":", ""), 16)
    elif isinstance(value, str) and GUID_TEXT.match(value.strip()):
        guid = int(value.strip().lower().removeprefix("0x"), 16)
    else:
        raise ValueError(f"{value!r} is not a GUID (16 hex digits, e.g. 0x02c9030000000000 or 02:c9:03:00:00:00:00:00)")
    if not 0 < guid < 0xFFFF_FFFF_FFFF_FFFF:
        raise ValueError(f"{value!r} is not a usable GUID (all-zero and all-ones GUIDs are rejected by ib-sriov-cni)")
    return guid


def format_guid(guid: int) -> str:
    """``0x0002c90300000001`` — the form OpenSM's partitions.conf expects."""
    return f"0x{guid:016x}"


def colon_guid(guid: int) -> str:
    """``00:02:c9:03:00:00:00:01`` — the form ``ip link … node_guid`` and sysfs expect."""
    raw = f"{guid:016x}"
    return ":".join(raw[i : i + 2] for i in range(0, 16, 2))


def _semver(value: str) -> str:
    if not SEMVER_TAG.fullmatch(value):
        raise ValueError(f"{value!r} is not a pinned chart version like v26.4.1 (ranges and 'latest' are not allowed)")
    return value


def _image_tag(value: str) -> str:
    return grammar.check_image_tag(value)


def _aks_pool(value: str) -> str:
    if not AKS_POOL_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an AKS pool name (lowercase letter, then up to 11 lowercase letters or digits)"
        )
    return value


def _service_account(value: str) -> str:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name:
        raise ValueError(f"{value!r} is not <namespace>/<name> of a ServiceAccount (e.g. kubeflow/training-operator)")
    _dns_label(namespace)
    _dns_subdomain(name)
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
#: ``<namespace>/<name>`` of a ServiceAccount; it signs in as ``system:serviceaccount:<namespace>:<name>``.
ServiceAccountRef = Annotated[str, AfterValidator(_service_account)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
# json_schema_input_type: what a stack file may write (the schema's view), not the parsed int.
PKey = Annotated[int, BeforeValidator(parse_pkey, json_schema_input_type=str | int)]
Guid = Annotated[int, BeforeValidator(parse_guid, json_schema_input_type=str | int)]
ChartVersion = Annotated[str, AfterValidator(_semver)]
ImageTag = Annotated[str, AfterValidator(_image_tag)]
AksPoolName = Annotated[str, AfterValidator(_aks_pool)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]

#: An OCI content digest as image references pin it (opencontainers/image-spec descriptor.md: sha256 is
#: 64 lowercase hex digits).
IMAGE_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
#: A CronJob schedule as Kubernetes parses it (robfig/cron v3 standard parser: five fields, or a
#: descriptor); fields are digits, names and ``* / , - ?``.
CRON_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?-]+$")


def _image_digest(value: str) -> str:
    if not IMAGE_DIGEST.match(value):
        raise ValueError(f"{value!r} is not an image digest (sha256: and 64 lowercase hex digits)")
    return value


def _cron(value: str) -> str:
    fields = value.split()
    if value.strip() in CRON_DESCRIPTORS or (len(fields) == 5 and all(CRON_FIELD.match(f) for f in fields)):
        return value
    raise ValueError(
        f"{value!r} is not a CronJob schedule (five fields 'minute hour day month weekday', e.g. '30 3 * * *', "
        f"or one of {', '.join(sorted(CRON_DESCRIPTORS))})"
    )


ImageDigest = Annotated[str, AfterValidator(_image_digest)]
CronSchedule = Annotated[str, AfterValidator(_cron)]


def mebibytes(text: str) -> int:
    """A memory quantity (``80Gi``, ``81920Mi``) in whole MiB, the unit HAMi counts device memory in.

    HAMi's own quota reads ``limits.nvidia.com/vgpu-memory`` as an integer count of MiB
    (HAMi pkg/device/quota.go ``addQuotaLocked``: ``AsInt64``), so a quota must be a whole MiB.
    """
    value = grammar.parse_quantity(text)
    mebi = value / Decimal(2**20)
    if value < 0 or mebi != mebi.to_integral_value():
        raise grammar.QuantityError(
            f"{text!r} is not a whole number of MiB (HAMi counts device memory in MiB), e.g. 80Gi"
        )
    if mebi > 2**63 - 1:
        raise grammar.QuantityError(f"{text!r} is more MiB than an int64 holds (HAMi reads the quota as one)")
    return int(mebi)


def check_mebibytes(value: Any) -> str:
    """A non-negative memory quantity that is a whole number of MiB; kept as written."""
    text = grammar.check_quantity(value)
    mebibytes(text)
    return text


# Values checked with the grammar of what consumes them (components/model/grammar.py cites each source).
#: A Kubernetes quantity (``64``, ``500m``, ``512Gi``), never negative; kept as written.
Quantity = Annotated[str, BeforeValidator(grammar.check_quantity, json_schema_input_type=str | int)]
#: A memory quantity in whole MiB (``80Gi``): HAMi's device memory.
MemoryMiB = Annotated[str, BeforeValidator(check_mebibytes, json_schema_input_type=str | int)]
LabelKey = Annotated[str, AfterValidator(grammar.check_label_key)]
LabelValue = Annotated[str, AfterValidator(grammar.check_label_value)]
#: An AKS node taint ``key[=value]:Effect``.
Taint = Annotated[str, AfterValidator(grammar.check_taint)]
ImageRepository = Annotated[str, AfterValidator(grammar.check_image_repository)]
RepositoryUrl = Annotated[str, AfterValidator(grammar.check_url)]
AzureSubscriptionId = Annotated[str, AfterValidator(azure_grammar.check_subscription_id)]
AzureResourceGroupName = Annotated[str, AfterValidator(azure_grammar.check_resource_group)]
AzureLocation = Annotated[str, AfterValidator(azure_grammar.check_location)]
AzureVmSize = Annotated[str, AfterValidator(azure_grammar.check_vm_size)]
KubernetesVersion = Annotated[str, AfterValidator(azure_grammar.check_kubernetes_version)]
HcaName = Annotated[str, AfterValidator(grammar.check_hca)]
RoutingEngine = Annotated[str, AfterValidator(grammar.check_routing_engine)]
#: One non-empty line of printable text (group names).
LineText = Annotated[str, AfterValidator(grammar.check_line_text)]
KubeconfigContext = Annotated[str, AfterValidator(grammar.check_kubeconfig_context)]
#: An absolute path on the nodes, without '.' or '..' parts.
HostPath = Annotated[str, AfterValidator(grammar.check_host_path)]


def _priority_class_name(value: str) -> str:
    _dns_subdomain(value)
    if len(value) > 63:
        raise ValueError(
            f"{value!r} is {len(value)} characters: workloads name their priority class in the label "
            "kueue.x-k8s.io/priority-class, whose value is at most 63 characters"
        )
    return value


#: A Kueue WorkloadPriorityClass name: a DNS subdomain that is also a label value (at most 63).
PriorityClassName = Annotated[str, AfterValidator(_priority_class_name)]
#: A user priority: Kubernetes keeps values above 10^9 for system classes (HighestUserDefinablePriority);
#: Kueue stores the value as int32.
UserPriority = Annotated[int, Field(ge=-(2**31), le=1_000_000_000)]


# --------------------------------------------------------------------------------------------
# Numbers as their consumers hold them

#: Kubernetes' and Kueue's int32 fields (``replicas``, a priority's ``value``).
INT32_MAX = 2**31 - 1
#: Go's ``time.Duration`` is int64 nanoseconds: its longest is 2^63-1 ns, 9223372036 whole seconds
#: (about 292 years). Kueue reads ``waitForPodsReady.timeout`` with ``time.ParseDuration`` (which
#: refuses a longer one: "invalid duration"), Helm multiplies the release's timeout seconds by
#: ``time.Second`` (which overflows silently into a negative timeout) and Prometheus' duration
#: parser answers "duration out of range".
GO_DURATION_MAX_SECONDS = (2**63 - 1) // 10**9


def _int32(value: int) -> int:
    if value > INT32_MAX:
        raise ValueError(f"{value} is more than an int32 holds, which is how Kubernetes stores it; at most {INT32_MAX}")
    return value


def check_go_duration_seconds(seconds: int, shown: object) -> None:
    """Refuse ``seconds`` longer than a Go duration holds; ``shown`` is the value as written."""
    if seconds > GO_DURATION_MAX_SECONDS:
        raise ValueError(
            f"{shown} is longer than a Go duration holds (time.Duration, int64 nanoseconds: at most "
            f"{GO_DURATION_MAX_SECONDS} seconds, about 292 years), which is how Kubernetes, Helm and Prometheus read it"
        )


def _go_seconds(value: int) -> int:
    check_go_duration_seconds(value, f"{value} seconds")
    return value


#: A positive count a consumer stores as int32 (``queues.replicas``: the Deployment's ``replicas``).
PositiveInt32 = Annotated[int, Field(ge=1), AfterValidator(_int32)]
#: Seconds a Go program reads as a ``time.Duration`` (Kueue's timeouts, Helm's ``--timeout``).
GoDurationSeconds = Annotated[int, Field(ge=1), AfterValidator(_go_seconds)]
#: A chart in an OCI registry, ``oci://<registry>/<path>`` (``versions.kueueChartRef``).
OciReference = Annotated[str, AfterValidator(grammar.check_oci_reference)]
