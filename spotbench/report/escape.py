"""Values from records are data: each output format gets them escaped for that format.

Every string in a report may come from a results file a VM (or a user's container) wrote,
so it is hostile input. The helpers here are the only way such text reaches an output:

- `md_text` / `md_cell`: Markdown, where the same text renders as the HTML page shows it
  (no raw HTML, no headings, lists, links or emphasis opened by a value, one line);
- `csv_safe`: CSV cells that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab,
  CR first: the OWASP CSV-injection rule) get a leading `'`;
- `file_stem`: a file name from any text: a bounded slug plus a digest of the whole text,
  so two names never collide and no name is too long or leaves its folder;
- `out_folder_name`: an output folder's name from user input (one path segment).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

# ---- Markdown ---------------------------------------------------------------------------
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
# inline punctuation that Markdown acts on wherever it appears
_INLINE = re.compile(r"([\\`\[\]~|])")  # `![` is an image only with the `[` unescaped
# `*` or `_` that could open emphasis: followed by a non-space (a `*` closing a number,
# `100.00*`, cannot open one and stays as it is); `_` only at a word's start (intraword `_`
# never opens emphasis in CommonMark, so `events_per_s` stays readable)
_EMPHASIS = re.compile(r"\*(?=\S)|(?<![0-9A-Za-z])_(?=\S)")
# what makes a line a block (heading, quote, list, setext underline, code fence/indent)
_BLOCK_START = re.compile(r"^()([#>]|[-+*=_](?=[\s\-*_=]|$)|\d{1,9}[.)](?=\s|$))")


def md_text(value: object) -> str:
    """`value` as Markdown that renders exactly as the text (one line, no raw HTML, and
    nothing at its start that makes the line a heading, quote, list or rule)."""
    text = md_cell(value).lstrip()
    return _BLOCK_START.sub(lambda m: _escape_marker(m.group(2)), text)


def _escape_marker(marker: str) -> str:
    if marker[-1] in ".)":  # `1.` / `1)`: an ordered list
        return marker[:-1] + "\\" + marker[-1]
    return "\\" + marker if not marker.startswith("\\") else marker


def md_cell(value: object) -> str:
    """Inline Markdown for `value` (a table cell: after `| `, no line starts there): one
    line, HTML's `& < >` as entities, `|` escaped (a value never adds a column), no link,
    image, code span or emphasis opened."""
    text = _LINE_BREAKS.sub(" ", str(value))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _INLINE.sub(r"\\\1", text)
    return _EMPHASIS.sub(lambda m: "\\" + m.group(0), text)


# ---- CSV --------------------------------------------------------------------------------
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """One cell: a string a spreadsheet would evaluate gets a leading `'` (numbers stay)."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell and column name neutralised (`csv_cell`); numeric
    columns are left as they are (a negative number is not a formula)."""
    out = frame.copy()
    for col in out.columns:
        dtype = out[col].dtype
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_datetime64_any_dtype(dtype)):
            out[col] = out[col].map(lambda v: csv_cell(v if isinstance(v, str) or v is None
                                                       or _scalar_missing(v) else str(v)),
                                    na_action="ignore").astype(object)
    out.columns = [csv_cell(str(c)) if isinstance(c, str) else c for c in out.columns]
    return out


def write_csv(frame: pd.DataFrame, path) -> None:
    """`csv_safe(frame)` as RFC 4180 CSV: CRLF line ends, so a CR or LF inside a value is
    quoted (with `\n` line ends a bare CR went out unquoted and started a new row)."""
    write_file(path, csv_safe(frame).to_csv(index=False, lineterminator="\r\n"))


def write_file(path, data: str | bytes) -> None:
    """Write a report file without following what is at its name: the bytes go to a new
    file beside it, renamed over the name, so a symlink planted there (`report.md` →
    `~/.bashrc` in a shared folder) is replaced, never written through; a name another
    user owns in a sticky folder is an error naming it (issue 38)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:40]}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_figure(fig, path, **kwargs: Any) -> None:  # noqa: ANN001 - a matplotlib Figure
    """`fig.savefig` through `write_file` (PNG)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", **kwargs)
    write_file(path, buf.getvalue())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _scalar_missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


# ---- file names -------------------------------------------------------------------------
STEM_MAX = 60  # characters of slug; the whole name stays far below NAME_MAX (255 bytes)
_SAFE_STEM = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_-]{{0,{STEM_MAX - 1}}}$")


def file_stem(*parts: object) -> str:
    """A file name stem for `parts` (e.g. a metric name from a record): the text itself
    when it is short and `[A-Za-z0-9_-]` only (`osu_latency`), else at most `STEM_MAX`
    characters of slug and 8 hex digits of the whole text's digest."""
    text = "_".join(str(p) for p in parts if str(p))
    if _SAFE_STEM.match(text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")[:STEM_MAX].strip("_-")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else digest


_FOLDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def out_folder_name(name: str) -> str:
    """`name` if it is one safe path segment (letters, digits, `.`, `_`, `-`; no `..`),
    else a `file_stem` of it."""
    if _FOLDER.match(name) and ".." not in name:
        return name
    return file_stem(name)
