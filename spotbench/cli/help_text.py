"""Help that reads at any width (#39): the commands' docstrings are written wrapped at ~90
columns, and typer keeps their single line breaks, so at 80 columns each source line wraps
again and leaves a word alone on a line. `flow_help(app)` joins the lines of each prose
paragraph once, before typer builds the commands; Rich then wraps them to the terminal.
Paragraphs that are lists (`- `, `• `, `* `), indented, or start with `\\b` keep their lines.
"""

from __future__ import annotations

import inspect

import typer


def flow(doc: str | None) -> str | None:
    """`doc` with the single line breaks inside its prose paragraphs removed."""
    if not doc:
        return doc
    out = []
    for para in inspect.cleandoc(doc).split("\n\n"):
        lines = para.splitlines()
        keep = para.startswith("\b") or any(
            ln.startswith((" ", "\t", "- ", "• ", "* ")) for ln in lines)
        out.append(para if keep else " ".join(ln.strip() for ln in lines))
    return "\n\n".join(out)


def flow_help(app: typer.Typer) -> None:
    """Every command's and group's help in `app` (and its sub-apps) flowed (`flow`)."""
    for info in app.registered_commands:
        if info.help:
            info.help = flow(info.help)
        elif info.callback is not None:
            info.callback.__doc__ = flow(info.callback.__doc__)
    for group in app.registered_groups:
        if group.help:
            group.help = flow(group.help)
        if group.typer_instance is not None:
            flow_help(group.typer_instance)
    callback = app.registered_callback
    if callback is not None and callback.callback is not None:
        callback.callback.__doc__ = flow(callback.callback.__doc__)
    if isinstance(app.info.help, str):
        app.info.help = flow(app.info.help)
