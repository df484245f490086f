"""The `#cloud-config` text of a boot document (GCP cloud-init and AWS user-data alike), fast.

`render(doc, literal=...)` returns exactly what `reference(doc, literal=...)` returns —
`"#cloud-config\\n" + yaml.dump(doc, sort_keys=False, width=10_000)` with PyYAML's safe
dumper, multi-line strings as `|` blocks when `literal` (GCP) — but a sweep renders one
document per member, and most of a document is the same for every member of a sweep (the
fetch-keys and registry-login scripts, the ssh public files; often the unit). So:

- each top-level key is emitted on its own, and a list (`write_files`, `runcmd`) item by
  item: a block document is the concatenation of those parts (a top-level mapping's
  sequence is indentless, so an item emitted alone as a one-item list is the same text);
- every part is cached by its content (`_part`), so an entry shared by members is emitted
  once per process;
- a part that ends open (a `|+` block keeping trailing newlines: alone, PyYAML closes its
  document with `...`) or a document PyYAML would write with anchors, or of other than
  plain dicts, lists and scalars, is written by `reference` whole;
- a part whose strings are all printable ASCII (and newlines) goes through libyaml's
  emitter (`CSafeDumper`, same representers) when PyYAML has it, else through PyYAML's;
  for that alphabet the two emit the same text (tests/infra/test_cloud_config.py compares
  them on every example's documents and on generated strings); other text (unicode,
  tabs, control characters) takes PyYAML's own emitter, the reference itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import yaml

HEADER = "#cloud-config\n"
WIDTH = 10_000
_ASCII = re.compile(r"[\n\x20-\x7e]*")


def _literal_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    """Multi-line strings as `|` blocks, so the user-data reads like the files it writes."""
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class LiteralDumper(yaml.SafeDumper):
    """PyYAML's safe dumper with multi-line strings as `|` blocks (the GCP documents)."""


LiteralDumper.add_representer(str, _literal_str)

_C_SAFE = getattr(yaml, "CSafeDumper", None)  # None when PyYAML was built without libyaml


if _C_SAFE is not None:
    class _CLiteralDumper(_C_SAFE):  # type: ignore[misc, valid-type]
        """libyaml's emitter with `LiteralDumper`'s representers."""

    _CLiteralDumper.add_representer(str, _literal_str)


def _dumpers(literal: bool) -> tuple[type, type | None]:
    """(PyYAML's dumper, libyaml's or None) for one style."""
    if literal:
        return LiteralDumper, (_CLiteralDumper if _C_SAFE is not None else None)
    return yaml.SafeDumper, _C_SAFE


def reference(doc: Mapping[str, Any], *, literal: bool) -> str:
    """The document as PyYAML's pure-Python safe dumper writes it (the definition)."""
    return HEADER + yaml.dump(dict(doc), Dumper=_dumpers(literal)[0], sort_keys=False,
                              width=WIDTH)


def _ascii(value: Any) -> bool:
    """Whether every string (keys included) in `value` is printable ASCII or newlines."""
    if isinstance(value, str):
        return _ASCII.fullmatch(value) is not None
    if isinstance(value, Mapping):
        return all(_ascii(k) and _ascii(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_ascii(v) for v in value)
    return True  # bool, int, None


_SCALARS = (str, bool, int, float, type(None))


def _freeze(value: Any) -> Any:
    """A hashable, order-preserving and type-preserving image of a document part (plain
    dicts, lists and scalars; anything else raises TypeError: `render` then defers to
    `reference`)."""
    if type(value) is dict:
        return ("m", tuple((_freeze(k), _freeze(v)) for k, v in value.items()))
    if type(value) is list:
        return ("l", tuple(_freeze(v) for v in value))
    if type(value) is float:  # by its text too: -0.0 == 0.0 would share a cache entry
        return ("float", repr(value), value)
    if type(value) in _SCALARS:
        return (type(value).__name__, value)
    raise TypeError(f"not a plain document value: {type(value).__name__}")


def _thaw(frozen: Any) -> Any:
    kind, value = frozen[0], frozen[-1]
    if kind == "m":
        return {_thaw(k): _thaw(v) for k, v in value}
    if kind == "l":
        return [_thaw(v) for v in value]
    return value


@functools.lru_cache(maxsize=8192)
def _part(frozen: Any, literal: bool) -> str:
    """One part (a one-key mapping or a one-item list) emitted, cached by content."""
    value = _thaw(frozen)
    slow, fast = _dumpers(literal)
    dumper = fast if fast is not None and _ascii(value) else slow
    return yaml.dump(value, Dumper=dumper, sort_keys=False, width=WIDTH)


def _shared(value: Any, seen: set[int]) -> bool:
    """Whether a mapping or list occurs twice (PyYAML would write an anchor and an alias)."""
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in seen:
            return True
        seen.add(id(value))
        items = value.values() if isinstance(value, Mapping) else value
        return any(_shared(v, seen) for v in items)
    return False


def render(doc: Mapping[str, Any], *, literal: bool) -> str:
    """`reference(doc, literal=literal)`, part by part (see the module docstring)."""
    if _shared(doc, set()):
        return reference(doc, literal=literal)
    out = [HEADER]
    try:
        for key, value in doc.items():
            if type(value) is list and value:  # `key:` + the first item, then an item a part
                out.append(_part(_freeze({key: value[:1]}), literal))
                out.extend(_part(_freeze([item]), literal) for item in value[1:])
            else:
                out.append(_part(_freeze({key: value}), literal))
    except TypeError:  # not plain data (a tuple, a subclass, …): PyYAML's own way
        return reference(doc, literal=literal)
    if any(part.endswith("...\n") for part in out[1:-1]):
        # a part ending open (a `|+` block): alone it ends with the document-end marker,
        # which the whole document writes only at its very end
        return reference(doc, literal=literal)
    return "".join(out)
