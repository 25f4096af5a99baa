"""Reading a stack's config: from a plain dict (tests, the plan) or from the Pulumi runtime.

:func:`parse_config` is pure and raises :class:`ConfigError` listing every problem;
:func:`load_config` wraps it for ``__main__.py`` and exits cleanly — a message per line, no
traceback — before any resource is registered.

One piece: the stack file's reading (both YAML readers' views, namespaces) and the Pulumi runtime's
entry point share one error path, so every problem of a stack is reported in one list.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import difflib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from components.model import charts, goyaml, hami, kubernetes, typewalk, yamlfile
from components.model.azure_grammar import normal_location
from components.model.config import KNOWN_CONFIG_NAMESPACES, StackConfig
from components.model.errors import ConfigError, Issue, Loc, from_validation_error, path
from components.model.grammar import control_character_issues
from components.rules import check, undated
from components.rules import versions as version_rules
from components.rules.versions import os_sku_warnings, past_end, support_warnings

NAMESPACE = "gpuaas"


# --------------------------------------------------------------------------------------------
# Stack files: YAML problems as file:line:column, never a traceback


def read_stack_file(file: Path) -> dict[str, Any]:
    """The ``config:`` map of a ``Pulumi.<stack>.yaml``, or :class:`ConfigError` with file:line:column.

    Read with :mod:`components.model.yamlfile`'s bounds (a regular file, size, depth, core tags,
    aliases): a stack file may come from a pull request.
    """
    name = str(file)
    try:
        data, root = yamlfile.load_with_nodes(yamlfile.read_text(file, "stack file"), name)
    except yamlfile.YamlError as err:
        raise ConfigError([Issue(err.where, err.why)]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError([Issue(f"{name}:1:1", f"the top level is a {kind}; a stack file is a mapping")])
    config = data.get("config")
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ConfigError([Issue(f"{name}: config", f"is a {type(config).__name__}; write a mapping of keys")])
    read_alike = list(_read_differently(root, file))
    if read_alike:
        raise ConfigError(read_alike)
    bad = [k for k in config if not isinstance(k, str)]
    if bad:
        raise ConfigError([Issue(f"{name}: config", f"key {k!r} is not a string") for k in bad])
    return dict(config)


def _read_differently(root: yaml.Node | None, file: Path) -> Iterator[Issue]:
    """Every plain scalar of ``config:`` that the Pulumi CLI reads otherwise than this plan
    (:mod:`components.model.goyaml`): ``pulumi up`` must deploy the values the plan showed."""
    if not isinstance(root, yaml.MappingNode):
        return
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "config":
            for loc, node, why in goyaml.differences(value):
                mark = node.start_mark
                yield Issue(_key_path(loc), f"{why} ({file.name}:{mark.line + 1}:{mark.column + 1})")


def _key_path(loc: tuple[str | int, ...]) -> str:
    """``("gpuaas:teams", 0, "quota")`` → ``gpuaas:teams[0].quota``; another namespace's keys as written."""
    if not loc:
        return "config"
    first = str(loc[0])
    if first.startswith(f"{NAMESPACE}:"):
        return path((first.removeprefix(f"{NAMESPACE}:"), *loc[1:]))
    return first + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])


_PATH_PART = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]|\["([^"]*)"\]')


def _loc_of(issue_path: str) -> tuple[str | int, ...]:
    """``gpuaas:teams[1].partition.pkey`` → ``("gpuaas:teams", 1, "partition", "pkey")`` (as far as it parses);
    any other key as it is written (``gpuas:teams`` → ``("gpuas:teams",)``)."""
    prefix = f"{NAMESPACE}:"
    if not issue_path.startswith(prefix):
        return (issue_path,)  # a key of another namespace (namespace_issues), placed where it is written
    rest = issue_path[len(prefix) :]
    loc: list[str | int] = []
    pos = 0
    while pos < len(rest):
        m = _PATH_PART.match(rest, pos)
        if m is None:
            break
        name, index, quoted = m.groups()
        loc.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = m.end()
    if loc and isinstance(loc[0], str):
        loc[0] = prefix + loc[0]
    return tuple(loc)


