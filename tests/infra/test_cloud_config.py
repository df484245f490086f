"""infra/cloud_config.py: the fast boot-document path writes exactly what PyYAML's
pure-Python safe dumper writes (`reference`), on the examples' real documents and on
generated ones full of the characters YAML quotes, folds or escapes."""

from __future__ import annotations

import random

import pytest
import yaml

from infra import cloud_config
from infra.aws.user_data import user_data as aws_user_data
from infra.gcp.cloud_init import user_data as gcp_user_data
from infra.keys import SshKeys

ALPHABET = (
    "abcXYZ019 \n\n  -:#'\"|>&*!%@`{}[],?\\/=+~^$;()<>."  # YAML indicators and quotes
    "\t\r\x00\x07\x1b"  # control characters
    "é€中😀\u2028\u0085\ufeff"  # unicode, line separators, BOM
)


def _text(rng: random.Random, ascii_only: bool) -> str:
    alphabet = ALPHABET[:48] if ascii_only else ALPHABET
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))


def _doc(rng: random.Random, ascii_only: bool) -> dict:
    files = [{"path": "/p/" + _text(rng, ascii_only), "permissions": "0600",
              "content": _text(rng, ascii_only)} for _ in range(rng.randint(1, 4))]
    return {"write_files": files, "runcmd": [_text(rng, ascii_only) for _ in range(3)],
            "power_state": {"mode": "poweroff", "condition": True, "timeout": 120,
                            "message": _text(rng, ascii_only)}}


EDGE = ["", " ", "x ", " x", "a\n", "\n", "a\n\n", " a\nb", "a\n ", "a: b", "- x", "#c",
        "'q'", '"d"', "yes", "null", "0600", "1e3", "a\tb", "é", "a\r\nb", "x" * 300]


@pytest.mark.parametrize("literal", [True, False])
def test_render_is_the_reference_on_generated_documents(literal: bool) -> None:
    rng = random.Random(29)
    docs = [_doc(rng, ascii_only=i % 2 == 0) for i in range(300)]
    docs += [{"write_files": [{"path": "/e", "content": e}, {"path": "/e2", "content": e}],
              "runcmd": [e], "power_state": {"message": e}} for e in EDGE]
    docs += [{"runcmd": []}, {"a": None, "b": [1, 2.5, -0.0, True]}, {"b": [0.0, -0.0]}]
    for doc in docs:
        assert cloud_config.render(doc, literal=literal) == cloud_config.reference(
            doc, literal=literal), doc
        assert cloud_config.render(doc, literal=literal) == cloud_config.reference(
            doc, literal=literal), doc  # and again, from the cache


def test_render_keeps_pyyaml_anchors_and_other_types() -> None:
    shared = {"path": "/x", "content": "a\n"}
    for doc in ({"write_files": [shared, shared]}, {"t": (1, 2)}, {"t": [(1, 2), (1, 2)]}):
        for literal in (True, False):
            assert cloud_config.render(doc, literal=literal) == cloud_config.reference(
                doc, literal=literal)


KEYS = SshKeys("", "ssh-ed25519 AAAA login", "", "ssh-ed25519 AAAA host", "ssh-ed25519 AAAA op")


def test_the_boot_documents_are_the_reference() -> None:
    """The documents both clouds really write (MPI keys, GPUs, fetched secrets, peers) parse
    back to a document that `reference` writes to the same text."""
    gcp = [gcp_user_data(image="ghcr.io/o/runner:1", env={"SPOTBENCH_CONTEXT": '{"a": 1}',
                                                         "K": "v é"},
                         gpu_count=g, ssh=KEYS if g else None, peers=["10.0.0.3", "10.0.0.4"],
                         operator_ports=["22", "2222"], secrets={"id_ed25519": "f1"} if g else None,
                         grant_url="https://grant.example") for g in (0, 1, 2)]
    aws = [aws_user_data(image="123456789012.dkr.ecr.us-east-1.amazonaws.com/r/i:1",
                         env={"A": "b", "C": "d: e # f"}, gpu=gpu, ssh=KEYS,
                         keys_url=("us-east-1", "https://fn.example/keys"), max_run_s=2100)
           for gpu in (False, True)]
    for text, literal in [*((t, True) for t in gcp), *((t, False) for t in aws)]:
        assert text.startswith("#cloud-config\n")
        assert text == cloud_config.reference(yaml.safe_load(text), literal=literal)
