"""A tiny document model rendered twice: Markdown and one self-contained HTML page.

Sections are built once from the data (headings, paragraphs, tables, images) so the two
outputs never disagree. Tables are pandas DataFrames already formatted as strings. Public:
workload report sections (`workloads/*/report.py`) build their blocks with it too.
All text in a Document is plain text (much of it from records): each renderer escapes it
for its format (`html.escape`; `escape.md_text` for Markdown), so no value adds markup.
"""

from __future__ import annotations

import base64
import html
from urllib.parse import quote
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from spotbench.report.escape import md_cell, md_text


@dataclass
class Heading:
    text: str
    level: int = 2
    anchor: str = ""  # the HTML element's id (letters, digits, '-'): a link target


@dataclass
class Para:
    text: str
    anchor: str = ""
    strong: bool = False  # a finding the reader must not miss (a regression): bold


@dataclass
class TableBlock:
    frame: pd.DataFrame  # display strings; the index is shown as the first column(s)
    caption: str = ""
    anchor: str = ""


@dataclass
class Image:
    path: Path
    caption: str = ""


Block = Heading | Para | TableBlock | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

    def insert(self, at: int, *blocks: Block) -> None:
        """Put `blocks` before block number `at` (a summary built after the sections)."""
        self.blocks[at:at] = blocks


def _id(anchor: str) -> str:
    safe = "".join(c for c in anchor if c.isalnum() or c == "-")
    return f' id="{safe}"' if safe else ""


def _flat(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and rows with the index turned into leading columns."""
    shown = frame.reset_index() if _named_index(frame) else frame
    header = [_label(c) for c in shown.columns]
    rows = [["" if _missing(v) else str(v) for v in row] for row in shown.itertuples(index=False)]
    return header, rows


def _named_index(frame: pd.DataFrame) -> bool:
    return any(name is not None for name in frame.index.names)


def _label(col: object) -> str:
    if isinstance(col, tuple):
        return " ".join(str(c) for c in col if str(c))
    return str(col)


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def to_markdown(doc: Document, out_dir: Path) -> str:
    lines = [f"# {md_text(doc.title)}", ""]
    for block in doc.blocks:
        if isinstance(block, Heading):
            lines += ["#" * block.level + " " + md_text(block.text), ""]
        elif isinstance(block, Para):
            lines += [f"**{md_text(block.text)}**" if block.strong else md_text(block.text), ""]
        elif isinstance(block, TableBlock):
            header, rows = _flat(block.frame)
            if block.caption:
                lines += [f"*{md_text(block.caption)}*", ""]
            lines.append("| " + " | ".join(md_cell(h) for h in header) + " |")
            lines.append("|" + "|".join("---" for _ in header) + "|")
            lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif isinstance(block, Image):
            rel = block.path.relative_to(out_dir) if block.path.is_relative_to(out_dir) else block.path
            target = "/".join(quote(part) for part in rel.parts)
            lines += [f"![{md_text(block.caption)}]({target})", ""]
            if block.caption:
                lines += [f"*{md_text(block.caption)}*", ""]
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
caption{caption-side:top;text-align:left;font-style:italic;padding:.3em 0}
figure{margin:1em 0} img{max-width:100%} figcaption{font-style:italic;color:#555}
"""


def to_html(doc: Document) -> str:
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(doc.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(doc.title)}</h1>",
    ]
    for block in doc.blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}{_id(block.anchor)}>{html.escape(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            text = html.escape(block.text)
            out.append(f"<p{_id(block.anchor)}>" + (f"<strong>{text}</strong>" if block.strong else text)
                       + "</p>")
        elif isinstance(block, TableBlock):
            header, rows = _flat(block.frame)
            out.append(f"<table{_id(block.anchor)}>")
            if block.caption:
                out.append(f"<caption>{html.escape(block.caption)}</caption>")
            out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
            for row in rows:
                out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
            out.append("</table>")
        elif isinstance(block, Image):
            data = base64.b64encode(block.path.read_bytes()).decode("ascii")
            out.append(
                f'<figure><img alt="{html.escape(block.caption)}" '
                f'src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out)
