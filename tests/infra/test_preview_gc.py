"""infra.preview.run_declarations pauses Python's cyclic collector while a program declares
(its full passes over the growing heap made declaring superlinear: bench/infra_scale.py)
and gives it back as it was, also when the program fails."""

from __future__ import annotations

import gc

import pulumi
import pytest

from infra.preview import run_declarations


def test_collector_paused_while_declaring_and_restored(mocks) -> None:
    seen = []

    def program():
        seen.append(gc.isenabled())
        pulumi.CustomResource("test:index:Thing", "t", {"x": 1})

    assert gc.isenabled()
    run_declarations(program)
    assert seen == [False] and gc.isenabled()
    assert [d.name for d in mocks.declared] == ["t"]

    def failing():
        raise pulumi.RunError("bad spec")

    with pytest.raises(pulumi.RunError, match="bad spec"):
        run_declarations(failing)
    assert gc.isenabled()

    gc.disable()  # a caller that had it off keeps it off
    try:
        run_declarations(program)
        assert not gc.isenabled()
    finally:
        gc.enable()
