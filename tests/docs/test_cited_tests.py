"""The docs that say which test enforces a fact (platform.md) or holds an attack
(security.md, identity.md) name tests that exist: a renamed or deleted test leaves no dead
citation. A citation may abbreviate (`test_name…`: a test whose name starts so) or list
variants (`test_{gcp,aws}_name`: each one)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"(tests/[\w/]+\.py)(?:::((?:\w|\{[\w,]+\})+)(…)?)?")


def _variants(name: str) -> list[str]:
    parts = re.split(r"\{([\w,]+)\}", name)  # literal, choices, literal, …
    options = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(choice) for choice in itertools.product(*options)]


def test_variants_expand_every_brace():
    assert _variants("test_{gcp,aws}_x") == ["test_gcp_x", "test_aws_x"]
    assert _variants("test_x") == ["test_x"]


@pytest.mark.parametrize("doc", ["docs/platform.md", "docs/security.md", "docs/identity.md"])
def test_every_cited_test_exists(doc):
    dead = []
    for path, name, cut in sorted(set(CITED.findall((ROOT / doc).read_text()))):
        source = ROOT / path
        if not source.is_file():
            dead.append(path)
            continue
        text, end = source.read_text(), "" if cut else r"\b"
        for each in _variants(name) if name else []:
            if not re.search(rf"^\s*(?:async )?def {re.escape(each)}{end}", text, re.M):
                dead.append(f"{path}::{each}{cut}")
    assert dead == [], f"{doc} cites tests that do not exist: {dead}"
