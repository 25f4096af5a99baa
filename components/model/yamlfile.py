"""Reading a YAML file someone else wrote, with bounds: every stack file and outputs file goes through here.

A stack file in a pull request, or a ``--previous`` outputs file, is input from outside. PyYAML's
safe loader is safe from code execution, not from the rest: ``--stack-file /dev/zero`` reads
forever, 3000 nested ``[`` overflow its recursive composer (a traceback), an alias that contains
itself builds a cyclic object every later walk recurses into, an alias expansion bomb ("billion
laughs") takes minutes and gigabytes downstream, and ``!!set`` or an unquoted date builds Python
objects no config field takes. :func:`read_yaml` refuses each before it costs anything, with one
line naming the file and the position:

* regular files only (opened non-blocking, so a FIFO cannot hang the open), at most
  :data:`MAX_BYTES`;
* at most :data:`MAX_DEPTH` levels of nesting, also counted through aliases;
* the JSON-compatible core tags only (:data:`TAGS`: string, integer, float, boolean, null,
  mapping, sequence; ``<<`` merge keys); an unquoted date stays a string, as Pulumi's Go YAML
  gives it to a program;
* aliases may add at most :data:`ALIAS_BUDGET` nodes to the document (what it would be with every
  alias written out), and never contain their own anchor;
* a key written twice in one mapping is refused (YAML 1.2 says keys are unique; PyYAML would keep
  the last silently, the Pulumi CLI refuses it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

#: Largest stack file read: the checked-in stacks are a few KiB; a 5000-node, 1024-team stack is
#: well under 2 MiB (benchmarks/plan_scale.py).
MAX_BYTES = 8 * 1024 * 1024
#: Largest outputs file read (``--previous``, a base plan's ``outputs.yaml``). Outputs grow faster than
#: the stack: partitions.conf lists every GUID of every partition, so 5000 nodes with fully qualified
#: names export 12.7 MB. The plan writer refuses to write outputs past this bound
#: (:mod:`components.plan.writer`), so it never refuses what the tool itself wrote.
MAX_OUTPUTS_BYTES = 64 * 1024 * 1024
#: Deepest nesting: a stack file is about 6 levels deep, an outputs file 4.
MAX_DEPTH = 64
#: Nodes that aliases may add beyond those written (a document without aliases adds none).
ALIAS_BUDGET = 100_000
_CORE = "tag:yaml.org,2002:"
TAGS = frozenset(_CORE + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "merge"))


class YamlError(Exception):
    """Why a file cannot be read: ``where`` is ``file[:line:column]``, ``why`` one line."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(where, why)
        self.where, self.why = where, why

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts depth while composing, refuses duplicate keys and keeps dates as text."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        if not isinstance(event, yaml.AliasEvent):
            tag = getattr(event, "tag", None)
            if tag is not None and tag != "!" and self._explicit(tag) not in TAGS:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"the tag {tag!r} is not allowed; a config holds strings, numbers, booleans, "
                    "null, mappings and lists only",
                    event.start_mark,
                )
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            self._depth += 1
            if self._depth > MAX_DEPTH:
                mark: Any = event.start_mark
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)

    @staticmethod
    def _explicit(tag: str) -> str:
        return tag if tag.startswith("tag:") else _CORE + tag.removeprefix("!!")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _value in node.value:
            if key_node.tag == _CORE + "merge":
                continue  # '<<' merges may be overridden by explicit keys (YAML merge spec)
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it with its mark
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first at line {first.start_mark.line + 1}, column "
                    f"{first.start_mark.column + 1}); a key may appear once in a mapping",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _construct_int(loader: _BoundedLoader, node: yaml.ScalarNode) -> int:
    """PyYAML's int, with Python's digit limit (``sys.get_int_max_str_digits``, 4300) reported at the
    number's position instead of a ``ValueError`` that no ``YAMLError`` handler catches."""
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"an integer of {len(node.value)} characters; no config or output value is that large",
            node.start_mark,
        ) from None


_BoundedLoader.add_constructor(_CORE + "int", _construct_int)

