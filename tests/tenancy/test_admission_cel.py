"""The admission policies' real CEL text, evaluated with cel-python.

``admission.networks_violations`` is a hand-written Python mirror of the network policy's CEL, and
the other tests check the mirror. A mirror can drift from the text it mirrors, so here the
expressions are taken from the rendered manifests (what is deployed), compiled with cel-python and
evaluated the way the API server does: ``object``, ``request``, ``params``, and ``variables``
evaluated in order. Every case of the mirror's tests and a few hundred generated annotations must
give the same failing checks from real CEL as from the mirror; the AKS pool policy, which has no
mirror, is tested here directly.

Kubernetes evaluates CEL with cel-go, whose ``matches`` is Go's RE2 ``regexp``, plus library
functions that standard CEL lacks. The ones the policies use are implemented below, each after
its source. cel-python's own ``matches`` is Python ``re.search`` in Unicode mode, which is not RE2
for these patterns (``\\s`` also matches ``\\v``, ``\\x1c``-``\\x1f``, NBSP and the other Unicode
spaces; ``(?i)i`` also matches ``ı`` and ``İ``; ``$`` also matches before a final newline), so
``matches`` is replaced too; :func:`test_celpy_stock_matches_is_not_re2` pins the difference.
cel-python 0.2.0 also crashes on a comprehension over an error value (``false && x.exists(...)``
with ``x`` missing), which cel-go evaluates to false; :class:`_Evaluator` fixes that.

On the admitted alphabet (printable ASCII, JSON whitespace) the mirror agrees with real CEL exactly,
and on every comma-form value (no alphabet there; the mirror trims as Go does). Outside it, in the
JSON form, where ``alphabet`` refuses the pod either way, some other checks differ: the mirror uses
Python ``re``, not RE2; :data:`KNOWN_DIVERGENCES` lists them with both answers.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any, Final

# A declared dev dependency (requirements-dev.txt): an ImportError here must fail the run, not skip.
import celpy
import lark
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, Evaluator
from hypothesis import given, settings
from hypothesis import strategies as st

from components.loader import gpuaas_section, parse_config
from components.model import resources
from components.plan.offline import ROOT, stack_config
from components.tenancy import admission, network_admission, networks
from components.tenancy import labels as team_labels
from tests import tenancy_objects
from tests.admission_cases import ALLOWED, REFUSED
from tests.conftest import raw_stack

NS: Final = "vision"
NET: Final = network_admission.NETWORKS_ANNOTATION
DEFAULT_NET: Final = network_admission.DEFAULT_NETWORK_ANNOTATION
CHECK_NAMES: Final = tuple(name for name, _expr, _msg in network_admission.NETWORK_CHECKS)

# --------------------------------------------------------------------------------------------
# RE2 (Go regexp) semantics on Python's re, for the constructs the policies' patterns use.
# Anything else raises, so a new construct in admission.py fails here instead of being
# approximated. Behaviour below was checked against go1.19 regexp, strings and unicode.

#: RE2 ``\s`` is ``[\t\n\f\r ]`` (github.com/google/re2/wiki/Syntax: "whitespace (== [\t\n\f\r ])");
#: no ``\v`` and nothing outside ASCII, unlike Python's ``\s`` in either mode.
_RE2_SPACE: Final = r"\t\n\f\r "
#: Go's ``(?i)`` matches the Unicode simple case-folding orbit (unicode.SimpleFold); for ASCII
#: letters only k and s have members outside ASCII: K (U+212A KELVIN SIGN) and ſ (U+017F LONG S).
#: Dotless ı and dotted İ are not in i's orbit (Python's IGNORECASE folds both to i).
_GO_FOLD: Final = {"k": "kK\u212a", "s": "sS\u017f"}
_ESCAPES_KEPT: Final = frozenset("tnrfv")


def _fold(letter: str) -> str:
    return "[" + _GO_FOLD.get(letter.lower(), letter.lower() + letter.upper()) + "]"


@cache
def re2(pattern: str) -> re.Pattern[str]:
    """``pattern`` (RE2 syntax) as a Python pattern with Go ``regexp`` semantics."""
    fold = pattern.startswith("(?i)")
    src = pattern.removeprefix("(?i)")
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(src):
        c = src[i]
        if c == "\\":
            esc = src[i + 1]
            i += 2
            if esc == "s":
                out.append(_RE2_SPACE if in_class else f"[{_RE2_SPACE}]")
            elif esc == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", src[i : i + 2]):
                out.append("\\x" + src[i : i + 2])
                i += 2
            elif esc in _ESCAPES_KEPT or (esc.isascii() and not esc.isalnum()):
                out.append("\\" + esc)  # same meaning in both; RE2 allows escaping any punctuation
            else:
                raise NotImplementedError(f"RE2 escape \\{esc} in {pattern!r}: teach re2() its Go semantics")
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[" or (fold and c.isalpha()):
                raise NotImplementedError(f"class construct {c!r} in {pattern!r}")
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            if src[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if src[i + 1 : i + 2] == "]":  # a leading ] is literal in both
                out.append("\\]")
                i += 1
        elif c == "$":
            out.append(r"\Z")  # RE2 $ without (?m) is end of text only; Python's also matches before a final \n
        elif c == "(" and src[i + 1 : i + 2] == "?":
            raise NotImplementedError(f"group flags in {pattern!r}")
        elif fold and c.isascii() and c.isalpha():
            out.append(_fold(c))
        else:
            out.append(c)
        i += 1
    return re.compile("".join(out))


def go_find_all(pattern: str, s: str, n: int = -1) -> list[str]:
    """Go ``(*regexp.Regexp).FindAllString(s, n)``: successive non-overlapping matches.

    Transcribed from Go's ``allMatches``: after an empty match the search moves on one rune, and
    an empty match abutting the previous match is dropped (Python's findall keeps it: for ``a*``
    on ``baaab`` Go gives ``['', 'aaa', '']``, Python ``['', 'aaa', '', '']``).
    """
    rx = re2(pattern)
    if n < 0:
        n = len(s) + 1
    out: list[str] = []
    pos, prev_end = 0, -1
    while len(out) < n and pos <= len(s):
        m = rx.search(s, pos)
        if m is None:
            break
        accept = True
        if m.end() == pos:
            if m.start() == prev_end:
                accept = False
            pos += 1
        else:
            pos = m.end()
        prev_end = m.end()
        if accept:
            out.append(m.group())
    return out


#: unicode.IsSpace (Go), i.e. Unicode White_Space: what strings.TrimSpace removes. Python's
#: str.strip() also removes U+001C..U+001F, which are not White_Space.
GO_SPACE: Final = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def _strings(values: Iterable[str]) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(v) for v in values])


def cel_matches(s: str, pattern: str) -> celtypes.BoolType:
    """CEL ``string.matches(string)`` in cel-go: ``regexp.MatchString`` — RE2, unanchored."""
    return celtypes.BoolType(re2(pattern).search(s) is not None)


def cel_find_all(s: str, pattern: str, limit: int = -1) -> celtypes.ListType:
    """``<string>.findAll(<string>[, <int>])`` from k8s.io/apiserver/pkg/cel/library/regex.go.

    The implementation is ``regexp.Compile(regex).FindAllString(str, int(n))`` with n = -1 when no
    limit is given: all non-overlapping RE2 matches, as a list of strings. (Its doc comment's example
    ``"123 abc 456".findAll('[0-9]*') == ['123', '456']`` leaves out the empty matches that
    FindAllString returns; the code is what runs.)
    """
    return _strings(go_find_all(pattern, s, int(limit)))


def cel_split(s: str, sep: str, limit: int = -1) -> celtypes.ListType:
    """``<string>.split(<string>[, <int>])`` from cel-go ext/strings.go: ``strings.Split`` / ``SplitN``.

    An empty separator splits into characters (runes); limit 0 gives an empty list; a positive
    limit n gives at most n parts, the last one the unsplit rest.
    """
    n = int(limit)
    if n == 0:
        return _strings([])
    if sep == "":
        parts = list(s) if n < 0 or n >= len(s) else [*s[: n - 1], s[n - 1 :]]
    else:
        parts = s.split(sep) if n < 0 else s.split(sep, n - 1)
    return _strings(parts)


def cel_trim(s: str) -> celtypes.StringType:
    """``<string>.trim()`` from cel-go ext/strings.go: ``strings.TrimSpace``.

    "Removes the leading and trailing whitespace ... uses the Unicode definition of whitespace
    which does not include the zero-width spaces" — Unicode White_Space, i.e. Go's unicode.IsSpace.
    """
    start, end = 0, len(s)
    while start < end and s[start] in GO_SPACE:
        start += 1
    while end > start and s[end - 1] in GO_SPACE:
        end -= 1
    return celtypes.StringType(s[start:end])


#: cel-python calls ``receiver.fn(a, b)`` as ``functions["fn"](receiver, a, b)`` (celpy
#: evaluation.Evaluator.method_eval), and the mapping given to Environment.program() is chained
#: in front of celpy's base_functions, so ``matches`` here replaces celpy's own.
K8S_FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "matches": cel_matches,
    "findAll": cel_find_all,
    "split": cel_split,
    "trim": cel_trim,
}

# --------------------------------------------------------------------------------------------
# A ValidatingAdmissionPolicy, compiled and evaluated as the API server does.

_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})


class _Evaluator(Evaluator):
    """celpy's Evaluator with one fix, so ``false && x.exists(...)`` is false as in cel-go.

    cel-python 0.2.0 evaluates both operands of ``&&``/``||`` and then combines them, absorbing an
    error operand (CEL's commutative short-circuit), but its comprehension macros iterate their
    receiver without checking it for an error: with ``c.resources`` lacking ``limits``,
    ``has(c.resources.limits) && c.resources.limits.exists(...)`` raises a Python TypeError instead
    of evaluating to false. Here a macro on an error receiver yields that error as a value.
    """

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation, functions=self.functions)

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        member, method = tree.children[:2]
        if isinstance(method, lark.Token) and method.value in _MACROS and isinstance(member, lark.Tree):
            receiver = self.visit(member)
            if isinstance(receiver, CELEvalError):
                return receiver
        return super().member_dot_arg(tree)


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _Evaluator(ast=self.ast, activation=self.new_activation(context), functions=self.functions).evaluate()


_ENV: Final = celpy.Environment(runner_class=_Runner)


@cache
def _ast(text: str) -> Any:
    return _ENV.compile(text)


class Policy:
    """A rendered ValidatingAdmissionPolicy, its expressions compiled with cel-python."""

    def __init__(
        self, manifest: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]] = K8S_FUNCTIONS
    ) -> None:
        spec = manifest["spec"]
        self.manifest = manifest
        fns = dict(functions)
        self.variables = [(v["name"], _ENV.program(_ast(v["expression"]), fns)) for v in spec.get("variables", [])]
        self.validations = [_ENV.program(_ast(v["expression"]), fns) for v in spec["validations"]]
        self.messages = [
            _ENV.program(_ast(v["messageExpression"]), fns) if "messageExpression" in v else None
            for v in spec["validations"]
        ]

    def activation(
        self,
        pod: Mapping[str, Any],
        namespace: str,
        params: Mapping[str, Any] | None = None,
        *,
        old: Mapping[str, Any] | None = None,
        namespace_labels: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``object``, ``oldObject``, ``request``, ``namespaceObject``, ``params`` and ``variables``.

        Each variable sees the ones before it. ``old`` makes it an UPDATE; ``namespace_labels`` are
        the labels of ``namespaceObject`` (a Namespace without labels when not given).
        """
        ns_meta: dict[str, Any] = {"name": namespace}
        if namespace_labels is not None:
            ns_meta["labels"] = dict(namespace_labels)
        act: dict[str, Any] = {
            "object": json_to_cel(dict(pod)),
            "oldObject": json_to_cel(dict(old)) if old is not None else None,
            "request": json_to_cel(
                {
                    "namespace": namespace,
                    "operation": "CREATE" if old is None else "UPDATE",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                }
            ),
            "namespaceObject": json_to_cel({"apiVersion": "v1", "kind": "Namespace", "metadata": ns_meta}),
            "params": json_to_cel(dict(params)) if params is not None else None,
        }
        values: dict[celtypes.StringType, Any] = {}
        for name, program in self.variables:
            act["variables"] = celtypes.MapType(values)
            values[celtypes.StringType(name)] = program.evaluate(act)
        act["variables"] = celtypes.MapType(values)
        return act

    def results(
        self, pod: Mapping[str, Any], namespace: str, params: Mapping[str, Any] | None = None, **kw: Any
    ) -> list[bool]:
        """Each validation's value (an evaluation error raises: nothing here expects one)."""
        act = self.activation(pod, namespace, params, **kw)
        out = []
        for program in self.validations:
            value = program.evaluate(act)
            assert isinstance(value, celtypes.BoolType), f"validation gave {value!r}, not a bool"
            out.append(bool(value))
        return out

    def message(
        self, index: int, pod: Mapping[str, Any], namespace: str, params: Mapping[str, Any] | None = None, **kw: Any
    ) -> str:
        program = self.messages[index]
        assert program is not None
        value = program.evaluate(self.activation(pod, namespace, params, **kw))
        assert isinstance(value, str)  # celpy's string + string is a plain str
        return value


def pod(annotations: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A Pod as the API server hands it to CEL; no ``metadata.annotations`` field unless given."""
    metadata: dict[str, Any] = {"name": "p", "namespace": NS}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }


NETWORKS: Final = Policy(network_admission.networks_policy())


def cel_violations(annotations: Mapping[str, str], namespace: str = NS, policy: Policy = NETWORKS) -> list[str]:
    """The names of the network checks the real CEL fails (validation i is NETWORK_CHECKS[i])."""
    results = policy.results(pod(annotations or None), namespace)
    return [name for name, ok in zip(CHECK_NAMES, results, strict=True) if not ok]


def test_validations_line_up_with_check_names() -> None:
    """Mapping validation i to NETWORK_CHECKS[i] is sound: same count, same text, same order."""
    spec = network_admission.networks_policy()["spec"]
    assert [v["expression"] for v in spec["validations"]] == [e for _n, e, _m in network_admission.NETWORK_CHECKS]
    assert [v["name"] for v in spec["variables"]] == ["networks", "isJson"]


# --------------------------------------------------------------------------------------------
# The library functions against their documented or Go-observed behaviour


def test_k8s_functions_follow_their_sources() -> None:
    assert go_find_all("[0-9]*", "123 abc 456") == ["123", "", "", "", "", "456"]  # go1.19 FindAllString
    assert go_find_all("[0-9]*", "123 abc 456", 1) == ["123"]
    assert go_find_all("a*", "baaab") == ["", "aaa", ""]
    assert go_find_all("xyz", "123 abc 456") == []
    assert go_find_all("[0-9]+", "1 2", 0) == []
    assert cel_split("hello hello hello", " ") == ["hello", "hello", "hello"]
    assert cel_split("hello hello hello", " ", 0) == []
    assert cel_split("hello hello hello", " ", 1) == ["hello hello hello"]
    assert cel_split("hello hello hello", " ", 2) == ["hello", "hello hello"]
    assert cel_split("hello hello hello", " ", -1) == ["hello", "hello", "hello"]
    assert cel_split("", ",") == [""] and cel_split("", "") == [] and cel_split("a,b", "") == ["a", ",", "b"]
    assert cel_trim("  \ttrim\n    ") == "trim"
    assert cel_trim("\u2003\xa0x\u3000\v") == "x"
    assert cel_trim("\x1cvision/x\u200b") == "\x1cvision/x\u200b", "U+001C and zero-width space are not White_Space"
    assert not re2(r"\s").search("\v") and not re2(r"\s").search("\x1c") and re2(r"\s").search("\f")
    assert re2("(?i)s").search("\u017f") and re2("(?i)k").search("\u212a") and not re2("(?i)i").search("\u0131")
    assert not re2("a$").search("a\n")
    with pytest.raises(NotImplementedError):
        re2(r"\d")


def test_celpy_stock_matches_is_not_re2() -> None:
    """Why ``matches`` is replaced: celpy's is Python re, which differs from RE2 on these patterns."""
    text = "'\"namespace\"\\v:'.matches(r'\"namespace\"\\s*:')"
    stock = _ENV.program(_ast(text)).evaluate({})
    ours = _ENV.program(_ast(text), dict(K8S_FUNCTIONS)).evaluate({})
    assert (bool(stock), bool(ours)) == (
        True,
        False,
    )  # Go: regexp.MatchString(`"namespace"\s*:`, "\"namespace\"\v:") is false
    dotless = "'\"cn\u0131-args\":'.matches(r'(?i)\"(cni-args|infiniband-guid)\"\\s*:')"
    stock = _ENV.program(_ast(dotless)).evaluate({})
    ours = _ENV.program(_ast(dotless), dict(K8S_FUNCTIONS)).evaluate({})
    assert (bool(stock), bool(ours)) == (True, False)  # Go's (?i) does not fold U+0131 (dotless i) to i


def test_celpy_hands_the_module_regexes_through_unchanged() -> None:
    """cel-python decodes the r'...' literals to exactly the RE_* strings (no escape processing)."""
    seen: set[str] = set()

    def record(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(s: str, pattern: str, *rest: Any) -> Any:
            seen.add(str(pattern))
            return fn(s, pattern, *rest)

        return wrapped

    spy = Policy(
        network_admission.networks_policy(),
        {**K8S_FUNCTIONS, "matches": record(cel_matches), "findAll": record(cel_find_all)},
    )
    spy.results(pod({NET: '[{"name":"ib","namespace":"vision"}]'}), NS)
    assert seen == {
        network_admission.RE_IS_JSON,
        network_admission.RE_ALPHABET,
        network_admission.RE_FORBIDDEN_KEY,
        network_admission.RE_STRING_TOKEN,
        network_admission.RE_ALLOWED_KEY,
        network_admission.RE_NAMESPACE_KEY,
        network_admission.own_namespace_value(NS),
    }


# --------------------------------------------------------------------------------------------
# Networks policy: real CEL against the mirror, on the cases of tests/admission_cases.py.


@pytest.mark.parametrize("value", ALLOWED)
def test_networks_allowed_by_real_cel(value: str) -> None:
    annotations = {NET: value} if value else {}
    assert cel_violations(annotations) == network_admission.networks_violations(annotations, NS) == []
    assert cel_violations({NET: value}) == [], "the annotation present but empty is allowed too"


@pytest.mark.parametrize(("value", "checks"), REFUSED)
def test_networks_refused_by_real_cel(value: str, checks: set[str]) -> None:
    real = cel_violations({NET: value})
    assert real == network_admission.networks_violations({NET: value}, NS)
    assert checks <= set(real)


def test_default_network_annotation_refused_by_real_cel() -> None:
    annotations = {DEFAULT_NET: "speech/ib"}
    assert (
        cel_violations(annotations) == network_admission.networks_violations(annotations, NS) == ["no-default-network"]
    )
    both = {DEFAULT_NET: "speech/ib", NET: "ib-vision"}
    assert cel_violations(both) == network_admission.networks_violations(both, NS) == ["no-default-network"]


def test_harness_can_fail() -> None:
    """A policy with the ``!`` dropped from one check disagrees with the mirror: the comparison bites."""
    broken = copy.deepcopy(network_admission.networks_policy())
    index = CHECK_NAMES.index("no-cni-args")
    expr = broken["spec"]["validations"][index]["expression"]
    assert expr.startswith("!")
    broken["spec"]["validations"][index]["expression"] = expr.removeprefix("!")
    policy = Policy(broken)
    guid = '[{"name":"ib","cni-args":{"guid":"02:00:00:00:00:00:10:00"}}]'
    assert cel_violations({NET: guid}, policy=policy) == ["allowed-keys"]
    assert network_admission.networks_violations({NET: guid}, NS) == ["no-cni-args", "allowed-keys"]
    assert cel_violations({NET: "ib-vision"}, policy=policy) == ["no-cni-args"] != []


# --------------------------------------------------------------------------------------------
# Generated annotations. On the admitted alphabet (printable ASCII and JSON whitespace) real CEL and
# the mirror must agree exactly.

NAMESPACES: Final = ["vision", "speech", "default", "visionx", "vision-x", "Vision", "kube-system", ""]
KEYS: Final = [
    "name",
    "namespace",
    "interface",
    "ips",
    "mac",
    "default-route",
    "cni-args",
    "infiniband-guid",
    "Namespace",
    "CNI-Args",
    "Infiniband-GUID",
    "portMappings",
]
WHITESPACE: Final = [" ", "\t", "\n", "\r", "  "]
FRAGMENTS: Final = [
    "/",
    ",",
    "@",
    '"',
    ":",
    "{",
    "}",
    "[",
    "]",
    '"namespace":',
    '"namespace" : "vision"',
    '"namespace":"speech"',
    '"cni-args":{}',
    '"name":"ib"',
    "ib-vision",
    "net1",
]

_scalar = st.sampled_from([*NAMESPACES, "ib-vision", "net1", "10.0.0.1/24", "02:00:00:00:00:00:10:00"])
_value = st.one_of(_scalar, st.lists(_scalar, max_size=2), st.fixed_dictionaries({"guid": _scalar}))
_element = st.dictionaries(st.sampled_from(KEYS), _value, max_size=4)
_json_doc = st.builds(
    lambda elements, item_sep, key_sep, bare: json.dumps(
        elements[0] if bare and elements else elements, separators=(item_sep, key_sep)
    ),
    st.lists(_element, max_size=3),
    st.sampled_from([",", ", ", ",\n  ", " ,\t"]),
    st.sampled_from([":", ": ", " : ", ":\n"]),
    st.booleans(),
)
_text_item = st.builds(
    lambda lead, ns, name, iface, trail: f"{lead}{ns + '/' if ns is not None else ''}{name}{iface}{trail}",
    st.sampled_from(["", *WHITESPACE]),
    st.none() | st.sampled_from(NAMESPACES),
    st.sampled_from(["ib-vision", "ib", "other-net", ""]),
    st.sampled_from(["", "@net1", "@ib0"]),
    st.sampled_from(["", *WHITESPACE]),
)
_text_doc = st.lists(_text_item, min_size=1, max_size=4).map(",".join)
_pieces = st.one_of(_json_doc, _text_doc, st.sampled_from(FRAGMENTS + WHITESPACE + NAMESPACES))
_mixed = st.lists(_pieces, max_size=6).map("".join)
ANNOTATION: Final = st.one_of(_json_doc, _text_doc, _mixed)

# Characters outside the admitted alphabet where RE2/Go and Python differ (and backslash escapes).
HOSTILE: Final = ["\v", "\f", "\x1c", "\x1f", "\xa0", "\u2028", "\u017f", "\u212a", "\u0131", "\u0130", "\\", "\\u0073"]


@settings(max_examples=200, deadline=None)
@given(value=ANNOTATION, default_network=st.booleans())
def test_real_cel_and_mirror_agree(value: str, default_network: bool) -> None:
    annotations = {NET: value}
    if default_network:
        annotations[DEFAULT_NET] = "vision/ib"
    assert cel_violations(annotations) == network_admission.networks_violations(annotations, NS), value


def _sprinkle(value: str, inserts: list[tuple[int, str]]) -> str:
    for at, piece in sorted(inserts, reverse=True):
        at %= len(value) + 1
        value = value[:at] + piece + value[at:]
    return value


@settings(max_examples=200, deadline=None)
@given(
    value=ANNOTATION,
    inserts=st.lists(st.tuples(st.integers(0, 200), st.sampled_from(HOSTILE)), min_size=1, max_size=3),
)
def test_outside_the_alphabet_only_the_verdict_is_shared(value: str, inserts: list[tuple[int, str]]) -> None:
    """With characters outside the alphabet the checks of the JSON form may differ (see
    KNOWN_DIVERGENCES), never the verdict; the comma form has no alphabet and agrees exactly.

    A JSON value with such a character always fails ``alphabet``, in both; any other difference is
    the mirror's Python ``re`` semantics against Kubernetes' RE2. The comma form's checks are
    split, contains and trim, which the mirror does as Go does (``network_admission.go_trim``).
    """
    value = _sprinkle(value, inserts)
    real, mirrored = cel_violations({NET: value}), network_admission.networks_violations({NET: value}, NS)
    if re.search(network_admission.RE_IS_JSON, value):
        assert "alphabet" in real and "alphabet" in mirrored, value
    else:
        assert real == mirrored, value


#: Inputs where the mirror and real CEL (RE2/Go semantics) disagree, with both answers. Each is
#: refused either way (``alphabet``), so the deployed verdict is unaffected; the mirror is the one
#: that is off. Checked against go1.19 regexp / strings.TrimSpace.
KNOWN_DIVERGENCES: Final[list[tuple[str, list[str], list[str], str]]] = [
    (
        '[{"name":"ib","namespace"\v:"speech"}]',
        ["alphabet"],
        ["alphabet", "json-namespace"],
        "RE2 \\s has no \\v; the mirror's re.ASCII \\s has",
    ),
    (
        '[{"name":"ib","portMappings"\v:[]}]',
        ["alphabet"],
        ["alphabet", "allowed-keys"],
        "RE2 \\s has no \\v, so real CEL finds no key there; the mirror's re.ASCII \\s has",
    ),
    (
        '[{"name":"ib","cni-arg\u017f":{}}]',
        ["alphabet", "no-cni-args", "allowed-keys"],
        ["alphabet", "allowed-keys"],
        "Go (?i) folds U+017F to s; the mirror's re.ASCII does not",
    ),
]


@pytest.mark.parametrize(("value", "real", "mirrored", "why"), KNOWN_DIVERGENCES)
def test_known_divergences(value: str, real: list[str], mirrored: list[str], why: str) -> None:
    assert cel_violations({NET: value}) == real, why
    assert network_admission.networks_violations({NET: value}, NS) == mirrored, why


# --------------------------------------------------------------------------------------------
# Networks stay as admitted: the UPDATE policy, real CEL against its mirror

IMMUTABLE: Final = Policy(network_admission.networks_immutable_policy())
IMMUTABLE_NAMES: Final = tuple(name for name, _expr, _msg in network_admission.IMMUTABLE_CHECKS)
GUID_PATCH: Final = '[{"name":"ib-vision","cni-args":{"guid":"02:00:00:00:00:00:20:00"}}]'

#: (old annotations, new annotations, checks that must fail) — an UPDATE of a team pod.
UPDATES: Final[list[tuple[dict[str, str], dict[str, str], list[str]]]] = [
    ({NET: "ib-vision"}, {NET: "ib-vision"}, []),
    ({NET: "ib-vision"}, {NET: "ib-vision", "team/owner": "x"}, []),  # other annotations may change
    ({}, {}, []),
    ({}, {"team/owner": "x"}, []),
    ({DEFAULT_NET: "vision/ib"}, {DEFAULT_NET: "vision/ib"}, []),
    ({NET: "ib-vision"}, {NET: GUID_PATCH}, ["networks-unchanged"]),  # the review's attack
    ({NET: "ib-vision"}, {NET: "speech/ib-speech"}, ["networks-unchanged"]),
    ({}, {NET: "ib-vision"}, ["networks-unchanged"]),  # added
    ({NET: "ib-vision"}, {}, ["networks-unchanged"]),  # removed
    ({NET: ""}, {}, ["networks-unchanged"]),  # present-but-empty is not absent
    ({}, {DEFAULT_NET: "speech/ib"}, ["default-network-unchanged"]),
    ({NET: "a", DEFAULT_NET: "b"}, {NET: "c", DEFAULT_NET: "d"}, ["networks-unchanged", "default-network-unchanged"]),
]


def _with_annotations(annotations: dict[str, str]) -> dict[str, Any]:
    return pod(annotations or None)


@pytest.mark.parametrize(("old", "new", "failing"), UPDATES)
def test_network_annotations_cannot_change_on_update(
    old: dict[str, str], new: dict[str, str], failing: list[str]
) -> None:
    results = IMMUTABLE.results(_with_annotations(new), NS, old=_with_annotations(old))
    real = [name for name, ok in zip(IMMUTABLE_NAMES, results, strict=True) if not ok]
    assert real == network_admission.networks_update_violations(old, new) == failing


def test_update_validations_line_up_with_check_names() -> None:
    spec = network_admission.networks_immutable_policy()["spec"]
    assert [v["expression"] for v in spec["validations"]] == [e for _n, e, _m in network_admission.IMMUTABLE_CHECKS]
    assert [k for _n, k in network_admission.IMMUTABLE_ANNOTATIONS] == [NET, DEFAULT_NET]


def test_update_policy_matches_updates_of_pods_and_their_status() -> None:
    """Annotations can be written through pods/status too (the status strategy keeps metadata)."""
    spec = network_admission.networks_immutable_policy()["spec"]
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["UPDATE"] and rule["resources"] == ["pods", "pods/status"]
    assert (
        spec["matchConstraints"]["namespaceSelector"]
        == network_admission.networks_policy()["spec"]["matchConstraints"]["namespaceSelector"]
    )
    create = network_admission.networks_policy()["spec"]["matchConstraints"]["resourceRules"][0]
    assert create["operations"] == ["CREATE"], "the CREATE checks never block a status update"


# --------------------------------------------------------------------------------------------
# Partition policy: a pod requests only its own namespace's partition resource

PARTITION: Final = Policy(admission.partition_policy())
OWN: Final = {team_labels.PARTITION_LABEL: "sriov8001", team_labels.TEAM_LABEL: "vision"}


def _asks(resource: str, where: str = "containers", kind: str = "limits") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "b", "resources": {kind: {resource: "1"}}}
    if where == "sidecar":
        where, container["restartPolicy"] = "initContainers", "Always"
    spec: dict[str, Any] = {where: [container]}
    if where != "containers":
        spec["containers"] = [{"name": "main", "image": "b"}]
    return spec


PARTITION_CASES: Final[list[tuple[str, dict[str, Any], Mapping[str, str] | None, bool]]] = [
    ("own partition, limits", _asks("nvidia.com/sriov8001"), OWN, True),
    ("own partition, requests", _asks("nvidia.com/sriov8001", kind="requests"), OWN, True),
    ("no partition resource", _asks("nvidia.com/gpu"), OWN, True),
    ("nothing at all", {}, None, True),
    ("gpu in a namespace without partition", _asks("nvidia.com/gpu"), None, True),
    ("foreign partition", _asks("nvidia.com/sriov8002"), OWN, False),
    ("foreign partition, requests", _asks("nvidia.com/sriov8002", kind="requests"), OWN, False),
    ("foreign partition, init container", _asks("nvidia.com/sriov8002", "initContainers"), OWN, False),
    ("own partition, init container", _asks("nvidia.com/sriov8001", "initContainers"), OWN, True),
    ("foreign partition, native sidecar", _asks("nvidia.com/sriov8002", "sidecar"), OWN, False),
    ("foreign partition, ephemeral container", _asks("nvidia.com/sriov8002", "ephemeralContainers"), OWN, False),
    ("any partition, namespace without one", _asks("nvidia.com/sriov8001"), {team_labels.TEAM_LABEL: "plain"}, False),
    ("any partition, unlabelled namespace", _asks("nvidia.com/sriov8001"), None, False),
    ("lookalike under the prefix", _asks("nvidia.com/sriov8001x"), OWN, False),
]


@pytest.mark.parametrize(("label", "spec", "labels", "allowed"), PARTITION_CASES, ids=[c[0] for c in PARTITION_CASES])
def test_partition_policy_with_real_cel(
    label: str, spec: dict[str, Any], labels: Mapping[str, str] | None, allowed: bool
) -> None:
    p = pod(**spec)
    assert PARTITION.results(p, NS, namespace_labels=labels) == [allowed], label
    own = (
        "nvidia.com/" + labels[team_labels.PARTITION_LABEL]
        if labels and team_labels.PARTITION_LABEL in labels
        else None
    )
    assert (admission.partition_resource_violations(p["spec"], own) == []) == allowed, "mirror agrees"
    message = PARTITION.message(0, p, NS, namespace_labels=labels)
    assert ("nvidia.com/sriov8001" in message) == (own is not None), message


def test_partition_label_is_what_the_team_namespace_carries(cfg_of: Any) -> None:
    """The policy builds the resource from the label exactly as quotas and NADs spell it."""
    cfg = cfg_of("onprem")
    for team in cfg.teams:
        labels = tenancy_objects.namespace(cfg, team)["metadata"]["labels"]
        act = PARTITION.activation(pod(), team.ns, namespace_labels=labels)
        assert act["variables"] == {
            "ownPartition": resources.sriov_resource(team.partition.pkey),
            "ownPartitionOnly": True,
        }
        nad = tenancy_objects.nad(cfg, team)
        assert nad is not None and nad["metadata"]["annotations"][networks.RESOURCE_NAME_ANNOTATION] == str(
            act["variables"]["ownPartition"]
        )


# --------------------------------------------------------------------------------------------
# AKS pool policy (no mirror: real CEL is the only test of it)

#: The AKS variant with a pool no team owns (tests/stacks/aks-elastic.yaml): ndshared.
AKS_SHARED: Final = parse_config(gpuaas_section(stack_config("aks", ROOT / "tests" / "stacks" / "aks-elastic.yaml")))
POOL: Final = Policy(tenancy_objects.pool_policy(AKS_SHARED))
OTHER_POOL: Final = "ndother"
SHARED_POOL: Final = "ndshared"


def _team_namespace_labels() -> dict[str, str]:
    """The labels of the first AKS team's namespace: where the pool policy reads the pool."""
    cfg = parse_config(raw_stack("aks"))
    return dict(tenancy_objects.namespace(cfg, cfg.teams[0])["metadata"]["labels"])


NS_LABELS: Final = _team_namespace_labels()
POOL_KEY: Final = team_labels.AKS_POOL_LABEL
POOL_NAME: Final = NS_LABELS[team_labels.POOL_LABEL]


def test_pool_comes_from_the_namespace_not_a_parameter() -> None:
    assert "paramKind" not in POOL.manifest["spec"] and "paramRef" not in admission.pool_binding()["spec"]
    selector = admission.pool_binding()["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector == [{"key": team_labels.TEAM_LABEL, "operator": "Exists"}], (
        "every team namespace, pool label or not"
    )
    assert POOL_NAME == "ndh100a" != OTHER_POOL
    cfg = parse_config(raw_stack("aks"))
    cm = tenancy_objects.scheduling_config_map(cfg, cfg.teams[0])
    assert cm is not None and cm["data"]["nodeSelectorValue"] == POOL_NAME, "the Jobs' template agrees"


def test_editing_the_scheduling_config_map_changes_nothing() -> None:
    """The review's attack: a team rewrites gpuaas-scheduling to point at another pool. No effect."""
    forged = {"data": {"nodeSelectorKey": POOL_KEY, "nodeSelectorValue": OTHER_POOL}}
    spec = {"containers": _gpu(), "nodeSelector": {POOL_KEY: OTHER_POOL}}
    assert POOL.results(pod(**spec), "team-vision", forged, namespace_labels=NS_LABELS) == [False]


def _gpu(limits: bool = False, resource: str = "nvidia.com/gpu") -> list[dict[str, Any]]:
    resources = {"limits" if limits else "requests": {resource: "8", "cpu": "4"}}
    return [{"name": "main", "image": "busybox", "resources": resources}]


def _affinity(*terms: list[str], key: str = team_labels.AKS_POOL_LABEL, operator: str = "In") -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": operator, "values": values}]} for values in terms
                ]
            }
        }
    }


