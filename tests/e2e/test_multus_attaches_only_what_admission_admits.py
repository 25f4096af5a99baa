"""Differential fuzzing of the networks annotation: Multus' own parser against our admission.

Thousands of generated pods (tests/e2e/network_annotations.py: every form Multus v4.3.0 accepts
and its edges), each sent as a member of its team to the real API server of the onprem stack
(``dryRun=All``: the whole admission chain, nothing stored) and parsed by Multus' own
``k8sclient.GetPodNetwork`` (e2e/cni ``cni-harness``, built from ../shared/upstream/src). Per pod:

* Multus would attach anything but the team's own NADs, hand the CNI a GUID, cni-args or a
  device, or replace the cluster network (``unsafe``): the API server must refuse it, and the
  refusal must be the networks policy's;
* Multus would attach only the team's own NADs and nothing else (``clean``): the API server must
  admit it — unless it is outside the documented tenant grammar of the JSON form (escapes,
  non-ASCII, keys other than the six, case variants, a foreign namespace key that a later one
  overrides), which the policy refuses by design;
* Multus refuses the annotation itself (``fails``): the sandbox never comes up, either verdict is safe.

The seed (``GPUAAS_FUZZ_SEED``, default below) and the case count (``GPUAAS_FUZZ_CASES``) are
printed; every disagreement is printed with the annotation, both verdicts and the reason.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

from components.loader import parse_config
from components.model.config import StackConfig
from components.tenancy.network_admission import NETWORKS_POLICY
from components.tenancy.networks import nad_name, rdma_nad_name
from e2e import cni
from e2e.kube import ApiError, Identity, Kube
from tests.conftest import raw_stack
from tests.e2e.conftest import AppliedStack, wait_until_refused
from tests.e2e.network_annotations import (
    DEFAULT_NETWORK,
    MULTUS_NAMESPACE,
    NETWORKS,
    AnnotationGenerator,
    Case,
    multus_verdict,
    outside_tenant_grammar,
)

CFG: StackConfig = parse_config(raw_stack("onprem"))
TEAMS = {t.name: t for t in CFG.teams}
SEED = int(os.environ.get("GPUAAS_FUZZ_SEED", "20261201"))
CASES = int(os.environ.get("GPUAAS_FUZZ_CASES", "3000"))
WORKERS = 4


def member(team: str) -> Identity:
    return Identity(f"member-of-{team}@example.com", tuple(TEAMS[team].groups))


def pod(case: Case, i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"fuzz-{i}", "namespace": case.namespace}
    if case.annotations:
        meta["annotations"] = case.annotations
    container = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


def admission(kube: Kube, case: Case, i: int) -> tuple[str, str]:
    """("admitted", "") or ("refused", the policy's message) or ("error", what else answered)."""
    try:
        kube.create(pod(case, i), as_=member(case.namespace), dry_run=True)
    except ApiError as e:
        if f"ValidatingAdmissionPolicy '{NETWORKS_POLICY}'" in e.message:
            return "refused", e.message
        return "error", f"{e.status} {e.message}"
    return "admitted", ""


@pytest.fixture(scope="module")
def kube(onprem: AppliedStack) -> Iterator[Kube]:
    k = onprem.kube
    for team in TEAMS:
        k.wait_for(
            f"default ServiceAccount in {team}", lambda team=team: k.get("v1", "ServiceAccount", "default", team)
        )
    a, b = list(TEAMS)[:2]
    probe = pod(Case(a, {NETWORKS: f"{b}/{nad_name(TEAMS[b])}"}, "probe"), 0)
    wait_until_refused(k, probe, member(a), "own namespace only")
    yield k


def _generator(rng: random.Random) -> AnnotationGenerator:
    nads = {name: [nad_name(t), rdma_nad_name(t)] for name, t in TEAMS.items() if t.partition is not None}
    for name in TEAMS:
        nads.setdefault(name, [nad_name(TEAMS[name])])
    return AnnotationGenerator(rng, nads, ["default", CFG.network.namespace, "kube-system"])


def test_multus_and_admission_agree_on_every_generated_annotation(
    kube: Kube, cni_tools: object, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(SEED)
    gen = _generator(rng)
    cases = [gen.case() for _ in range(CASES)]
    parsed = cni.parse_networks([(c.namespace, c.annotations) for c in cases])
    with_default = [i for i, c in enumerate(cases) if DEFAULT_NETWORK in c.annotations]
    defaults = cni.parse_networks(
        [(MULTUS_NAMESPACE, {NETWORKS: cases[i].annotations[DEFAULT_NETWORK]}) for i in with_default]
    )
    default_of = dict(zip(with_default, defaults, strict=True))
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        answers = list(pool.map(lambda ic: admission(kube, ic[1], ic[0]), enumerate(cases)))

    tally: collections.Counter[str] = collections.Counter()
    refusals: collections.Counter[str] = collections.Counter()
    disagreements: list[str] = []
    for i, (case, networks, (answer, message)) in enumerate(zip(cases, parsed, answers, strict=True)):
        verdict = multus_verdict(case, networks, default_of.get(i))
        value = case.annotations.get(NETWORKS, "")
        outside = outside_tenant_grammar(value, case.namespace) if verdict.kind == "clean" else None
        expected = {"unsafe": "refused", "fails": None, "clean": "refused" if outside else "admitted"}[verdict.kind]
        tally[f"multus {verdict.kind}{' outside the grammar' if outside else ''} -> {answer}"] += 1
        if verdict.kind == "fails":
            refusals[re.sub(r"[\"'].*", "", verdict.reason)[:70]] += 1
        if answer == "error" or (expected is not None and answer != expected):
            disagreements.append(
                f"#{i} pod in {case.namespace} ({case.form}), annotations {json.dumps(case.annotations)}\n"
                f"    Multus: {verdict.kind}: {verdict.reason}"
                f"{f' (outside the tenant grammar: {outside})' if outside else ''}\n"
                f"    admission: {answer}{': ' + message if message else ''}\n"
                f"    reason: expected {expected or 'either'}, got {answer}"
            )
    summary = [f"networks fuzz: seed {SEED}, {CASES} cases ({WORKERS} workers), {len(disagreements)} disagreements"]
    summary += [f"    {n:5d}  {k}" for k, n in sorted(tally.items())]
    summary += ["  most common reasons Multus refuses an annotation:"]
    summary += [f"    {n:5d}  {k}" for k, n in refusals.most_common(6)]
    with capsys.disabled():  # in the run's output, passed or not
        print("\n" + "\n".join(summary))
    assert not disagreements, f"{len(disagreements)} disagreements (seed {SEED}):\n" + "\n".join(disagreements[:60])
    # The allowed side is real: a good share of the pods are clean and admitted, as many unsafe and refused.
    assert tally["multus clean -> admitted"] >= CASES // 4, summary
    assert tally["multus unsafe -> refused"] >= CASES // 5, summary
