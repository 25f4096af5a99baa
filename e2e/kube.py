"""A small Kubernetes REST client on the standard library, for the e2e suite.

Just what the tests need, with nothing between them and the API server's own answers: discovery
(kind -> resource path), server-side apply, create/get/list/patch/delete, and impersonation of a
user with groups (``Impersonate-User`` / ``Impersonate-Group``, one header per group, which is why
this uses http.client and not urllib). Errors carry the server's Status message verbatim, so a
test can assert *why* the server refused.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import ssl
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

#: The least bound of :meth:`Kube.wait_for`, in seconds.
MIN_WAIT = 120.0


@dataclasses.dataclass(frozen=True)
class Identity:
    """Whom to impersonate: a user name and its groups (as an OIDC login would carry them)."""

    user: str
    groups: tuple[str, ...] = ()


class ApiError(Exception):
    """A non-2xx answer: the HTTP status, the Status reason and message from the server."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


@dataclasses.dataclass(frozen=True)
class Resource:
    group_version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced:
            if namespace is None:
                raise ValueError(f"{self.plural} is namespaced: a namespace is needed")
            base += f"/namespaces/{namespace}"
        path = f"{base}/{self.plural}"
        if name is not None:
            path += f"/{urllib.parse.quote(name)}"
        if sub:
            path += f"/{sub}"
        return path


