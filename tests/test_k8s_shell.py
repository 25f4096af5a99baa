"""The shell's type tokens are the provider's (components/k8s.py ``apply``).

pulumi-resource-kubernetes names the core group ``core/v1``; a manifest of a built-in kind that
``apply`` does not know as a typed class became ``kubernetes:v1:<Kind>``, which the offline plan
records without a word and the real engine refuses ("apiVersion does not have both a group and a
version"), as it did for the observability scraper's Secret.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import offline_run

#: ``kubernetes:<group>/<version>:<Kind>`` (the core group as ``core``), or a Helm release.
TOKEN = re.compile(r"^kubernetes:[a-z0-9.-]+/v[0-9a-z]+:[A-Z][A-Za-z0-9]*$")


@pytest.mark.parametrize("stack", ["onprem", "aks"])
def test_every_kubernetes_record_has_a_provider_type_token(stack: str) -> None:
    bad = sorted(
        {r.type for r in offline_run(stack).records if r.type.startswith("kubernetes:") and not TOKEN.match(r.type)}
    )
    assert bad == [], bad


def test_a_secret_is_registered_as_the_providers_core_v1_secret() -> None:
    tokens = {r.type for r in offline_run("onprem").records}
    assert "kubernetes:core/v1:Secret" in tokens and "kubernetes:v1:Secret" not in tokens
    assert TOKEN.match("kubernetes:core/v1:Secret") and not TOKEN.match("kubernetes:v1:Secret")
