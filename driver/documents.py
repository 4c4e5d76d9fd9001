"""Loading YAML/JSON documents while keeping the line of every node, for findings."""

import contextlib
import json
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
    # JSON keeps its text instead of a line map: composing the map costs 75 % of validating a
    # 10,000-worker request, and only a finding needs it.
    source: str | None = field(default=None, repr=False)

    def line_of(self, path: LinePath) -> int | None:
        """The line of the deepest existing node on `path` (a missing key points at its parent)."""
        if self.lines is None:
            self.lines = _json_line_map(self.source or "")[0]
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
        # composed once: the data and the lines come from the same nodes
        loader = YAML_LOADER(text)
        try:
            root = loader.get_single_node()
            data = None if root is None else loader.construct_document(root)
        finally:
            loader.dispose()
        lines, duplicates = _line_map(root)
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
    duplicates_seen: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        duplicates_seen.extend(k for k in set(keys) if keys.count(k) > 1)
        return dict(items)

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
    if duplicates_seen:
        doc.lines, duplicates = _json_line_map(text)
        duplicates = duplicates or [((duplicates_seen[0],), None)]
    return _checked(doc, duplicates)


def _json_line_map(text: str) -> tuple[dict[LinePath, int], list[Duplicate]]:
    # JSON is YAML 1.2 but not always 1.1 (tabs, some escapes): then findings go without lines.
    # libyaml composes a 10,000-worker request in 1.8 s, the pure-Python loader in 7.7 s
    with contextlib.suppress(yaml.YAMLError, RecursionError):
        return _line_map(yaml.compose(text, Loader=YAML_LOADER))
    return {}, []


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
