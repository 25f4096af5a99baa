"""Size limits the API server enforces on an object, checked before anything is sent.

A plan that renders an object over one of these limits is refused at apply time, mid-rollout,
with some objects applied and others not. The limits (upstream defaults, not configurable per
object):

* ConfigMap and Secret payload: the values of ``data`` and ``binaryData`` (decoded bytes; keys
  not counted) at most ``MaxSecretSize = 1 * 1024 * 1024`` (kubernetes ``pkg/apis/core/types.go``,
  applied by ``ValidateConfigMap``/``ValidateSecret`` in ``pkg/apis/core/validation/validation.go``);
* annotations: ``len(key) + len(value)`` summed over the object at most
  ``TotalAnnotationSizeLimitB = 256 * (1 << 10)`` (kubernetes/apimachinery
  ``pkg/api/validation/objectmeta.go``);
* the whole object: etcd refuses a write over ``--max-request-bytes``, default
  ``DefaultMaxRequestBytes = 1.5 * 1024 * 1024`` (etcd ``server/embed/config.go``), the smaller of
  that and kube-apiserver's 3 MiB ``MaxRequestBodyBytes`` (k8s.io/apiserver
  ``pkg/server/config.go``). The object is stored as protobuf, usually smaller than its JSON, so
  the compact JSON size checked here is the conservative bound.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, Final

from components.model.errors import Issue, path

#: ConfigMap/Secret payload limit (kubernetes ``MaxSecretSize``).
MAX_PAYLOAD_BYTES: Final = 1024 * 1024
#: Annotations of one object, keys and values together (apimachinery ``TotalAnnotationSizeLimitB``).
MAX_ANNOTATION_BYTES: Final = 256 * 1024
#: One object as written to etcd (etcd ``DefaultMaxRequestBytes``).
MAX_OBJECT_BYTES: Final = 1536 * 1024


def _payload_bytes(manifest: Mapping[str, Any]) -> int:
    total = 0
    for key in ("data", "binaryData", "stringData"):
        values = manifest.get(key) or {}
        if not isinstance(values, Mapping):
            continue
        for value in values.values():
            if not isinstance(value, str):
                continue
            binary = key == "binaryData" or (key == "data" and manifest.get("kind") == "Secret")
            if binary:
                try:
                    total += len(base64.b64decode(value, validate=True))
                    continue
                except binascii.Error:
                    pass
            total += len(value.encode())
    return total


def size_problems(manifest: Mapping[str, Any]) -> list[str]:
    """Every size limit ``manifest`` breaks, as ``"<limit>: <size> bytes, allowed <n>"`` lines."""
    problems: list[str] = []
    if manifest.get("kind") in ("ConfigMap", "Secret"):
        payload = _payload_bytes(manifest)
        if payload > MAX_PAYLOAD_BYTES:
            problems.append(
                f"{manifest['kind']} data is {payload} bytes; the API server allows {MAX_PAYLOAD_BYTES} (1 MiB)"
            )
    metadata = manifest.get("metadata") or {}
    annotations = metadata.get("annotations") or {} if isinstance(metadata, Mapping) else {}
    if isinstance(annotations, Mapping):
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in annotations.items())
        if size > MAX_ANNOTATION_BYTES:
            problems.append(f"annotations are {size} bytes; the API server allows {MAX_ANNOTATION_BYTES} (256 KiB)")
    whole = len(json.dumps(manifest, separators=(",", ":"), default=str).encode())
    if whole > MAX_OBJECT_BYTES:
        problems.append(f"the object is {whole} bytes; etcd accepts at most {MAX_OBJECT_BYTES} (1.5 MiB) per write")
    return problems


def _strings(value: Any, loc: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every string of a config (keys fully qualified) with where it is, longest first."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(loc, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            found.append((where, node))
        elif isinstance(node, Mapping):
            stack.extend(((*where, str(k)), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*where, i), v) for i, v in enumerate(node))
    return sorted(found, key=lambda item: -len(item[1]))


#: A config string shorter than this is not named as the cause of an object's size.
_CAUSE_BYTES: Final = 1024


def object_size_issues(manifests: list[Mapping[str, Any]], config: Mapping[str, Any]) -> list[Issue]:
    """The plan's objects over an API size limit, each named by the config keys that make it big.

    Checked in every plan (not only at scale in the benchmark): a description or a group name long
    enough would pass the config's grammar and be refused by etcd mid-``pulumi up``. The key named
    is each long config string the object carries (at least :data:`_CAUSE_BYTES`), largest first;
    an object grown by the number of teams or nodes is named as itself.
    """
    issues: list[Issue] = []
    long_strings: list[tuple[str, str]] | None = None
    for manifest in manifests:
        problems = size_problems(manifest)
        if not problems:
            continue
        meta = manifest.get("metadata") or {}
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        what = f"{manifest.get('kind')} {ns + '/' if ns else ''}{name}"
        if long_strings is None:
            long_strings = [
                (_config_path(loc), text)
                for loc, text in _strings(dict(config), ())
                if len(text.encode()) >= _CAUSE_BYTES
            ]
        text = json.dumps(manifest, separators=(",", ":"), default=str)
        causes = [(key, value) for key, value in long_strings if json.dumps(value)[1:-1] in text][:3]
        for problem in problems:
            if causes:
                for key, value in causes:
                    issues.append(Issue(key, f"{len(value.encode())} bytes make {what} too big: {problem}"))
            else:
                issues.append(Issue(f"plan: {what}", f"{problem} (it grows with the fleet or the teams: split it)"))
    return sorted(set(issues))


def _config_path(loc: tuple[str | int, ...]) -> str:
    """``("gpuaas:teams", 0, "groups", 1)`` → ``gpuaas:teams[0].groups[1]``."""
    first = str(loc[0]) if loc else ""
    if first.startswith("gpuaas:"):
        return path((first.removeprefix("gpuaas:"), *loc[1:]))
    return first + path(loc[1:]).removeprefix("gpuaas:")
