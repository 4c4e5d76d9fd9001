"""Loading YAML/JSON documents so that a finding names the line of what it is about."""

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from driver.findings import Finding, PathPart, json_path

LinePath = tuple[PathPart, ...]


@dataclass
class Document:
    data: Any
    file: str | None = None
    lines: dict[LinePath, int] | None = None
    folder: Path | None = None
    # JSON keeps its text instead of a line map: a finding looks its path up in the text,
    # where mapping every node of a 10,000-worker request took seconds.
    source: str | None = field(default=None, repr=False)
    _json_index: "JsonIndex | None" = field(default=None, init=False, repr=False)

    def line_of(self, path: LinePath) -> int | None:
        """The line of the deepest existing node on `path` (a missing key points at its parent)."""
        if self.lines is None:
            if self.source is None:
                return None
            if self._json_index is None:
                self._json_index = JsonIndex(self.source)
            return self._json_index.line_of(path)
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None

    def finding(self, code: str, path: LinePath, message: str) -> Finding:
        return Finding(
            code=code,
            path=json_path(path),
            message=message,
            file=self.file,
            line=self.line_of(path),
        )


class DocumentError(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


Duplicate = tuple[LinePath, int | None]


def _walk_nodes(
    node: yaml.Node, path: LinePath, lines: dict[LinePath, int], duplicates: list[Duplicate]
) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                duplicates.append(((*path, key), key_node.start_mark.line + 1))
            seen.add(key)
            _walk_nodes(value_node, (*path, key), lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk_nodes(item, (*path, index), lines, duplicates)


# libyaml where PyYAML was built with it: 5 times faster than the pure-Python loader, and it
# refuses nesting deeper than 1000 levels itself
YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _line_map(root: yaml.Node | None) -> tuple[dict[LinePath, int], list[Duplicate]]:
    lines: dict[LinePath, int] = {}
    duplicates: list[Duplicate] = []
    if root is not None:
        _walk_nodes(root, (), lines, duplicates)
    return lines, duplicates


def _non_string_key(data: Any, path: LinePath = ()) -> LinePath | None:
    """JSON documents only have string keys; YAML may produce ints, dates or nulls."""
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                return (*path, str(key))
            found = _non_string_key(value, (*path, key))
            if found is not None:
                return found
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found = _non_string_key(item, (*path, index))
            if found is not None:
                return found
    return None


def _checked(doc: Document, duplicates: list[Duplicate]) -> Document:
    if duplicates:
        path, line = duplicates[0]
        raise DocumentError(
            Finding(
                code="duplicate-key",
                path=json_path(path),
                file=doc.file,
                line=line,
                message="key appears twice in one mapping; the later value would silently win",
            )
        )
    # JSON object keys are strings by construction; YAML may produce ints, dates or nulls
    bad_key = None if doc.source is not None else _non_string_key(doc.data)
    if bad_key is not None:
        raise DocumentError(
            doc.finding(
                "schema.type", bad_key, "expected a string key (JSON object keys are strings)"
            )
        )
    return doc


def load_yaml(text: str, file: str | None = None) -> Document:
    try:
        # composed once: the data and the lines come from the same nodes, mapped before
        # construction flattens a merge key (<<) into its mapping's keys, where a key the
        # mapping itself gives over a merged one would read as a duplicate
        loader = YAML_LOADER(text)
        try:
            root = loader.get_single_node()
            lines, duplicates = _line_map(root)
            data = None if root is None else loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise DocumentError(
            Finding(
                code="yaml-syntax",
                path="$",
                file=file,
                line=mark.line + 1 if mark is not None else None,
                message=str(problem),
            )
        ) from None
    except RecursionError:
        raise DocumentError(
            Finding(
                code="yaml-syntax",
                path="$",
                file=file,
                message="document nests too deeply",
            )
        ) from None
    return _checked(Document(data=data, file=file, lines=lines), duplicates)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def load_json(text: str, file: str | None = None) -> Document:
    # each object with a key twice (by id) and the first key a reader sees again; the object is
    # held too: one that a later repeated key drops would otherwise be freed, and its id could
    # come back as another object's
    duplicated: dict[int, tuple[dict[str, Any], str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping = dict(items)
        if len(mapping) < len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    duplicated[id(mapping)] = (mapping, key)
                    break
                seen.add(key)
        return mapping

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            Finding(
                code="json-syntax",
                path="$",
                file=file,
                line=exc.lineno,
                message=exc.msg,
            )
        ) from None
    except (ValueError, RecursionError) as exc:
        raise DocumentError(
            Finding(
                code="json-syntax",
                path="$",
                file=file,
                message=str(exc) or "not valid JSON",
            )
        ) from None
    doc = Document(data=data, file=file, source=text)
    duplicates: list[Duplicate] = []
    if duplicated:
        # the key a reader meets a second time first; the index then serves the findings too
        index = doc._json_index = JsonIndex(text)
        offset, path = min(
            (index.second_key_offset(path, key), (*path, key))
            for path, key in _paths_of(data, duplicated)
        )
        duplicates = [(path, index.line(offset))]
    return _checked(doc, duplicates)


def _paths_of(
    data: Any, wanted: dict[int, tuple[dict[str, Any], str]]
) -> Iterator[tuple[LinePath, str]]:
    """The path of each `wanted` object (by id) inside `data`, with the key `wanted` names."""
    stack: list[tuple[LinePath, Any]] = [((), data)]
    left = len(wanted)
    while stack and left:
        path, node = stack.pop()
        if isinstance(node, dict):
            if id(node) in wanted:
                left -= 1
                yield path, wanted[id(node)][1]
            stack.extend(((*path, key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, index), item) for index, item in enumerate(node))


# Where a node lies in JSON text. json's own C scanner skips every value the path does not
# enter, so finding one node in a 10,000-worker request takes milliseconds; composing a line
# map of every node (libyaml) took 2 to 4 s there, and missed JSON that is not YAML 1.1.
_DECODER = json.JSONDecoder()


_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # RFC 8259's whitespace, and nothing else


def _skip_space(text: str, offset: int) -> int:
    return _JSON_SPACE.match(text, offset).end()  # type: ignore[union-attr]  # * always matches


def _value_end(text: str, offset: int) -> int:
    return _skip_space(text, _DECODER.raw_decode(text, offset)[1])


def _members(text: str, offset: int) -> Iterator[tuple[str, int, int]]:
    """(key, the key's offset, the value's offset) of each member of the object at `offset`."""
    at = _skip_space(text, offset + 1)
    while text.startswith('"', at):
        key, after_key = json.decoder.scanstring(text, at + 1)
        value = _skip_space(text, _skip_space(text, after_key) + 1)  # past the colon
        yield key, at, value
        at = _value_end(text, value)
        if text.startswith(",", at):
            at = _skip_space(text, at + 1)


def _items(text: str, offset: int) -> Iterator[int]:
    """The offset of each item of the array at `offset`."""
    at = _skip_space(text, offset + 1)
    while not text.startswith("]", at):
        yield at
        at = _value_end(text, at)
        if text.startswith(",", at):
            at = _skip_space(text, at + 1)


class JsonIndex:
    """Where the nodes of one JSON text lie, learnt as paths are looked up: each object's or
    array's children are scanned once, on the first path that enters it, and each line number
    is a bisection of the newlines' offsets. Any number of findings then reads the text about
    once (10,000 findings in one array rescanned it 10,000 times: minutes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._children: dict[int, dict[str, int] | list[int]] = {}
        self._newlines: list[int] | None = None

    def _children_of(self, offset: int) -> dict[str, int] | list[int] | None:
        children = self._children.get(offset)
        if children is None:
            if self.text.startswith("{", offset):
                # the last of a repeated key, the value json.loads keeps
                children = {key: value for key, _, value in _members(self.text, offset)}
            elif self.text.startswith("[", offset):
                children = list(_items(self.text, offset))
            else:
                return None
            self._children[offset] = children
        return children

    def offset_of(self, path: LinePath) -> int:
        """The offset of the deepest node on `path` that exists in the text."""
        offset = _skip_space(self.text, 0)
        for part in path:
            children, found = self._children_of(offset), None
            if isinstance(children, dict) and isinstance(part, str):
                found = children.get(part)
            elif isinstance(children, list) and isinstance(part, int) and 0 <= part < len(children):
                found = children[part]
            if found is None:
                break
            offset = found
        return offset

    def line(self, offset: int) -> int:
        if self._newlines is None:
            self._newlines = [match.start() for match in re.finditer("\n", self.text)]
        return bisect.bisect_left(self._newlines, offset) + 1

    def second_key_offset(self, path: LinePath, key: str) -> int:
        """The offset of the second `key` in the object at `path` (the children keep the last)."""
        occurrences = (
            at for name, at, _ in _members(self.text, self.offset_of(path)) if name == key
        )
        next(occurrences)
        return next(occurrences)

    def line_of(self, path: LinePath) -> int | None:
        try:
            return self.line(self.offset_of(path))
        except (ValueError, IndexError, RecursionError):  # not the text the data came from
            return None


# 20,000 allocations and members take about 9 MB of indented JSON; nothing valid is larger.
MAX_REQUEST_BYTES = 16 * 1024 * 1024


def load_request(stream: BinaryIO, file: str) -> Document:
    """An operation request: JSON only (no YAML aliases to expand), read up to a fixed size."""
    raw = stream.read(MAX_REQUEST_BYTES + 1)
    if len(raw) > MAX_REQUEST_BYTES:
        raise DocumentError(
            Finding(
                code="request-too-large",
                path="$",
                file=file,
                message=f"expected at most {MAX_REQUEST_BYTES} bytes of JSON",
            )
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentError(
            Finding(code="json-syntax", path="$", file=file, message="expected UTF-8 JSON")
        ) from None
    return load_json(text, file)


def load_path(path: Path) -> Document:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentError(
            Finding(
                code="not-found",
                path="$",
                file=str(path),
                message=f"cannot read: {exc}",
            )
        ) from None
    loader = load_json if path.suffix == ".json" else load_yaml
    doc = loader(text, str(path))
    doc.folder = path.parent
    return doc
