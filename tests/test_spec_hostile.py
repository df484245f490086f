"""Hostile or broken spec files end in one clear message, fast, never a traceback; user
text is printed literally (never as Rich markup); a Pulumi stack file is followed."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.spec import SpecError, load_spec

ROOT = Path(__file__).resolve().parents[1]
GOOD = "name: s\nworkload: {name: osu}\n"

# The classic "billion laughs": 9 levels of 9 aliases = 10^9 strings once expanded.
LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{b}: &{b} [*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a}]"
       for a, b in zip("abcdefgh", "bcdefghi")]
) + "\nname: s\nworkload: {name: osu}\nmatrix: {max_size: *i}\n"


def cli(args: list[str]):
    return CliRunner().invoke(app, args)


def refused_in_one_line(tmp_path: Path, content: bytes | str, needle: str) -> str:
    f = tmp_path / "spec.yaml"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    res = cli(["plan", str(f)])
    assert res.exit_code == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0] == "invalid spec" and len(lines) == 2, res.stderr
    assert needle in lines[1], lines[1]
    return lines[1]


def test_billion_laughs_fails_fast_and_small(tmp_path):
    f = tmp_path / "laughs.yaml"
    f.write_text(LAUGHS)
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match="once its aliases"):
        load_spec(f)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 0.5, elapsed
    assert peak < 4 * 1024 * 1024, peak
    refused_in_one_line(tmp_path, LAUGHS, "once its aliases (*name) are expanded")


def test_a_few_aliases_are_fine(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nworkload: &w {name: osu, max_size: 1024}\nmatrix: {max_size: [1024, 2048]}\n")
    assert load_spec(f).workload.max_size == 1024


def test_recursive_alias(tmp_path):
    refused_in_one_line(tmp_path, GOOD + "matrix: &m {max_size: [*m]}\n", "recursive alias")


def test_duplicate_keys_are_an_error(tmp_path):
    refused_in_one_line(tmp_path, "name: s\nworkload: {name: osu}\nname: t\n",
                        "duplicate key 'name' at line 3 (first at line 1)")
    refused_in_one_line(tmp_path, "name: s\nworkload: {name: osu, name: tf-mnist}\n",
                        "duplicate key 'name' at line 2")


def test_binary_and_non_utf8_files(tmp_path):
    png = (ROOT / "docs").glob("*.png")  # any binary will do; build one if the repo has none
    data = next(iter(png), None)
    blob = data.read_bytes() if data else b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256))
    refused_in_one_line(tmp_path, blob, "a binary file (NUL byte at offset")
    refused_in_one_line(tmp_path, "name: caf\u00e9\nworkload: {name: osu}\n".encode("latin-1"),
                        "not UTF-8 text (byte 0xe9 at offset 9)")


def test_size_limit(tmp_path):
    big = GOOD + "# " + "x" * (2 << 20) + "\n"
    refused_in_one_line(tmp_path, big, "larger than 1024 KiB")


def test_deep_nesting(tmp_path):
    refused_in_one_line(tmp_path, GOOD + "matrix: " + "[" * 50000 + "]" * 50000 + "\n",
                        "nested too deeply")


@pytest.mark.parametrize("text, needle", [
    ("", "the spec is empty"),
    ("# only a comment\n", "the spec is empty"),
    (GOOD + "matrix:\n", "matrix is empty"),
    (GOOD + "matrix: {workers: []}\n", "matrix"),
    (GOOD + "matrix: {max_size: []}\n", "matrix.max_size is empty"),
])
def test_empty_things_get_a_message(tmp_path, text, needle):
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    res = cli(["plan", str(f)])
    assert res.exit_code == 2 and needle in res.stderr and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("value", ["[/]", "[bold red]boom[/]", "[link=http://x]y[/link]"])
def test_user_text_is_printed_literally_not_as_markup(tmp_path, value):
    f = tmp_path / "spec.yaml"
    f.write_text(f"name: '{value}'\nworkload: {{name: osu}}\n")
    res = cli(["plan", str(f)])
    assert res.exit_code == 2, res.stderr
    assert f"name = '{value}'" in res.stderr


def test_long_values_are_cut_with_their_length(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("name: " + "a" * 5000 + "\nworkload: {name: osu}\n")
    res = cli(["plan", str(f)])
    assert res.exit_code == 2
    line = next(ln for ln in res.stderr.splitlines() if "name =" in ln)
    assert "… (5000 characters)" in line and len(line) < 400, line


def test_bad_file_names_in_errors_are_literal(tmp_path):
    res = cli(["plan", str(tmp_path / "[/]missing.yaml")])
    assert res.exit_code == 2 and "[/]missing.yaml" in res.stderr and "file not found" in res.stderr


# ---- Pulumi stack files -------------------------------------------------------------------
@pytest.mark.parametrize("command", [["plan"], ["estimate"], ["plan", "--json"]])
def test_the_shipped_stack_files_are_followed(command):
    for stack in ("Pulumi.gcp-osu.yaml", "Pulumi.aws-tf-gpu.yaml"):
        res = cli([*command, str(ROOT / stack)])
        assert res.exit_code == 0, res.stderr
        assert stack.removeprefix("Pulumi.").removesuffix(".yaml") in res.stdout


def test_preview_and_status_follow_a_stack_file(tmp_path):
    res = cli(["preview", str(ROOT / "Pulumi.gcp-osu.yaml"), "--json"])
    assert res.exit_code == 0, res.stderr
    assert "gcp:compute/instance:Instance" in res.stdout
    res = cli(["status", str(ROOT / "Pulumi.gcp-osu.yaml"), "--json", "--results", f"file://{tmp_path}/r"])
    assert "workload: required field is missing" not in res.stderr
    assert '"gcp-osu' in res.stdout, res.stdout + res.stderr


def test_stack_file_paths_are_relative_to_the_stack_file_and_inline_specs_work(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.yaml").write_text(GOOD)
    (tmp_path / "Pulumi.dev.yaml").write_text("config:\n  spotbench:spec: specs/s.yaml\n  gcp:project: p\n")
    assert load_spec(tmp_path / "Pulumi.dev.yaml").name == "s"
    (tmp_path / "Pulumi.inline.yaml").write_text(
        "config:\n  spotbench:spec:\n    name: inl\n    workload: {name: osu}\n")
    assert load_spec(tmp_path / "Pulumi.inline.yaml").name == "inl"
    (tmp_path / "Pulumi.none.yaml").write_text("config:\n  gcp:project: p\n")
    with pytest.raises(SpecError, match="without the spec"):
        load_spec(tmp_path / "Pulumi.none.yaml")
    (tmp_path / "Pulumi.loop.yaml").write_text("config:\n  spotbench:spec: Pulumi.loop.yaml\n")
    with pytest.raises(SpecError, match="already followed"):
        load_spec(tmp_path / "Pulumi.loop.yaml")
