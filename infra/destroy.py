"""`pulumi destroy` of a sweep's stack through Pulumi's Automation API (`spotbench teardown`
runs it before its orphan sweep; spotbench/cli/ops.py hands it to `spotbench.ops.teardown`).

From a checkout the Automation API uses its `Pulumi.yaml` and stack files; from an installed
spotbench the program is handed over inline: the installed `infra/__main__.py`.
"""

from __future__ import annotations

import runpy
import shutil
from collections.abc import Callable
from pathlib import Path

from spotbench import PROJECT_ROOT

Echo = Callable[[str], None]


def pulumi_command(stack: str, work_dir: Path = PROJECT_ROOT) -> str:
    return f"pulumi destroy --stack {stack} --cwd {work_dir} --yes"


def pulumi_destroy(stack: str, *, yes: bool, echo: Echo, work_dir: Path = PROJECT_ROOT) -> str:
    """Destroy (or, dry run, preview destroying) the stack through the Automation API.

    Without the Pulumi CLI, says so and gives the command to run; returns a one-line note.
    """
    if shutil.which("pulumi") is None:
        return (
            "the Pulumi CLI is not installed, so the stack was not destroyed; install it "
            "(https://www.pulumi.com/docs/install/) and run: " + pulumi_command(stack, work_dir)
        )
    from pulumi import automation as auto

    try:
        if (work_dir / "Pulumi.yaml").exists():  # a checkout: its project and stack config files
            stack_obj = auto.select_stack(stack_name=stack, work_dir=str(work_dir))
        else:  # an installed spotbench: the program ships as the `infra` package
            stack_obj = auto.select_stack(stack_name=stack, project_name="spotbench",
                                          program=installed_program)
        if not yes:
            result = stack_obj.preview_destroy(on_output=echo)
            return f"pulumi: destroying stack {stack} would change {result.change_summary}"
        stack_obj.destroy(on_output=echo)
        return f"pulumi: stack {stack} destroyed"
    except Exception as exc:  # noqa: BLE001 - the orphan sweep still runs after this
        return f"pulumi destroy of stack {stack} failed ({exc}); run: " + pulumi_command(stack, work_dir)


def installed_program() -> None:
    """The Pulumi program as an inline function: the `infra/__main__.py` beside this file."""
    runpy.run_path(str(PROJECT_ROOT / "infra" / "__main__.py"), run_name="__main__")
