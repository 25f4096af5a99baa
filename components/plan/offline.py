"""Run the real Pulumi program with no CLI, cluster or credentials, recording every resource.

The Pulumi SDK's mock runtime stands in for the engine: each registration is recorded with its
inputs, parent, dependencies and options. The offline plan (:mod:`components.plan.writer`) and the
tests both use this module, so what a reviewer reads is what the tests assert on.
"""

from __future__ import annotations

import base64
import concurrent.futures
import gc
import json
import runpy
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2, source_pb2
from pulumi.runtime.settings import get_root_resource
from pulumi.runtime.stack import massage, run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from components.loader import read_stack_file

ROOT = Path(__file__).resolve().parents[2]

#: A kubeconfig the mocked AKS credential call returns: shaped like Azure's, pointing nowhere.
FAKE_KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: offline\n  cluster: {server: 'https://offline.invalid'}\n"
    "contexts:\n- name: offline\n  context: {cluster: offline, user: offline}\ncurrent-context: offline\n"
    "users:\n- name: offline\n  user: {token: offline-plan}\n"
)


@dataclass
class Record:
    """One registered resource as the engine would have seen it."""

    urn: str
    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]
    parent: str
    dependencies: list[str]
    provider: str
    protect: bool
    ignore_changes: list[str]
    delete_before_replace: bool
    secret_outputs: list[str] = field(default_factory=list)
    retain_on_delete: bool = False
    #: The aliases the program gave (``ResourceOptions.aliases``), each as its protobuf text form: what
    #: lets a resource whose type or parent changed keep its state (tests/test_urns.py).
    aliases: list[str] = field(default_factory=list)
    #: The provider plugin's version the registration asks for (``ResourceOptions.version``).
    version: str = ""


class _Mocks(pulumi.runtime.Mocks):
    """Outputs mirror inputs, plus the few computed values programs read (names, ids).

    ``previous``: the outputs of the stack's last run, which the program reads back through a
    StackReference to itself (:mod:`components.guards.mig`); empty means a first run.
    """

    def __init__(self, previous: Mapping[str, Any] | None = None) -> None:
        self.previous = dict(previous or {})

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            name = args.inputs["name"]
            return name, {"name": name, "outputs": dict(self.previous), "secretOutputNames": []}
        state = dict(args.inputs)
        if args.typ.startswith("azure-native:"):
            for key in ("resourceName", "resourceGroupName", "agentPoolName", "featureName"):
                if key in state and "name" not in state:
                    state["name"] = state[key]
                    break
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        # The SDK's MockMonitor iterates the failures list, so "no failures" is ``[]``, never None.
        if args.token.endswith("listManagedClusterUserCredentials") or args.token.endswith(
            "listManagedClusterAdminCredentials"
        ):
            value = base64.b64encode(FAKE_KUBECONFIG.encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": value}]}, []
        return {}, []


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """MockMonitor that also keeps parent, dependencies and options of every registration."""

    def __init__(self, previous: Mapping[str, Any] | None = None) -> None:
        super().__init__(_Mocks(previous))
        self.records: list[Record] = []
        #: Every registration of the root stack's outputs, in order: the engine keeps the last.
        #: (A run whose exports fail to resolve registers none after the mock's initial ``{}``.)
        self.stack_outputs: list[dict[str, Any]] = []

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        if request.urn.split("::")[2] == "pulumi:pulumi:Stack":
            _ensure_event_loop()  # type: ignore[no-untyped-call]
            self.stack_outputs.append(rpc.deserialize_properties(request.outputs))
        return empty_pb2.Empty()

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()  # type: ignore[no-untyped-call]
        inputs = rpc.deserialize_properties(request.object)
        args = pulumi.runtime.MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=inputs,
            provider=request.provider,
            resource_id=request.importId,
            custom=request.custom or False,
        )
        id_, state = self.mocks.new_resource(args)
        # Outputs that mirror the inputs are the request's own Struct: serialising the
        # deserialised inputs again gives the same Struct (no unknowns outside a preview, no
        # output values: the SDK's MockMonitor does not support them), without the cost. Outputs
        # that add plain values (an Azure resource's ``name``, a StackReference's outputs) are that
        # Struct plus those values: ``_sync_await`` here would pump the event loop from inside a
        # registration, which runs the next registration inside this one, so a chain of resources
        # each waiting on the last (AKS's GPU pools) nested a frame stack per link until Python's
        # recursion limit (76 pools; AKS allows 100).
        added = {k: v for k, v in state.items() if k not in inputs or inputs[k] != v}
        if not pulumi.runtime.is_dry_run() and set(inputs) <= set(state) and all(map(_plain, added.values())):
            obj_proto = request.object
            if added:
                obj_proto = struct_pb2.Struct()
                obj_proto.CopyFrom(request.object)
                obj_proto.update(added)
        else:
            obj_proto = _sync_await(rpc.serialize_properties(state, {}))
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, id_, state)  # type: ignore[arg-type]
        self.records.append(
            Record(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=bool(request.custom),
                inputs=inputs,
                parent=request.parent,
                dependencies=sorted(request.dependencies),
                provider=request.provider,
                protect=bool(request.protect),
                ignore_changes=list(request.ignoreChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                retain_on_delete=bool(request.retainOnDelete),
                secret_outputs=list(request.additionalSecretOutputs),
                aliases=[*request.aliasURNs, *(str(a).replace("\n", " ").strip() for a in request.aliases)],
                version=request.version,
            )
        )
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_ or "", object=obj_proto)


