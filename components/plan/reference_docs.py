"""The docs site's generated reference: blocks of ``docs/`` pages rewritten from the code.

``make reference`` (``python -m components.plan.reference_docs``) rewrites every block between
``<!-- generated:<name> ... -->`` and ``<!-- generated:<name>:end -->`` in the pages under
``docs/``; ``--check`` rewrites nothing and exits 1 naming each stale block (``make test`` runs
the same check in ``tests/docs/test_reference.py``). Each block is rendered from the one place its
facts live: the stack config from the model (:mod:`components.plan.reference`), the alerts and
recording rules from :mod:`components.observability.rules` on :data:`REFERENCE_STACK`, the
Kubernetes minors, AKS OS SKUs and charts' ``kubeVersion`` from :mod:`components.model.kubernetes`,
the pinned versions from :class:`~components.model.versions.Versions`, the Make targets from the
Makefile's ``## target: text`` comments, the stack outputs from :data:`OUTPUTS` (checked against
what the stacks' plans export by the same test).

The blocks never depend on a stack file: a team that makes ``Pulumi.<stack>.yaml`` its own
changes no page.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

from components.loader import parse_stack
from components.model import kubernetes
from components.model.config import StackConfig
from components.model.versions import Versions
from components.observability.groups import rule_groups
from components.observability.promql import Alert, Recording
from components.plan import reference, rule_index
from components.plan.offline import ROOT

DOCS = ROOT / "docs"
RUNBOOKS = DOCS / "runbooks"
_BLOCK = re.compile(
    r"(<!-- generated:(?P<name>[\w-]+) [^>]*-->\n)(?P<body>.*?)(<!-- generated:(?P=name):end -->)", re.S
)

#: The config the alerts reference is rendered from: observability and elastic queues on, one team,
#: so that every group and alert the code can emit is there (a team's group shown once, as ``<team>``).
REFERENCE_STACK: dict[str, object] = {
    "platform": {
        "kind": "onprem",
        "kubernetesVersion": "1.37.2",
        "nodeGroups": [{"name": "gpus", "gpuModel": "H100-80GB", "hcas": ["mlx5_0"]}],
        "nodes": [{"name": "gpu-01", "id": 1, "nodeGroup": "gpus"}],
    },
    "queues": {"elastic": True},
    "observability": {"enabled": True},
    "teams": [{"name": "team", "groups": ["oidc:team"], "quota": {"gpus": 8}}],
}

#: Every stack output: which platforms export it, and what an operator reads it for. The test
#: compares the names with what the plans of the test-owned stacks export, so a new output without
#: a line here fails ``make test``.
OUTPUTS: dict[str, tuple[str, str]] = {
    "platform": ("both", "`onprem` or `aks`: the platform kind of `gpuaas:platform`."),
    "teams": (
        "both",
        "Per team: namespace, P_Key as configured and full-member (`pkey`, `fullPkey`), VF index, GUID count, "
        "NAD, RDMA resource (`sriovResource`) and the rendered ResourceQuota (`quota`): what a team lead hands "
        "to the team.",
    ),
    "verificationJobs": (
        "both",
        "Per verified target, the proof Jobs as `namespace/name` (`ib_write_bw`, `nccl`, `isolation:<server>`): "
        "what `workloads/gather_results.py` reads.",
    ),
    "kubernetesVersion": (
        "both",
        "The Kubernetes version the run applied (recorded once the cluster and pools are applied): the last "
        "version the Kubernetes version guard compares the next run with.",
    ),
    "migLayouts": (
        "both",
        "The MIG layout per node group (on-prem) or GPU pool (AKS), exported once the MIG guard passed and the "
        "labels are applied: what the next run's MIG guard compares with.",
    ),
    "migNodeLayouts": ("onprem", "The MIG layout per on-prem node: a node moved into another group is guarded too."),
    "fabricLayout": (
        "onprem",
        "`vfsPerHca`, `guidScheme`, each team's `pkey` and `vfIndex`, each group's `hcas`, each node's `id`: "
        "what the fabric guard compares the next run with.",
    ),
    "partitionsConf": ("onprem", "OpenSM's `partitions.conf`, the whole file (also `plan/<stack>/opensm/`)."),
    "opensmConf": ("onprem", "OpenSM's `opensm.conf` for the subnet manager."),
    "resourceModel": ("dra", "`dra` where `gpuOperator.resourceModel` is `dra`: a stack that ran keeps its model."),
    "clusterName": ("aks", "The AKS cluster's name."),
    "kubeconfig": ("aks", "The cluster's user kubeconfig (secret: `pulumi stack output kubeconfig --show-secrets`)."),
    "stack": ("both", "The stack's name: a `--previous` outputs file of another stack is refused."),
    "outputsFormat": ("both", "The outputs' format (1): a day-2 guard refuses a file of another format."),
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_block() -> str:
    return reference.render()


def outputs_block() -> str:
    where = {"both": "onprem, aks", "onprem": "onprem", "aks": "aks", "dra": "with `resourceModel: dra`"}
    rows = [f"| `{name}` | {where[kind]} | {text} |" for name, (kind, text) in OUTPUTS.items()]
    return "\n".join(["| output | stacks | what it holds |", "|---|---|---|", *rows]) + "\n"


def _reference_config() -> StackConfig:
    return parse_stack({f"gpuaas:{key}": value for key, value in REFERENCE_STACK.items()})


def alerts_block() -> str:
    groups = rule_groups(_reference_config())
    alerts = [r for g in groups.values() for r in g.rules if isinstance(r, Alert)]
    out = ["| alert | severity | for | summary | runbook |", "|---|---|---|---|---|"]
    for a in sorted(alerts, key=lambda a: a.alert):
        page = RUNBOOKS / f"{a.alert}.md"
        runbook = f"[{a.alert}](../runbooks/{a.alert}.md)" if page.is_file() else "—"
        out.append(f"| `{a.alert}` | {a.severity} | {a.for_} | {_cell(a.summary)} | {runbook} |")
    out.extend(["", "What each alert means, in full:", ""])
    for a in sorted(alerts, key=lambda a: a.alert):
        out.extend([f"- **`{a.alert}`**: {_cell(a.description)}"])
    return "\n".join(out) + "\n"


def recording_block() -> str:
    groups = rule_groups(_reference_config())
    out = ["| group (PrometheusRule) | recorded series |", "|---|---|"]
    for role, group in groups.items():
        names = sorted({r.record for r in group.rules if isinstance(r, Recording)})
        if names:
            shown = role.replace("team-team", "team-<team>")
            out.append(f"| `gpuaas-{shown}` | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(out) + "\n"


_TARGET = re.compile(r"^## ([\w-]+): (.*)$")


def make_block() -> str:
    """The Makefile's documented targets: ``## target: text`` and the ``## `` lines that follow."""
    out = ["| target | what it does |", "|---|---|"]
    target, text = "", ""
    for line in [*(ROOT / "Makefile").read_text().splitlines(), ""]:
        m = _TARGET.match(line)
        if m:
            if target:
                out.append(f"| `make {target}` | {_cell(text)} |")
            target, text = m.group(1), m.group(2)
        elif line.startswith("## ") and target:
            text += " " + line[3:]
        elif target:
            out.append(f"| `make {target}` | {_cell(text)} |")
            target, text = "", ""
    return "\n".join(out) + "\n"


