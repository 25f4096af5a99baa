"""The components guide's program runs: the Python block of docs/guides/components.md "One piece at a
time" is executed as a Pulumi program under the SDK's mocks, with no gpuaas stack config, so the page
cannot drift from the components' constructors and arguments."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from components.plan.offline import run_program

GUIDE: Final = Path(__file__).resolve().parents[2] / "docs" / "guides" / "components.md"


def guide_program() -> str:
    """The first Python block after the "One piece at a time" heading."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## One piece at a time") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, f"{GUIDE}: no Python block under 'One piece at a time'"
    return found.group(1)


def test_the_guides_program_registers_the_three_components_on_its_provider_in_order() -> None:
    source = guide_program()
    run = run_program("reuse", config={}, program=lambda: exec(compile(source, str(GUIDE), "exec"), {}))
    by_name = {r.name: r for r in run.records}
    # The components the page declares, by the names it gives them.
    for name in ("lab-network-operator", "lab-nic-cluster-policy", "lab-gpu-operator"):
        assert name in by_name, f"the guide's program did not register {name}"
    children = [r for r in run.records if r.custom and r.name.startswith("lab-")]
    assert children and all(r.provider.split("::")[-2] == "cluster" for r in children)
    # The policy's objects wait for the operator's, the GPU Operator's for the policy's (the page's
    # depends_on; the SDK expands a component named there into the resources under it).
    operator, policy, gpu = (
        [r for r in children if r.name.startswith(f"{name}-")]
        for name in ("lab-network-operator", "lab-nic-cluster-policy", "lab-gpu-operator")
    )
    assert operator and policy and gpu
    assert all({o.urn for o in operator} <= set(r.dependencies) for r in policy)
    assert all({p.urn for p in policy} <= set(r.dependencies) for r in gpu)
