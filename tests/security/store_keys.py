"""Adversarial object keys, generated from the results store's own layout (issue #38).

The layout's one home is the docstring of `spotbench.results` (its `Layout under the results
URL` block: `runs/<run>/run.json`, `runs/<run>/ends/<group>.<n>.json`, `control.lock`, …) plus
the checkpoints' prefix (`spotbench.auth.instance.checkpoint_prefix`). `layout()` reads those
templates; `keys()` fills every placeholder with values an attacker picks:

- runs: the open run, a closed and a future one, the open run with `open_run`'s suffix, made-up
  ids of every length from 1 to the longest run id + 12 (every length a `?`-per-character
  wildcard could be fitted to), and runs that are the open run plus one of the layout's own
  folders (`<run>/ends`), so a group's name lands inside control's folders;
- groups: the grant's own, every other group given, and names one character longer or shorter
  than the own (`…-t1` / `…-t10`);
- attempts and names: numbers, non-numbers, nested and `..` names.

A new line in the layout joins the attack by itself. `owned(key)` is the rule every grant must
encode: a key is the group's iff it lies under `runs/<open run>/<group>.` (records, raw output)
or `checkpoints/<group>/`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import spotbench.results

_PLACEHOLDER = re.compile(r"<([a-z]+)>")
FILLER = "0123456789TZabcdef-"


def layout() -> list[str]:
    """The store's key templates (`runs/<run>/ends/<group>.<n>.json`, …) from the layout block
    of `spotbench.results`' docstring, and the checkpoints' (`checkpoints/<group>/<run>/<name>`)."""
    doc = spotbench.results.__doc__ or ""
    block = doc.split("Layout under the results URL", 1)[1].split("\n\n", 2)[1]
    templates = []
    for line in block.splitlines():
        first = line.strip().split(" ", 1)[0]
        if first and "/" in first or first.endswith((".lock", ".json")):
            templates.append(first)
    assert len(templates) >= 8, f"the layout block of spotbench.results changed shape: {templates}"
    return [*templates, "checkpoints/<group>/<run>/<name>"]


def folders(templates: Iterable[str]) -> list[str]:
    """The literal folders of the layout below a run (`starts`, `flags`, `launches`, `ends`)."""
    out = set()
    for template in templates:
        parts = template.split("/")
        if parts[0] == "runs":
            out.update(p for p in parts[2:-1] if "<" not in p)
    return sorted(out)


@dataclass(frozen=True)
class Attack:
    """The grant under attack: its root, open run and group, and the other names in play."""

    root: str  # "ax/" ("" for a bucket's top)
    run: str  # the open run
    group: str
    others: tuple[str, ...]
    closed: str = "20200101T000000Z"
    future: str = "29990101T000000Z"

    def owned(self, key: str) -> bool:
        """Whether `key` (a full object name) is this group's to write."""
        if not key.startswith(self.root):
            return False
        rel = key[len(self.root):]  # object names are flat: `..` is a literal segment
        return rel.startswith((f"runs/{self.run}/{self.group}.", f"checkpoints/{self.group}/"))

    def runs(self, templates: list[str]) -> list[str]:
        longest = len(self.run) + 5
        made_up = [(FILLER * 4)[:n] for n in range(1, longest + 13)]
        inside = [f"{self.run}/{folder}" for folder in folders(templates)]
        inside += [f"{self.run}/{g}.1" for g in (self.group, *self.others)]
        return [self.run, f"{self.run}-1a2b", self.closed, self.future, *made_up, *inside]

    def groups(self) -> list[str]:
        return [self.group, *self.others, self.group + "0", self.group[:-1], f"{self.group}-x"]

    def keys(self) -> Iterator[str]:
        """Every template filled with every adversarial value (deduplicated)."""
        templates = layout()
        values = {"run": self.runs(templates), "group": self.groups(),
                  "attempt": ["1", "2", "999999", "x"], "n": ["1", "7"],
                  "name": ["raw.txt", f"{self.others[0]}.1.jsonl", "../flags/x", "a/b/c"],
                  "reason": ["deadline"], "time": ["20261125T030000Z"], "step": ["00000001", "../x"],
                  "study": ["s-1a2b3c", "x"]}
        seen: set[str] = set()
        for template in templates:
            names = _PLACEHOLDER.findall(template)
            unknown = set(names) - set(values)
            assert not unknown, f"layout placeholder(s) {unknown} in {template}: give them values"
            for combo in itertools.product(*(values[n] for n in names)):
                key = template
                for name, value in zip(names, combo):
                    key = key.replace(f"<{name}>", value, 1)
                key = self.root + key
                if key not in seen:
                    seen.add(key)
                    yield key