_PLAIN: Final = [{"name": "main", "image": "busybox"}]
_SELECT: Final = {"nodeSelector": {POOL_KEY: POOL_NAME}}

POOL_CASES: Final[list[tuple[str, dict[str, Any], bool]]] = [
    ("gpu, no selector", {"containers": _gpu()}, False),
    ("gpu, pool nodeSelector", {"containers": _gpu(), **_SELECT}, True),
    ("gpu limits only, pool nodeSelector", {"containers": _gpu(limits=True), **_SELECT}, True),
    ("gpu limits only, no selector", {"containers": _gpu(limits=True)}, False),
    ("rdma, no selector", {"containers": _gpu(resource="rdma/hcashared")}, False),
    ("gpu, other pool nodeSelector", {"containers": _gpu(), "nodeSelector": {POOL_KEY: OTHER_POOL}}, False),
    ("gpu, other nodeSelector key", {"containers": _gpu(), "nodeSelector": {"zone": POOL_NAME}}, False),
    ("gpu, affinity In [pool]", {"containers": _gpu(), "affinity": _affinity([POOL_NAME])}, True),
    ("gpu, affinity In [other]", {"containers": _gpu(), "affinity": _affinity([OTHER_POOL])}, False),
    ("gpu, affinity In [pool, other]", {"containers": _gpu(), "affinity": _affinity([POOL_NAME, OTHER_POOL])}, False),
    (
        "gpu, affinity terms pool | other",
        {"containers": _gpu(), "affinity": _affinity([POOL_NAME], [OTHER_POOL])},
        False,
    ),
    ("gpu, affinity terms pool | pool", {"containers": _gpu(), "affinity": _affinity([POOL_NAME], [POOL_NAME])}, True),
    (
        "gpu, affinity NotIn [other]",
        {"containers": _gpu(), "affinity": _affinity([OTHER_POOL], operator="NotIn")},
        False,
    ),
    ("gpu, affinity In []", {"containers": _gpu(), "affinity": _affinity([])}, False),
    ("gpu, affinity no terms", {"containers": _gpu(), "affinity": _affinity()}, False),
    ("cpu only", {"containers": [{"name": "m", "image": "b", "resources": {"requests": {"cpu": "1"}}}]}, True),
    ("no resources", {}, True),
    ("cpu container + gpu container", {"containers": [{"name": "a", "image": "b"}, *_gpu()]}, False),
    # every container list asks too (item 7): init containers, native sidecars, ephemeral containers
    ("gpu init container, no selector", {"containers": _PLAIN, "initContainers": _gpu()}, False),
    ("gpu init container, pool nodeSelector", {"containers": _PLAIN, "initContainers": _gpu(), **_SELECT}, True),
    (
        "rdma native sidecar, no selector",
        {"containers": _PLAIN, "initContainers": [{**_gpu(resource="rdma/hcashared")[0], "restartPolicy": "Always"}]},
        False,
    ),
    ("gpu ephemeral container, no selector", {"containers": _PLAIN, "ephemeralContainers": _gpu()}, False),
    ("cpu init container, no selector", {"containers": _PLAIN, "initContainers": _PLAIN}, True),
]