# Unquoted dates stay strings (Pulumi's Go YAML hands a program text, and no config field is a date).
_BoundedLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _CORE + "timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_text(file: Path, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``, or :class:`YamlError`."""
    name = str(file)
    a_what = f"{'an' if what[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {what}"
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise YamlError(name, f"no such {what}") from None
    except OSError as err:
        raise YamlError(name, f"cannot be read ({err.strerror or err})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise YamlError(name, f"is not a regular file (a {_kind(info.st_mode)}); {a_what} is a YAML file")
        if info.st_size > max_bytes:
            raise YamlError(name, f"is {info.st_size} bytes; {a_what} is at most {max_bytes} bytes")
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(max_bytes + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > max_bytes:
        raise YamlError(name, f"grew past {max_bytes} bytes while read; {a_what} is at most {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlError(name, f"is not UTF-8 text ({err.reason} at byte {err.start})") from None


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return "special file"


def compose(text: str, name: str) -> yaml.Node | None:
    """The node graph of ``text``, bounded (depth, tags, aliases), or :class:`YamlError` at its position."""
    return _run(text, name, construct=False)  # type: ignore[no-any-return]


def load(text: str, name: str) -> Any:
    """The data of ``text`` (one document), bounded as :func:`compose` says."""
    return _run(text, name, construct=True)


def load_with_nodes(text: str, name: str) -> tuple[Any, yaml.Node | None]:
    """The data of ``text`` and the node graph it was built from (positions, plain scalars as
    written), composed once; bounded as :func:`compose` says."""
    return _run(text, name, construct=True, keep_nodes=True)  # type: ignore[no-any-return]


def _run(text: str, name: str, construct: bool, keep_nodes: bool = False) -> Any:
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # the reader checks the characters here already
        root = loader.get_single_node()
        if root is None:
            return (None, None) if keep_nodes else None
        _check_aliases(root, name)
        if keep_nodes:
            return loader.construct_document(root), root
        return loader.construct_document(root) if construct else root
    except yaml.YAMLError as err:
        raise _problem(name, err, text) from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(file: Path, what: str = "file", max_bytes: int = MAX_BYTES) -> Any:
    """:func:`read_text` then :func:`load`."""
    return load(read_text(file, what, max_bytes), str(file))


def _check_aliases(root: yaml.Node, name: str) -> None:
    """The document as it would be with every alias written out: no cycle, depth and size bounded.

    Iterative (a deep graph must not overflow the Python stack here either); each node is sized
    once, so the cost is the written document's, however many times aliases repeat it.
    """
    written = _distinct_nodes(root)
    limit = written + ALIAS_BUDGET
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if depth[key] > MAX_DEPTH:
                raise _at(name, node, f"nested more than {MAX_DEPTH} levels deep once its aliases are expanded")
            if size[key] > limit:
                raise _at(
                    name,
                    node,
                    f"its aliases expand the document by more than {ALIAS_BUDGET} nodes (this one alone is "
                    f"{size[key]} nodes written out); write the values out or use fewer aliases",
                )
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                why = "this anchor is used by an alias inside itself: the value would contain itself without end"
                raise _at(name, child, why)
            if id(child) not in size:
                stack.append((child, False))
    if size[id(root)] > limit:  # pragma: no cover - the root is checked in the loop
        raise _at(name, root, f"its aliases expand the document by more than {ALIAS_BUDGET} nodes")


def _distinct_nodes(root: yaml.Node) -> int:
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(_children(node))
    return len(seen)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _at(name: str, node: yaml.Node, why: str) -> YamlError:
    mark = node.start_mark
    return YamlError(f"{name}:{mark.line + 1}:{mark.column + 1}", f"YAML: {why}")


def _problem(name: str, err: yaml.YAMLError, text: str) -> YamlError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    if isinstance(err, yaml.reader.ReaderError):  # a character YAML forbids: a position, no mark
        before = text[: err.position]
        where = f"{name}:{before.count(chr(10)) + 1}:{err.position - (before.rfind(chr(10)) + 1) + 1}"
        char = chr(err.character) if isinstance(err.character, int) else err.character
        return YamlError(where, f"YAML: character {char!r} is not allowed in YAML ({err.reason})")
    where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else name
    problem = str(getattr(err, "problem", None) or err)
    if "'\\t'" in problem:
        problem = f"{problem} (YAML indents with spaces; tabs are not allowed there)"
    return YamlError(where, f"YAML: {problem}")
