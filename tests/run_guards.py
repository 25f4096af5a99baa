"""No run passes by not running: the upstream gate, the opt-out's last line, no e2e skips under CI.

``tests/conftest.py`` wires these into pytest's hooks; they live here so that the conftest stays a
list of fixtures. Three promises (issue #21, item 16):

- Without the upstream fixtures folder (:mod:`e2e.upstream`) every run fails at once, naming the
  folder and the variable, unless ``GPUAAS_WITHOUT_UPSTREAM=1`` is set.
- With the opt-out, each test that needs the folder skips, and the run's last line says in capitals
  how many did not run (so a green ``make test`` cannot be mistaken for a whole one).
- Under CI (``CI=true``, as GitHub Actions sets it) an e2e test that skips fails the run, unless its
  skip is one of :data:`MACHINE_DEPENDENT`, raised through :func:`skip_machine`.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

from e2e import upstream

#: The only e2e skips CI accepts: cases that depend on the machine, not on the repository or the
#: fixtures, each with why. A test skips for one of them with ``skip_machine(case, detail)``.
MACHINE_DEPENDENT: dict[str, str] = {
    "network namespaces": (
        "creating a network namespace (unshare -n, ip netns) needs CAP_SYS_ADMIN and CAP_NET_ADMIN, "
        "which unprivileged containers and some hosted runners do not grant"
    ),
    "user namespaces": (
        "unprivileged user namespaces (unshare -U) are disabled by sysctl on some kernels "
        "(kernel.unprivileged_userns_clone=0, AppArmor's restrict_unprivileged_userns)"
    ),
}

_MACHINE_PREFIX = "machine-dependent ({case})"
OPT_OUT_PREFIX = f"{upstream.OPT_OUT}=1"


def skip_machine(case: str, detail: str) -> NoReturn:
    """Skip for a machine-dependent reason CI accepts; ``case`` must be a key of :data:`MACHINE_DEPENDENT`."""
    if case not in MACHINE_DEPENDENT:
        raise KeyError(f"{case!r} is not a machine-dependent case: add it to MACHINE_DEPENDENT with its reason")
    pytest.skip(f"{_MACHINE_PREFIX.format(case=case)}: {detail}")


def need_upstream(relpath: str = "") -> upstream.CheckedPath:
    """The upstream folder (or ``relpath`` in it), checked; a skip only under the explicit opt-out,
    a failure naming the folder and the variable otherwise."""
    try:
        root = upstream.root()
        return root.joinpath(relpath) if relpath else root
    except upstream.UpstreamAbsentError as e:
        if upstream.opted_out():
            pytest.skip(f"{OPT_OUT_PREFIX}: {e}")
        pytest.fail(str(e), pytrace=False)
    except upstream.UpstreamError as e:
        pytest.fail(str(e), pytrace=False)


def gate() -> None:
    """At start-up: the folder is there, or the run is told not to need it."""
    if not upstream.present() and not upstream.opted_out():
        raise pytest.UsageError(upstream.absent_message())


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def is_machine_dependent(reason: str) -> bool:
    return any(reason.startswith(_MACHINE_PREFIX.format(case=case) + ":") for case in MACHINE_DEPENDENT)


class Tally:
    """What the hooks saw: opt-out skips and the e2e skips CI refuses."""

    def __init__(self) -> None:
        self.opt_out: list[str] = []
        self.refused: list[tuple[str, str]] = []

    def record(self, report: pytest.TestReport) -> None:
        if not report.skipped:
            return
        reason = skip_reason(report)
        if reason.startswith(OPT_OUT_PREFIX):
            self.opt_out.append(report.nodeid)
        if "e2e" in report.keywords and under_ci() and not is_machine_dependent(reason):
            self.refused.append((report.nodeid, reason))

    def finish(self, session: pytest.Session) -> None:
        if self.refused:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def summary(self, reporter: pytest.TerminalReporter) -> None:
        line = reporter.write_line
        if self.refused:
            line("")
            line(f"{len(self.refused)} e2e test(s) skipped under CI (CI=true), which fails the run:", red=True)
            for nodeid, reason in self.refused:
                line(f"  {nodeid}: {reason}")
            line(f"  only these machine-dependent skips are accepted: {', '.join(sorted(MACHINE_DEPENDENT))}")

    def last_line(self) -> str | None:
        if not upstream.opted_out():
            return None
        e2e = sum(1 for n in self.opt_out if n.startswith("tests/e2e/"))
        folder = upstream.upstream_dir()
        return (
            f"{upstream.OPT_OUT}=1: {len(self.opt_out)} TESTS THAT NEED THE UPSTREAM FIXTURES ({folder}) "
            f"DID NOT RUN ({len(self.opt_out) - e2e} UNIT, {e2e} E2E): THIS RUN DOES NOT CHECK OUR OBJECTS AGAINST "
            "UPSTREAM CHARTS, CRDS AND SCHEMAS"
        )
