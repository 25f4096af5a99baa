"""Waiting for the controllers a test's next step depends on: the one way the e2e tests do it.

The API server answers at once; the controllers behind it catch up later, and on a busy machine
"later" is seconds: the quota controller recounts ``status.used`` after a pod or claim is gone
(kubernetes pkg/controller/resourcequota: replenishment on delete events, then a sync), the garbage
collector removes a deleted owner's dependents, Kueue releases a finished workload's quota, KWOK
confirms a bound pod's deletion. A test that assumes they already have is right on an idle machine
and wrong on a loaded one (issue 34: a quota still counting the previous test's deleted pod refused
the next test's pod). So a test that needs such a state waits for exactly that state, bounded, and a
timeout names what it waited for and what it last saw (:meth:`e2e.kube.Kube.wait_for`).

- :func:`gone`: delete an object, its dependents first (``propagationPolicy: Foreground``: the
  object stays until the garbage collector has removed them), and wait until it is gone;
- :func:`job_gone`: the same for a Job, whose Workload (Kueue's, with Kueue's finalizer) must not
  hold the Job back: the Job goes at once, and the wait is for its pods;
- :func:`quota_given_back`: around a block that creates and deletes what a ResourceQuota counts,
  wait at its end until the quota controller's ``status.used`` is what it was before the block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from components.tenancy import teams
from e2e.kube import ApiError, Kube

#: Long enough for a loaded 2-core machine (the controllers' own resyncs are 30 s to 5 min); the
#: waits return as soon as the state is there.
TIMEOUT: Final = 180.0


def gone(kube: Kube, api_version: str, kind: str, name: str, namespace: str | None, timeout: float = TIMEOUT) -> None:
    """Delete ``kind/name`` with its dependents (a Job's pods, a pod's generated claims) and wait until it is gone."""
    res = kube.resource(api_version, kind)
    with contextlib.suppress(ApiError):  # already gone: nothing to delete
        kube.request("DELETE", res.path(namespace, name), {"propagationPolicy": "Foreground"})
    where = f"{namespace}/{name}" if namespace else name
    kube.wait_for(
        f"{kind} {where} and its dependents deleted (garbage collector, kubelet/KWOK)",
        lambda: kube.get(api_version, kind, name, namespace) is None,
        timeout,
    )


def job_gone(kube: Kube, namespace: str, name: str, timeout: float = TIMEOUT) -> None:
    """Delete a Job (``Background``: a Job's REST default orphans its pods) and wait until the Job and
    every pod of it are gone: the garbage collector deletes them after the Job, and a ResourceQuota
    counts them until then."""
    with contextlib.suppress(ApiError):
        kube.request(
            "DELETE", kube.resource("batch/v1", "Job").path(namespace, name), {"propagationPolicy": "Background"}
        )
    kube.wait_for(
        f"Job {namespace}/{name} and its pods deleted (garbage collector, KWOK)",
        lambda: (
            kube.get("batch/v1", "Job", name, namespace) is None
            and not kube.list("v1", "Pod", namespace, selector=f"batch.kubernetes.io/job-name={name}")
        ),
        timeout,
    )


def used(kube: Kube, namespace: str, quota: str = teams.QUOTA) -> dict[str, str]:
    """The quota controller's last count (``status.used``) of a ResourceQuota; ``{}`` before its first."""
    obj: dict[str, Any] = kube.get("v1", "ResourceQuota", quota, namespace) or {}
    return dict((obj.get("status") or {}).get("used") or {})


@contextlib.contextmanager
def quota_given_back(
    kube: Kube, namespace: str, quota: str = teams.QUOTA, timeout: float = TIMEOUT
) -> Iterator[dict[str, str]]:
    """Yield ``status.used`` as it is; at the end wait until the quota controller counts that again.

    A failure inside the block is not hidden behind a timeout here: the wait is still made (the
    next test needs it), and its own timeout is dropped in favour of the block's error.
    """
    before = used(kube, namespace, quota)
    failed = False
    try:
        yield before
    except BaseException:
        failed = True
        raise
    finally:
        try:
            kube.wait_for(
                f"the quota controller's recount of {namespace}/{quota} back to status.used {before}",
                lambda: used(kube, namespace, quota) == before,
                timeout,
            )
        except TimeoutError:
            if not failed:
                raise
