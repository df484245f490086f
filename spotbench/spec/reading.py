"""Read a spec file as bounded, strict YAML: hostile input fails fast with one line.

- size: at most `MAX_BYTES` are read (a spec is a page of text);
- text: binary (a NUL byte) and non-UTF-8 files are refused, naming the offset;
- aliases: the document is composed first and its size *with every alias expanded* is
  counted without expanding it; more than `MAX_NODES` nodes (a "billion laughs" file) or
  a recursive alias is refused before anything is built;
- nesting deeper than Python can compose is refused, not a RecursionError;
- a key given twice in one mapping is an error naming both lines (YAML says keys are
  unique; PyYAML would silently keep the last one). `<<` merges may still be overridden.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_BYTES = 1 << 20
MAX_NODES = 20_000


class SpecYamlError(ValueError):
    """The file cannot be read as a spec; the message is one line."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader reports it
                    continue
                if first is not None:
                    raise SpecYamlError(
                        f"duplicate key {_short(key)} at line {line} (first at line {first}): "
                        "give each key once"
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: Node) -> int:
    """Nodes in the document with aliases expanded, computed once per distinct node."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise SpecYamlError(f"recursive alias at line {node.start_mark.line + 1}")
        busy.add(key)
        if isinstance(node, ScalarNode):
            n = 1
        elif isinstance(node, SequenceNode):
            n = 1 + sum(size(child) for child in node.value)
        else:
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        busy.discard(key)
        sizes[key] = n = min(n, MAX_NODES + 1)
        return n

    return size(root)


def read_text(path: Path) -> str:
    """The file's text, or `SpecYamlError` (too big, binary, not UTF-8)."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise SpecYamlError(f"larger than {MAX_BYTES // 1024} KiB: a spec is a page of YAML; "
                            "is this the right file?")
    nul = data.find(b"\0")
    if nul >= 0:
        raise SpecYamlError(f"a binary file (NUL byte at offset {nul}), not a YAML spec")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecYamlError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                            "save the spec as UTF-8") from None


def load(text: str) -> Any:
    """Parse one YAML document with the bounds above (`SpecYamlError`, `yaml.YAMLError`)."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_NODES:
            raise SpecYamlError(f"more than {MAX_NODES} values once its aliases (*name) are "
                                "expanded: a spec that large is not a sweep, refused")
        return loader.construct_document(node)
    except RecursionError:
        raise SpecYamlError("nested too deeply to be a spec") from None
    finally:
        loader.dispose()


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"



def unwrap(value: Any) -> Any:
    """A Pulumi stack config value: `{value: …}` (`pulumi config set --path`) unwrapped."""
    return value["value"] if isinstance(value, dict) and set(value) == {"value"} else value


def with_stack_project(spec: Any, config: dict[str, Any]) -> Any:
    """`spec` (a SweepSpec) with its `<cloud>.project` from the stack's `<cloud>:project`
    when the spec leaves it out (`pulumi config set gcp:project …`, which the Pulumi program
    reads: the project is given once, #39); the spec's own project wins."""
    options = getattr(spec, spec.cloud, None)
    project = unwrap(config.get(f"{spec.cloud}:project"))
    if options is None or "project" not in type(options).model_fields or options.project \
            or not isinstance(project, str) or not project:
        return spec
    return spec.model_copy(update={spec.cloud: options.model_copy(update={"project": project})})
