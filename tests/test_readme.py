"""The README's configuration reference is generated from the model; drift fails here."""

from __future__ import annotations

from components.offline import ROOT
from components.reference import BEGIN, END, render


def test_config_reference_matches_the_model() -> None:
    text = (ROOT / "README.md").read_text()
    assert BEGIN in text and END in text, "README lost its config-reference markers"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert block == render(), "README config reference is stale: run `python -m components.reference` and paste it"


def test_readme_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    first_block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[1] for line in first_block.strip().splitlines()] == ["plan", "test"]
