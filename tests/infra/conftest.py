"""Pulumi unit-test harness shared by the GCP and AWS program tests.

`set_mocks` runs HERE, at conftest import, before any test module imports the program
(`infra.gcp`, `infra.aws`). The mocks are `infra.preview.RecordingMocks`: generic for
any resource type (outputs = inputs + computed id, name, selfLink, url/uri, arn, email,
address/privateIp/ipAddress, key material; see its docstring for the exact contract).

Fixtures:
- `mocks`: the recorder, emptied, with the Pulumi config cleared.
- `declare(fn, config=None) -> RecordingMocks`: run `fn` (declares resources) as a Pulumi
  program under the mocks with `config` (e.g. {"gcp:project": "p"}); waits for every
  registration; program errors propagate.
- `run_program(config) -> RecordingMocks`: run `infra/__main__.py` itself with `config`.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from infra.preview import PROGRAM, RecordingMocks, install, run_declarations

MOCKS = RecordingMocks()
install(MOCKS, stack="test")


def snapshot(fn: Callable[[], Any], config: dict[str, str]) -> RecordingMocks:
    """Run `fn` (declares resources) under the shared mocks with `config`; a copy of what it
    declared (the shared recorder is emptied by the next call)."""
    install(MOCKS, stack="test")
    MOCKS.reset()
    pulumi.runtime.set_all_config(config)
    try:
        run_declarations(fn)
    finally:
        pulumi.runtime.set_all_config({})
    snap = RecordingMocks()
    snap.declared = list(MOCKS.declared)
    return snap


@pytest.fixture
def mocks() -> RecordingMocks:
    install(MOCKS, stack="test")  # another test (or `spotbench preview`) may have swapped it
    MOCKS.reset()
    pulumi.runtime.set_all_config({})
    yield MOCKS
    pulumi.runtime.set_all_config({})


@pytest.fixture
def declare(mocks: RecordingMocks) -> Callable[..., RecordingMocks]:
    def run(fn: Callable[[], Any], config: dict[str, str] | None = None) -> RecordingMocks:
        pulumi.runtime.set_all_config(dict(config or {}))
        run_declarations(fn)
        return mocks

    return run


@pytest.fixture
def run_program(declare: Callable[..., RecordingMocks]) -> Callable[..., RecordingMocks]:
    def run(config: dict[str, str]) -> RecordingMocks:
        return declare(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"), config)

    return run