def minors_block() -> str:
    out = [
        "| minor | upstream end of life | AKS GA | AKS end of standard support | AKS source |",
        "|---|---|---|---|---|",
    ]
    for s in kubernetes.MINORS:
        out.append(f"| {s.name} | {s.end_of_life} | {s.aks_ga or '—'} | {s.aks_end_of_support or '—'} | {s.source} |")
    return "\n".join(out) + "\n"


def os_skus_block() -> str:
    out = ["| AKS OS SKU | Kubernetes minors |", "|---|---|"]
    for sku, (low, high) in kubernetes.AKS_OS_SKUS.items():
        out.append(f"| `{sku}` | {kubernetes.fmt(low)} – {kubernetes.fmt(high)} |")
    out.extend(["", "| chart | version | `kubeVersion` |", "|---|---|---|"])
    for (chart, version), constraint in kubernetes.CHART_KUBE_VERSIONS.items():
        out.append(f"| {chart} | {version} | `{constraint}` |")
    return "\n".join(out) + "\n"


def versions_block() -> str:
    comments = reference._comment_docs(Versions)  # the model's own #: lines, as the config page reads them
    out = ["| key (`gpuaas:versions.<key>`) | pinned default | what |", "|---|---|---|"]
    for name, field in Versions.model_fields.items():
        default = reference._default(field)
        out.append(f"| `{field.alias or name}` | {default} | {reference._description(name, field, comments)} |")
    return "\n".join(out) + "\n"


def rules_block() -> str:
    """Per rule area (:mod:`components.rules`): what it checks (its module's first docstring line)
    and the keys it names, as the config reference links them."""
    by_area: dict[str, list[str]] = {a: [] for a in rule_index.AREAS}
    for where, key in reference.config_keys():
        for area in rule_index.areas_naming(where, key):
            by_area[area].append(f"{reference.plain(where)}.{key}")
    out: list[str] = []
    for area in rule_index.AREAS:
        module = importlib.import_module(f"components.rules.{area}")
        doc = re.sub(r"``([^`]+)``", r"`\1`", " ".join((module.__doc__ or "").strip().split("\n\n")[0].split()))
        doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc)
        keys = ", ".join(f"`{k}`" for k in sorted(set(by_area[area]))) or "none by name"
        out.extend(
            [f"#### {area} rules", "", f"`components/rules/{area}.py`: {doc}", "", f"Keys it names: {keys}.", ""]
        )
    return "\n".join(out)


BLOCKS: dict[str, Callable[[], str]] = {
    "rules": rules_block,
    "config": config_block,
    "outputs": outputs_block,
    "alerts": alerts_block,
    "recording-rules": recording_block,
    "make-targets": make_block,
    "kubernetes-minors": minors_block,
    "aks-os-skus": os_skus_block,
    "pinned-versions": versions_block,
}


def refresh(text: str) -> str:
    """``text`` with every generated block rendered anew (an unknown block name is an error)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in BLOCKS:
            raise KeyError(f"unknown generated block {name!r}; known: {', '.join(BLOCKS)}")
        return f"{m.group(1)}{BLOCKS[name]()}{m.group(4)}"

    return _BLOCK.sub(sub, text)


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if _BLOCK.search(p.read_text()))


def stale() -> list[str]:
    """The pages whose generated blocks differ from what the code renders now."""
    return [str(p.relative_to(ROOT)) for p in pages() if refresh(p.read_text()) != p.read_text()]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        names = stale()
        for n in names:
            print(f"{n}: generated reference is stale: run `make reference`", file=sys.stderr)
        return 1 if names else 0
    if argv:
        print("usage: python -m components.plan.reference_docs [--check]", file=sys.stderr)
        return 2
    for p in pages():
        p.write_text(refresh(p.read_text()))
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
