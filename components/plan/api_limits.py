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