def _plain(value: Any) -> bool:
    """A JSON value (text, number, boolean, null, lists and string-keyed maps of them): what a
    protobuf ``Struct`` holds as it is, and what ``serialize_properties`` writes unchanged (it only
    rewrites Outputs, resources, assets and secrets)."""
    stack = [value]
    for _ in range(1_000_000):  # bounded: a value holds far fewer nodes
        if not stack:
            return True
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item) or rpc._special_sig_key in item:
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not (item is None or isinstance(item, (str, bool, int, float))):
            return False
    return False


@dataclass
class Run:
    """The result of one offline run: every record and the resolved stack outputs."""

    stack: str
    records: list[Record]
    outputs: dict[str, Any]
    secret_outputs: set[str]

    def of_type(self, typ: str) -> list[Record]:
        return [r for r in self.records if r.type == typ]

    def named(self, name: str) -> Record:
        found = [r for r in self.records if r.name == name]
        if len(found) != 1:
            raise KeyError(f"{len(found)} resources named {name!r}")
        return found[0]


def stack_file(stack: str) -> Path:
    return ROOT / f"Pulumi.{stack}.yaml"


def stack_config(stack: str, path: Path | None = None) -> dict[str, Any]:
    """The ``config:`` map of ``Pulumi.<stack>.yaml`` or ``path`` (fully qualified keys)."""
    return read_stack_file(path or stack_file(stack))


