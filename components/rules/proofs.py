"""Rules of the verification proofs: a pinned perftest image and isolation pairs that can be probed."""

from __future__ import annotations

from collections.abc import Iterator

from components.model.capacity import isolation_domains
from components.model.config import StackConfig
from components.model.errors import Issue
from components.rules.common import config_key


def check(cfg: StackConfig) -> Iterator[Issue]:
    """The perftest pin and every isolation pair."""
    v = cfg.versions
    if v.perftest is None and v.perftest_digest is None:
        yield Issue(
            config_key("versions", "perftestDigest"),
            f"{v.perftest_image} needs a pin: a digest (sha256:…) or a tag in versions.perftest",
        )
    pairs = cfg.verification.isolation_pairs or []
    domains = isolation_domains(cfg)
    known = ", ".join(sorted(domains)) or "none: no team has a partition"
    seen: dict[tuple[str, str], int] = {}
    no_rdma = {t.name for t in cfg.teams if t.quota.rdma < 1}
    for i, pair in enumerate(pairs):
        where = f"verification.isolationPairs[{i}]"
        unknown = [role for role in ("client", "server") if getattr(pair, role) not in domains]
        for role in unknown:
            yield Issue(
                config_key(where, role),
                f"{getattr(pair, role)!r} is not a target: a team with a partition, or pool-<pool> with "
                f"verification.aksPools (known: {known})",
            )
        if unknown:
            continue
        for role in ("client", "server"):
            if getattr(pair, role) in no_rdma:
                yield Issue(
                    config_key(where, role),
                    f"team {getattr(pair, role)!r} has quota.rdma: 0, so its probe pod (one RDMA device) "
                    "would not be admitted; give the team quota.rdma of at least 1",
                )
        if domains[pair.client] == domains[pair.server]:
            yield Issue(
                config_key(where, "server"),
                f"{pair.client!r} and {pair.server!r} are both in {domains[pair.client]}: "
                "a probe between them would connect; pick targets in two partitions",
            )
        key = (pair.client, pair.server)
        if key in seen:
            yield Issue(config_key(where), f"the same probe as verification.isolationPairs[{seen[key]}]")
        seen.setdefault(key, i)