def stack_file_marks(file: Path) -> dict[tuple[str | int, ...], tuple[int, int]]:
    """Every value's (line, column) in a stack file's ``config:``, keyed by its path (1-based)."""
    try:
        root = yamlfile.compose(yamlfile.read_text(file, "stack file"), str(file))
    except yamlfile.YamlError:
        return {}
    marks: dict[tuple[str | int, ...], tuple[int, int]] = {}

    def walk(node: yaml.Node, loc: tuple[str | int, ...]) -> None:
        marks[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    walk(value, (*loc, key.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, value in enumerate(node.value):
                walk(value, (*loc, i))

    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "config":
                walk(value, ())
    return marks


def render_located(err: ConfigError, file: Path) -> str:
    """:meth:`ConfigError.render` with each problem's place in ``file`` (its nearest written key).

    A missing key points at the mapping that should hold it; problems of other origins (the YAML
    itself, the plan's arguments) are shown as they are.
    """
    marks = stack_file_marks(file)
    lines = err.render().splitlines()[:1]
    for issue in err.issues:
        loc = _loc_of(issue.path)
        while loc and loc not in marks:
            loc = loc[:-1]
        where = f"  ({file.name}:{marks[loc][0]}:{marks[loc][1]})" if loc else ""
        lines.append(f"  {issue}{where}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The config


def parse_config(raw: Mapping[str, Any], today: datetime.date = kubernetes.REVIEWED, plan: bool = False) -> StackConfig:
    """Validate ``raw`` (the ``gpuaas:*`` keys without their prefix) into a :class:`StackConfig`.

    ``today`` judges the Kubernetes version's support dates (:mod:`components.rules.versions`).
    ``plan``: for the offline plan only, a minor past its end of support is no problem (the plan says
    so loudly instead): a lagging cluster's team must see the plan its upgrade starts from; the
    deploy refuses it.
    """
    key = _content_key(raw)
    hit = _VALIDATED.get(key) if key is not None else None
    if hit is not None:
        cfg, static = hit
        controls: list[Issue] = []
    else:
        booleans = list(typewalk.booleans(dict(raw), StackConfig))
        controls = sorted(set(control_character_issues(dict(raw))) | {issue for _loc, issue in booleans})
        if booleans:  # checked without them: a boolean taken as 1 would only invent other problems
            raw = copy.deepcopy(dict(raw))
            for loc, _issue in booleans:
                _remove(raw, list(loc))
        try:
            cfg = StackConfig.model_validate(dict(raw))
        except ValidationError as err:
            issues = from_validation_error(err, allowed_keys())
            raise ConfigError(_merge(controls, set(issues) | set(_rules_beside(raw, err, today)))) from None
        static = undated(cfg)
        if key is not None and not controls:
            _VALIDATED.clear()
            _VALIDATED[key] = (cfg, static)
    issues = sorted(set(static) | set(version_rules.check(cfg, today)))
    if plan:
        issues = [i for i in issues if i != past_end(cfg, today)]
    if issues or controls:
        raise ConfigError(_merge(controls, issues))
    return cfg


#: The last config validated, by its content: a plan validates the stack before the program runs
#: (components/plan/writer.py), and the program again (``load_config``); at 4000 nodes / 1024 teams
#: that was 0.6 s twice (issue 37). Only what does not depend on the day is kept (the version rule
#: runs every time); the model is frozen, so both callers may share it.
_VALIDATED: dict[str, tuple[StackConfig, list[Issue]]] = {}


def _content_key(raw: Mapping[str, Any]) -> str | None:
    """``raw`` as canonical JSON, a memo key that tells apart whatever validation could (``1``,
    ``1.0`` and ``true``; a date and its text); None when it cannot be written so (then no memo)."""
    try:
        return json.dumps(raw, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return None


def _merge(first: list[Issue], rest: Any) -> list[Issue]:
    """``first`` and the issues of ``rest`` at other paths: one message per bad value."""
    taken = {i.path for i in first}
    return sorted(set(first) | {i for i in rest if i.path not in taken})


def parse_stack(
    config: Mapping[str, Any], today: datetime.date = kubernetes.REVIEWED, plan: bool = False
) -> StackConfig:
    """:func:`parse_config` on a stack's whole config map, plus what spans namespaces.

    ``azure-native:location`` is the provider's default region; a stack whose AKS platform says
    another one would put the cluster in one region and anything created without an explicit
    location in the other.
    """
    issues: list[Issue] = namespace_issues(config)
    try:
        cfg = parse_config(gpuaas_section(config), today, plan)
    except ConfigError as err:
        issues += err.issues
        cfg = None
    provider = config.get("azure-native:location")
    platform = gpuaas_section(config).get("platform")
    location = platform.get("location") if isinstance(platform, Mapping) else None
    if (
        isinstance(platform, Mapping)
        and platform.get("kind") == "aks"
        and isinstance(provider, str)
        and isinstance(location, str)
        and normal_location(provider) != normal_location(location)
    ):
        issues.append(
            Issue(
                "gpuaas:platform.location",
                f"{location!r}, but azure-native:location is {provider!r}; the cluster and the provider's default "
                "region must agree (set both to one region)",
            )
        )
    if issues or cfg is None:
        raise ConfigError(sorted(set(issues)))
    return cfg


#: Where a team lists namespaces of its own program (``StackConfig.extra_config_namespaces``).
EXTRA_NAMESPACES_KEY = f"{NAMESPACE}:extraConfigNamespaces"


def namespace_issues(config: Mapping[str, Any]) -> list[Issue]:
    """A problem per key whose namespace is neither gpuaas', Pulumi's or a provider's
    (:data:`~components.model.config.KNOWN_CONFIG_NAMESPACES`), nor listed in
    ``gpuaas:extraConfigNamespaces``: a typo such as ``gpuas:teams`` would otherwise plan a stack
    without the teams, silently. Each names the nearest known key when one is close.
    """
    extra = config.get(EXTRA_NAMESPACES_KEY)
    listed = [n for n in extra if isinstance(n, str)] if isinstance(extra, list | tuple) else []
    known = [NAMESPACE, *KNOWN_CONFIG_NAMESPACES, *listed]
    fields = [field.alias or name for name, field in StackConfig.model_fields.items()]
    issues = []
    for key in config:
        namespace, colon, name = key.partition(":")
        if colon and namespace in known:
            continue
        if colon:
            # The whole key against every gpuaas key and the other namespaces with this key's name.
            near = [f"{NAMESPACE}:{f}" for f in fields] + [f"{n}:{name}" for n in known if n != NAMESPACE]
            match = difflib.get_close_matches(key, near, n=1, cutoff=0.6)
            why = f"unknown config namespace {namespace!r}"
        else:  # the name alone against gpuaas' keys
            match = [f"{NAMESPACE}:{m}" for m in difflib.get_close_matches(key, fields, n=1, cutoff=0.6)]
            why = "has no namespace (Pulumi config keys are <namespace>:<name>)"
        hint = f" (did you mean {match[0]}?)" if match else ""
        issues.append(
            Issue(
                key or '""',  # an empty key still names a place
                f"{why}{hint}; known namespaces: {', '.join(known)}; a namespace your own program reads goes "
                f"in {EXTRA_NAMESPACES_KEY}",
            )
        )
    return issues


def _rules_beside(raw: Mapping[str, Any], err: ValidationError, today: datetime.date, rounds: int = 6) -> list[Issue]:
    """Cross-field issues elsewhere in a config that also has structural errors.

    Each bad value is pruned (a required one takes its parent with it) and the rest is checked,
    so one round of editing fixes everything. List indices never shift, so paths stay true.
    Issues inside a pruned item (e.g. ``teams[1]``) are dropped: they would describe the pruned
    config, not the user's.
    """
    pruned = copy.deepcopy(dict(raw))
    scopes: set[str] = set()
    for _ in range(rounds):
        for e in err.errors(include_url=False):
            loc = [p for p in e["loc"] if not (isinstance(p, str) and p in ("onprem", "aks"))]
            while loc and (isinstance(loc[-1], int) or e["type"] == "missing"):
                loc = loc[:-1]  # a list item or a required key: prune what holds it
                if e["type"] == "missing":
                    break
            if len(loc) < 2 and loc[:1] != ["versions"] and e["type"] != "extra_forbidden":
                return []  # a whole section is unusable: nothing sensible to check beside it
            first_item = next((i for i, p in enumerate(loc) if isinstance(p, int)), len(loc) - 1)
            scopes.add(path(loc[: first_item + 1]))
            _remove(pruned, loc)
        try:
            cfg = StackConfig.model_validate(pruned)
        except ValidationError as again:
            err = again
            continue
        # Quotas are checked against the fleet: with part of the platform pruned, its capacity is not the user's.
        fleet_pruned = any(s.startswith("gpuaas:platform") for s in scopes)
        return [
            i
            for i in check(cfg, today)
            if not any(i.path.startswith(s) for s in scopes)
            and "[*]" not in i.path
            and not (fleet_pruned and ".quota." in i.path)
        ]
    return []


def _remove(tree: Any, loc: list[Any]) -> None:
    node = tree
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(node, dict):
        node.pop(loc[-1], None)


def allowed_keys() -> dict[Loc, list[str]]:
    """Every model location (indices as ``*``) → the keys allowed there, for 'unknown key' errors."""
    out: dict[Loc, list[str]] = {}

    def walk(model: type[BaseModel], loc: Loc) -> None:
        if loc in out:
            out[loc] = sorted(set(out[loc]) | {f.alias or n for n, f in model.model_fields.items()})
        else:
            out[loc] = sorted(f.alias or n for n, f in model.model_fields.items())
        for name, field in model.model_fields.items():
            for sub, suffix in typewalk.models_in(field.annotation):
                walk(sub, (*loc, field.alias or name, *suffix))

    walk(StackConfig, ())
    return out


def gpuaas_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gpuaas:*`` keys of a stack's config map, prefix stripped (what :func:`parse_config` takes)."""
    prefix = f"{NAMESPACE}:"
    return {key[len(prefix) :]: value for key, value in config.items() if key.startswith(prefix) and key != prefix}


def raw_from_pulumi() -> dict[str, Any]:
    """The ``gpuaas:*`` keys of the running stack, objects decoded from their JSON form."""
    # Imported here, not at the top: parse_config (the plan, the tests, the benchmarks) must not load the SDK.
    from pulumi.runtime import config as runtime_config

    raw = gpuaas_section({**runtime_config.get_config_env(), **runtime_config.CONFIG.get()})
    for name, value in raw.items():
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                raw[name] = json.loads(value)
    return raw


#: ``YYYY-MM-DD``: the date the version rule judges by instead of the clock (e.g. to see what a
#: stack's version will meet in two months); the plan's files never depend on it.
TODAY_ENV = "GPUAAS_TODAY"


def todays_date() -> datetime.date:
    """Today's date for the version rule: ``$GPUAAS_TODAY`` if set, else the clock (``__main__.py`` calls it once)."""
    # Imported here, not at the top: parse_config (the plan, the tests, the benchmarks) must not load the SDK.
    import pulumi

    text = os.environ.get(TODAY_ENV)
    if text is None:
        return datetime.date.today()
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise pulumi.RunError(
            ConfigError([Issue(TODAY_ENV, f"{text!r} is not a date; write YYYY-MM-DD, e.g. 2026-12-01")]).render()
        ) from None


def load_config(today: datetime.date) -> StackConfig:
    """Parse the running stack's config or stop the program with every problem listed.

    ``today`` judges the Kubernetes version's support dates; a version near its end is warned about
    on the console (``pulumi.log.warn``), never in a resource.
    """
    # Imported here, not at the top: parse_config (the plan, the tests, the benchmarks) must not load the SDK.
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime.mocks import MockMonitor
    from pulumi.runtime.settings import get_monitor

    # Under the SDK's mock monitor no engine is there to deploy anything: the offline plan (which
    # only a mock runtime can be; a user cannot make `pulumi up` one) plans a minor past its end.
    offline = isinstance(get_monitor(), MockMonitor)
    try:
        raw = raw_from_pulumi()
        # Every key of the stack, the gpuaas ones decoded: parse_stack refuses unknown namespaces.
        everything = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
        config = {**everything, **{f"{NAMESPACE}:{k}": v for k, v in raw.items()}}
        cfg = parse_stack(config, today, plan=offline)
        # The one check that reads this machine: a chart mirror folder holds every chart the
        # stack installs (what Helm will open), before any resource is registered.
        wanted = charts.stack_charts(cfg.versions, cfg.queues.elastic, hami.uses_hami(cfg))
        missing = list(charts.mirror_issues(cfg.charts, wanted))
        if missing:
            raise ConfigError(missing)
    except ConfigError as err:
        raise pulumi.RunError(err.render()) from None
    for warning in [*support_warnings(cfg, today), *os_sku_warnings(cfg)]:
        pulumi.log.warn(warning)
    ended = past_end(cfg, today)
    if ended is not None:  # offline only: otherwise parse_stack refused it above
        pulumi.log.warn(f"PLAN ONLY, `pulumi up` refuses this stack: {ended}")
    return cfg