class Kube:
    def __init__(self, server: str, token: str, ca_file: Path) -> None:
        u = urllib.parse.urlsplit(server)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 443
        self.token = token
        self.ca_file = ca_file
        self._ctx: ssl.SSLContext | None = None
        self._resources: dict[tuple[str, str], Resource] = {}
        #: Every ``Warning`` header the server sent (deprecated APIs, Pod Security ``warn``), in order.
        self.warnings: list[str] = []

    # ---------------------------------------------------------------------------------------
    def _context(self) -> ssl.SSLContext:
        if self._ctx is None:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
            # The API server's self-signed serving certificate names localhost and its advertise
            # address; we connect to 127.0.0.1, which it covers.
            self._ctx = ctx
        return self._ctx

    def request(
        self,
        method: str,
        path: str,
        body: Obj | list[Any] | str | None = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        as_: Identity | None = None,
        timeout: float = 60.0,
        retries: int = 20,
    ) -> Any:
        """One API call; connection failures (e.g. an API server restarting) are retried."""
        if query:
            path += "?" + urllib.parse.urlencode(query)
        data = None
        if body is not None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
        for attempt in range(retries + 1):
            conn = http.client.HTTPSConnection(self.host, self.port, context=self._context(), timeout=timeout)
            try:
                conn.putrequest(method, path)
                conn.putheader("Authorization", f"Bearer {self.token}")
                conn.putheader("Accept", "application/json")
                if as_ is not None:
                    conn.putheader("Impersonate-User", as_.user)
                    for g in as_.groups:
                        conn.putheader("Impersonate-Group", g)
                if data is not None:
                    conn.putheader("Content-Type", content_type)
                    conn.putheader("Content-Length", str(len(data)))
                conn.endheaders(data)
                resp = conn.getresponse()
                raw = resp.read()
                self.warnings.extend(resp.headers.get_all("Warning") or [])
                status = resp.status
            except (ConnectionError, OSError, http.client.HTTPException):
                conn.close()
                if attempt == retries:
                    raise
                time.sleep(0.5)
                continue
            finally:
                conn.close()
            try:
                doc = json.loads(raw) if raw else {}
            except ValueError:
                doc = {"message": raw.decode(errors="replace")}
            if status >= 400:
                if isinstance(doc, dict):
                    raise ApiError(status, str(doc.get("reason", "")), str(doc.get("message", raw[:500])), doc)
                raise ApiError(status, "", str(raw[:500]))
            return doc
        raise AssertionError("unreachable")

    def readyz(self) -> bool:
        try:
            self.request("GET", "/readyz", retries=0, timeout=5)
        except (ApiError, OSError, ValueError):
            return False
        return True

    # ---------------------------------------------------------------------------------------
    # discovery
    def _discover(self) -> None:
        found: dict[tuple[str, str], Resource] = {}
        gvs = ["v1"]
        for g in self.request("GET", "/apis").get("groups", []):
            gvs += [v["groupVersion"] for v in g.get("versions", [])]
        for gv in gvs:
            path = "/api/v1" if gv == "v1" else f"/apis/{gv}"
            try:
                doc = self.request("GET", path)
            except ApiError:
                continue  # e.g. an aggregated API that is not available
            for r in doc.get("resources", []):
                if "/" in r["name"]:
                    continue
                found[(gv, r["kind"])] = Resource(gv, r["name"], bool(r["namespaced"]))
        self._resources = found

    def resource(self, api_version: str, kind: str) -> Resource:
        key = (api_version, kind)
        if key not in self._resources:
            self._discover()
        if key not in self._resources:
            raise KeyError(f"the API server serves no {kind} in {api_version}")
        return self._resources[key]

    def served(self, api_version: str, kind: str) -> bool:
        try:
            self.resource(api_version, kind)
        except KeyError:
            return False
        return True

    def path_of(self, obj: Obj, sub: str | None = None, named: bool = True) -> str:
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj.get("metadata", {})
        ns = meta.get("namespace") or ("default" if res.namespaced else None)
        return res.path(ns if res.namespaced else None, meta.get("name") if named else None, sub)

    # ---------------------------------------------------------------------------------------
    # verbs
    def apply(self, obj: Obj, manager: str = "gpuaas-e2e", force: bool = True, as_: Identity | None = None) -> Obj:
        """Server-side apply (PATCH application/apply-patch+yaml; JSON is YAML)."""
        query = {"fieldManager": manager}
        if force:
            query["force"] = "true"
        out: Obj = self.request(
            "PATCH", self.path_of(obj), obj, content_type="application/apply-patch+yaml", query=query, as_=as_
        )
        return out

    def create(self, obj: Obj, as_: Identity | None = None, dry_run: bool = False) -> Obj:
        query = {"dryRun": "All"} if dry_run else None
        out: Obj = self.request("POST", self.path_of(obj, named=False), obj, query=query, as_=as_)
        return out

    def replace(self, obj: Obj, as_: Identity | None = None) -> Obj:
        out: Obj = self.request("PUT", self.path_of(obj), obj, as_=as_)
        return out

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Obj | list[Any],
        *,
        kind_of_patch: str = "merge",
        sub: str | None = None,
        as_: Identity | None = None,
    ) -> Obj:
        ct = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[kind_of_patch]
        path = self.resource(api_version, kind).path(namespace, name, sub)
        out: Obj = self.request("PATCH", path, patch, content_type=ct, as_=as_)
        return out

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, as_: Identity | None = None
    ) -> Obj | None:
        try:
            out: Obj = self.request("GET", self.resource(api_version, kind).path(namespace, name), as_=as_)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        return out

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        as_: Identity | None = None,
        selector: str | None = None,
    ) -> list[Obj]:
        res = self.resource(api_version, kind)
        base = "/api/v1" if res.group_version == "v1" else f"/apis/{res.group_version}"
        ns = f"/namespaces/{namespace}" if (res.namespaced and namespace) else ""
        path = f"{base}{ns}/{res.plural}"
        query = {"labelSelector": selector} if selector else None
        items: list[Obj] = self.request("GET", path, query=query, as_=as_).get("items", [])
        return items

    def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, as_: Identity | None = None
    ) -> None:
        try:
            self.request("DELETE", self.resource(api_version, kind).path(namespace, name), as_=as_)
        except ApiError as e:
            if e.status != 404:
                raise

    def can_i(
        self, verb: str, resource: str, namespace: str | None, as_: Identity, group: str = "", sub: str = ""
    ) -> bool:
        """SubjectAccessReview for the impersonated identity: the RBAC authorizer's own answer."""
        attrs: Obj = {"verb": verb, "resource": resource, "group": group}
        if namespace:
            attrs["namespace"] = namespace
        if sub:
            attrs["subresource"] = sub
        sar = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": as_.user, "groups": list(as_.groups), "resourceAttributes": attrs},
        }
        out = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
        return bool(out.get("status", {}).get("allowed"))

    def wait_for(self, what: str, cond: Callable[[], Any], timeout: float = 60.0, every: float = 0.25) -> Any:
        """Poll ``cond`` until it returns something truthy (returned) or the bound passes (a
        ``TimeoutError`` naming ``what`` and the last value).

        The bound is at least :data:`MIN_WAIT`: what the tests wait for is a controller's catch-up
        (quota recount, garbage collector, scheduler, Kueue, KWOK), which a loaded machine delays by
        tens of seconds; a wait returns as soon as the state is there, so the floor costs nothing
        when things go right (issue 34: the suite passes on a busy 2-core machine).
        """
        timeout = max(timeout, MIN_WAIT)
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = cond()
            if last:
                return last
            time.sleep(every)
        raise TimeoutError(f"{what}: not reached in {timeout:.0f} s (last: {last!r})")