@pytest.mark.parametrize(("label", "spec", "allowed"), POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_pool_policy_with_real_cel(label: str, spec: dict[str, Any], allowed: bool) -> None:
    p = pod(**spec)
    assert POOL.results(p, "team-vision", namespace_labels=NS_LABELS) == [allowed], label
    message = POOL.message(0, p, "team-vision", namespace_labels=NS_LABELS)
    assert message.endswith(f"nodeSelector {POOL_KEY}={POOL_NAME}"), message


def test_pool_variable_sees_the_pod() -> None:
    shared = [SHARED_POOL]
    act = POOL.activation(pod(containers=_gpu()), "team-vision", namespace_labels=NS_LABELS)
    assert act["variables"] == {"wantsAccelerator": True, "wantsRdma": False, "pool": POOL_NAME, "unownedPools": shared}
    act = POOL.activation(pod(containers=_gpu(resource="rdma/hcashared")), "team-vision", namespace_labels=NS_LABELS)
    assert act["variables"] == {"wantsAccelerator": True, "wantsRdma": True, "pool": POOL_NAME, "unownedPools": shared}
    act = POOL.activation(pod(), "team-vision", namespace_labels=NS_LABELS)
    assert act["variables"] == {
        "wantsAccelerator": False,
        "wantsRdma": False,
        "pool": POOL_NAME,
        "unownedPools": shared,
    }


#: The labels of a team namespace without a partition: the team label, no pool.
NO_POOL_LABELS: Final = {k: v for k, v in NS_LABELS.items() if k != team_labels.POOL_LABEL}


@pytest.mark.parametrize(
    ("label", "spec", "allowed"),
    [
        ("rdma on another team's pool", {"containers": _gpu(resource="rdma/hcashared"), **_SELECT}, False),
        (
            "rdma, empty pool selector",
            {"containers": _gpu(resource="rdma/hcashared"), "nodeSelector": {POOL_KEY: ""}},
            False,
        ),
        ("rdma, no selector", {"containers": _gpu(resource="rdma/hcashared")}, False),
        (
            "rdma init container on another team's pool",
            {"containers": _PLAIN, "initContainers": _gpu(resource="rdma/hcashared"), **_SELECT},
            False,
        ),
        ("cpu only, another team's pool", {"containers": _PLAIN, **_SELECT}, True),
        ("no resources", {}, True),
    ],
)
def test_a_team_without_a_pool_may_request_no_rdma(label: str, spec: dict[str, Any], allowed: bool) -> None:
    """Review item 1: a partitionless team (RDMA quota from the shared plugin) on another team's ND pool."""
    p = pod(**spec)
    assert POOL.results(p, "team-nopart", namespace_labels=NO_POOL_LABELS) == [allowed], label
    if not allowed:
        assert "no InfiniBand pool" in POOL.message(0, p, "team-nopart", namespace_labels=NO_POOL_LABELS)
    act = POOL.activation(p, "team-nopart", namespace_labels=NO_POOL_LABELS)
    assert act["variables"]["pool"] == ""


@pytest.mark.parametrize(
    ("label", "spec", "allowed"),
    [
        ("gpu on another team's pool", {"containers": _gpu(), **_SELECT}, False),
        ("gpu, no selector", {"containers": _gpu()}, False),
        ("gpu on the pool no team owns", {"containers": _gpu(), "nodeSelector": {POOL_KEY: SHARED_POOL}}, True),
        ("gpu, affinity In [shared]", {"containers": _gpu(), "affinity": _affinity([SHARED_POOL])}, True),
        (
            "gpu, affinity In [shared, another team's]",
            {"containers": _gpu(), "affinity": _affinity([SHARED_POOL, POOL_NAME])},
            False,
        ),
        (
            "gpu init container on another team's pool",
            {"containers": _PLAIN, "initContainers": _gpu(), **_SELECT},
            False,
        ),
        ("cpu only, no selector", {"containers": _PLAIN}, True),
    ],
)
def test_a_team_without_a_pool_runs_gpus_only_on_a_pool_no_team_owns(
    label: str, spec: dict[str, Any], allowed: bool
) -> None:
    """Item 12: a partitionless team's GPU-only pod on another team's pool took GPUs out of its
    partition. The pools no team owns are data in the policy (variables.unownedPools)."""
    p = pod(**spec)
    assert POOL.results(p, "team-nopart", namespace_labels=NO_POOL_LABELS) == [allowed], label
    if not allowed:
        message = POOL.message(0, p, "team-nopart", namespace_labels=NO_POOL_LABELS)
        assert f"select a pool no team owns with nodeSelector {POOL_KEY} ({SHARED_POOL})" in message, message
    assert POOL.activation(p, "team-nopart", namespace_labels=NO_POOL_LABELS)["variables"]["unownedPools"] == [
        SHARED_POOL
    ]


def test_with_every_pool_owned_a_partitionless_team_runs_no_gpu_pod() -> None:
    owned = Policy(tenancy_objects.pool_policy(parse_config(raw_stack("aks"))))
    p = pod(containers=_gpu(), nodeSelector={POOL_KEY: "ndh100b"})
    assert owned.results(p, "team-nopart", namespace_labels=NO_POOL_LABELS) == [False]
    assert "none: each GPU pool is the partition of a team" in owned.message(
        0, p, "team-nopart", namespace_labels=NO_POOL_LABELS
    )
    assert owned.results(pod(containers=_PLAIN), "team-nopart", namespace_labels=NO_POOL_LABELS) == [True]