def to_runtime_config(config: Mapping[str, Any]) -> dict[str, str]:
    """Config values as the engine hands them to a program: strings, objects as JSON."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, str):
            out[key] = value
        else:
            out[key] = json.dumps(value)
    return out


def run_program(
    stack: str,
    config: Mapping[str, Any] | None = None,
    program: Callable[[], None] | None = None,
    preview: bool = False,
    previous: Mapping[str, Any] | None = None,
    monitor: RecordingMonitor | None = None,
    fast: bool = True,
) -> Run:
    """Run ``program`` (default: the project's ``__main__.py``) for ``stack`` under mocks.

    ``config`` (fully qualified keys) replaces the stack file's config when given; ``previous``
    stands for the stack's last outputs (e.g. the base branch's plan ``outputs.yaml``); a
    ``monitor`` given by the caller (made with the same ``previous``) can be inspected after a
    failed run. ``fast=False`` runs the SDK's default path (cyclic GC on, stack traces captured):
    the tests compare both, so the shortcuts are shown to change no byte of the plan.
    """
    if monitor is None:
        monitor = RecordingMonitor(previous)
    pulumi.runtime.settings.ROOT.set(None)  # a fresh root stack: no outputs from an earlier run
    pulumi.runtime.set_mocks(monitor.mocks, project="gpuaas", stack=stack, preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config(to_runtime_config(stack_config(stack) if config is None else config), [])
    settings = pulumi.runtime.settings.SETTINGS
    settings.rpc_manager.clear()
    settings.outputs.clear()

    def main() -> None:
        if program is not None:
            program()
        else:
            runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        # As the SDK's Stack does at the end of a real run: send the exports to the engine. An
        # export that fails to resolve keeps them all from being registered.
        root = get_root_resource()
        if isinstance(root, pulumi.ComponentResource):
            root.register_outputs(massage(getattr(root, "outputs", {}), []))

    with gc_paused() if fast else nullcontext(), _no_stack_traces() if fast else nullcontext(), _inline_monitor_calls():
        _sync_await(run_pulumi_func(main))
        outputs, secrets = _resolve_outputs()
    return Run(stack=stack, records=monitor.records, outputs=outputs, secret_outputs=secrets)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a run; restore its state afterwards.

    A run keeps every resource, Output and future alive until it ends, so each full (oldest
    generation) collection walks the whole growing heap: at 4000 nodes / 1024 teams the collector
    took 13 of the plan's 28 CPU seconds (9.7 s in 21 full collections), which made the plan
    superlinear in resources. Reference counting still frees acyclic garbage; the cycles a run
    leaves (Outputs and their futures) cost about 70 MB there (benchmarks/plan_scale.py,
    BENCHMARKS.md). Nothing the program registers depends on when garbage is collected.

    Before collection resumes, everything alive is frozen (``gc.freeze``): nothing was collected
    during the pause, so the young generation holds the whole run's heap, and the first young
    collection after it walked all of it, 27 % of the 4000-node plan's CPU (issue 37). Frozen
    objects are never collected; a process that lives on after the run (the tests: tests/conftest.py)
    calls ``gc.unfreeze()`` once done with it. Only the pause that turns collection back on freezes:
    a nested one leaves that to its caller.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


@contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Skip the SDK's per-resource Python stack capture while the program runs.

    The SDK walks and formats the whole call stack for every registration to tell the engine
    where a resource was declared (``RegisterResourceRequest.stackTrace``/``sourcePosition``).
    The recording monitor keeps neither, and at fleet scale the capture is about a fifth of the
    plan's time (benchmarks/plan_scale.py).
    """
    saved = pulumi_resource._get_stack_trace
    pulumi_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        pulumi_resource._get_stack_trace = saved


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each call at once, on the calling thread, and hands back its finished future.

    (A ThreadPoolExecutor only because asyncio accepts no other default executor; it never
    starts a thread.)
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exn:  # handed to the awaiting coroutine, as a pool would
            fut.set_exception(exn)
        return fut


@contextmanager
def _inline_monitor_calls() -> Iterator[None]:
    """Let the SDK's monitor calls run on the event loop's thread instead of a thread pool.

    The SDK sends every registration through ``loop.run_in_executor`` because a real monitor
    is a blocking gRPC call. The recording monitor answers at once, so the pool only adds a
    thread hop and GIL hand-offs per call (and hides the monitor from a profiler).
    """
    loop = _ensure_event_loop()  # type: ignore[no-untyped-call]
    saved = getattr(loop, "_default_executor", None)
    loop.set_default_executor(_InlineExecutor())
    try:
        yield
    finally:
        loop._default_executor = saved


def _resolve_outputs() -> tuple[dict[str, Any], set[str]]:
    root = get_root_resource()
    exported: dict[str, Any] = dict(getattr(root, "outputs", {}) or {})
    values: dict[str, Any] = {}
    secrets: set[str] = set()
    for key in sorted(exported):
        out = pulumi.Output.from_input(exported[key])
        values[key] = _sync_await(out.future())
        if _sync_await(out.is_secret()):
            secrets.add(key)
    return values, secrets
