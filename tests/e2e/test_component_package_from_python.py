"""The components as a Pulumi package, used from another Python program with the real engine.

A program that is not gpuaas's (its own project, its own virtualenv) runs `pulumi package add` on
this repository's ``provider/`` folder: the engine starts the component provider through our
language host (RunPlugin), reads its schema, generates the Python SDK (GeneratePackage, the
engine's own codegen), links it into the program's requirements.txt (Link) and installs it from
the local folder (InstallDependencies, ``pip --no-index``: nothing is downloaded). The program then
declares, through that SDK only, a Network Operator, its NicClusterPolicy, a GPU Operator with the
RDMA flags (``gpudirect: peermem`` on a host OFED) and one team; `pulumi preview` and `pulumi up`
run against the real API server on a KWOK fleet, and a second preview proposes nothing.

Expected objects: the same components built in-process by the stack program's own classes under
the SDK's mocks, from the same values written by hand in a stack file's form (:data:`STACK`);
the package form (the program's source) is written by hand too. Everything the engine created is
in that plan, equal, and nothing more; the GPU Operator's Helm release holds the RDMA flags.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from components.loader import parse_config
from components.model.config import StackConfig
from components.operators import nic_cluster_policy
from components.plan.writer import HELM_RELEASE
from e2e.engine import NetworkOperatorStandIn, mirror
from e2e.fleet import Fleet
from e2e.kube import Kube
from e2e.plan_apply import planned_objects, stored_differences
from tests.e2e.conftest import _say, need_upstream
from tests.e2e.fleet_nodes import fleet_nodes
from tests.e2e.package_consumer import CONTEXT, ROOT, STACK, ConsumerStack, expected_run


@dataclasses.dataclass
class Used:
    fleet: Fleet
    stack: ConsumerStack
    added: str
    cfg: StackConfig

    @property
    def kube(self) -> Kube:
        return self.fleet.kube


@pytest.fixture(scope="module")
def used(pytestconfig: pytest.Config) -> Iterator[Used]:
    need_upstream()
    cfg = parse_config({**STACK, "charts": {"directory": str(mirror())}})
    fleet = Fleet.start([spec.manifest() for spec in fleet_nodes(cfg)])
    try:
        kubeconfig = fleet.cp.write_kubeconfig(fleet.cp.workdir / "consumer.kubeconfig", context=CONTEXT)
        stack = ConsumerStack(kubeconfig)
        stack.start()
        added = stack.pulumi("package", "add", str(ROOT / "provider"), timeout=600)
        _say(pytestconfig, f"e2e: package: pulumi package add in {added.seconds:.1f} s")
        with NetworkOperatorStandIn(fleet.kube, namespace=cfg.network.namespace):
            yield Used(fleet, stack, added.out, cfg)
        if not os.environ.get("GPUAAS_E2E_KEEP"):
            shutil.rmtree(stack.workdir, ignore_errors=True)
    finally:
        fleet.stop()


def helm_release(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    """The Helm release record the provider stored (Helm's ``sh.helm.release.v1`` Secret)."""
    secrets = kube.list("v1", "Secret", namespace, selector=f"owner=helm,name={name},status=deployed")
    assert len(secrets) == 1, f"no deployed Helm release {namespace}/{name}"
    return dict(json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secrets[0]["data"]["release"])))))


def test_package_add_generates_and_links_a_python_sdk(used: Used) -> None:
    project = used.stack.project
    sdk = project / "sdks" / "gpuaas"
    assert (sdk / "pulumi_gpuaas" / "__init__.py").is_file(), used.added
    # Linked into the program's requirements and installed into its own virtualenv, not the repository's.
    assert "sdks/gpuaas" in (project / "requirements.txt").read_text()
    python = project / "venv" / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import pulumi_gpuaas; print(pulumi_gpuaas.__file__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert where.startswith(str(project / "venv")), where
    assert subprocess.run([sys.executable, "-c", "import pulumi_gpuaas"], capture_output=True).returncode != 0
    packages = yaml.safe_load((project / "Pulumi.yaml").read_text())["packages"]
    assert (project / str(packages["gpuaas"])).resolve() == (ROOT / "provider").resolve(), packages


def test_preview_then_up_converge_and_the_objects_are_the_stack_programs(
    used: Used, pytestconfig: pytest.Config
) -> None:
    preview = used.stack.preview()
    assert "gpuaas:index:NicClusterPolicy" in preview.out, preview.out[-3000:]
    up = used.stack.up()
    _say(pytestconfig, f"e2e: package: preview {preview.seconds:.1f} s, up {up.seconds:.1f} s")
    again = used.stack.preview("--expect-no-changes")
    assert again.rc == 0

    run = expected_run(used.cfg)
    problems: list[str] = []
    planned = planned_objects(run)
    for p in planned:
        meta = p.obj["metadata"]
        stored = used.kube.get(p.obj["apiVersion"], p.obj["kind"], meta["name"], meta.get("namespace"))
        if stored is None:
            problems.append(f"{p.ref}: not in the API server")
            continue
        problems += [f"{p.ref}: {d}" for d in stored_differences(p.obj, stored)]
    assert not problems, "\n".join(problems)

    created = set()
    for r in used.stack.resources():
        if not r["type"].startswith("kubernetes:") or r["type"] == HELM_RELEASE or r.get("external"):
            continue
        if r["type"].startswith("pulumi:providers"):
            continue
        meta = (r.get("outputs") or {}).get("metadata") or {}
        created.add((r["outputs"].get("kind"), meta.get("namespace"), meta.get("name")))
    want = {(p.obj["kind"], p.obj["metadata"].get("namespace"), p.obj["metadata"]["name"]) for p in planned}
    assert created == want

    # The Helm releases: the stack program's values, the GPU Operator's with the RDMA flags.
    for rec in (r for r in run.records if r.type == HELM_RELEASE):
        rel = helm_release(used.kube, rec.inputs["name"], rec.inputs["namespace"])
        assert rel["config"] == rec.inputs["values"], rec.name
    gpu = helm_release(used.kube, "gpu-operator", used.cfg.gpu_operator.namespace)
    assert gpu["config"]["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}

    # The components are the package's, under their own type tokens, URNs as in a stack program.
    types = {r["type"] for r in used.stack.resources() if r["type"].startswith("gpuaas:")}
    assert types == {
        "gpuaas:index:NetworkOperator",
        "gpuaas:index:NicClusterPolicy",
        "gpuaas:index:GpuOperator",
        "gpuaas:index:Team",
        "gpuaas:index:Teams",
    }
    assert used.stack.outputs() == {
        "gpuOperatorNamespace": used.cfg.gpu_operator.namespace,
        "policy": nic_cluster_policy.NAME,
        "team": "vision",
    }
