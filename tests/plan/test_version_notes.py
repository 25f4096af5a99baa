"""docs/notes/versions.md: its tables are generated from the model, and "tested" means what the e2e builds
(issue 35, item 7)."""

from __future__ import annotations

import re

from components.model import kubernetes
from components.plan.offline import ROOT
from components.plan.version_notes import BEGIN, END, render
from e2e.toolsets import KUBERNETES_MODFILES

NOTES = ROOT / "docs" / "notes" / "versions.md"


def test_the_version_tables_are_what_the_model_renders() -> None:
    text = NOTES.read_text()
    assert BEGIN in text and END in text, f"{NOTES} lost its version-table markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert block == render(), "the version table is stale: run `python -m components.plan.version_notes` and paste it"


def test_a_patch_called_tested_is_the_one_the_e2e_control_plane_is_built_from() -> None:
    built = {}
    for minor, modfile in KUBERNETES_MODFILES.items():
        pin = re.search(
            r"^\s*k8s\.io/kubernetes v([0-9.]+)$", (ROOT / "e2e" / "controlplane" / modfile).read_text(), re.M
        )
        assert pin, modfile
        built[minor] = pin.group(1)
    tested = {p.name: p.tested for p in kubernetes.PATCHES if p.tested is not None}
    assert tested == built


def test_every_patch_row_is_a_minor_of_the_support_table_and_no_patch_is_older_than_the_tested() -> None:
    minors = {s.minor for s in kubernetes.MINORS}
    for p in kubernetes.PATCHES:
        assert p.minor in minors, p
        for v in (p.tested, p.aks):
            if v is not None:
                assert kubernetes.minor_of(v) == p.minor, (p, v)
                assert kubernetes.parse(v) <= kubernetes.parse(p.newest_known), (p, v)  # type: ignore[operator]
        if p.tested is not None and p.tested != p.newest_known:
            assert p.untested_why, f"{p.name}: say why {p.newest_known} is not tested"
