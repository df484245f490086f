"""Container image references, checked against the OCI distribution reference grammar.

An image reference ends up in a root systemd unit and in shell lines on every member VM,
so only what the grammar allows gets through (github.com/distribution/reference):

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [ domain "/" ] path-component ( "/" path-component )*
    domain     := host [ ":" port ]        host: DNS labels, IPv4 or [IPv6]
    path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" [A-Za-z0-9=_-]{32,}

None of `$ % ; & | ' " \\ ` ( )`, spaces or newlines can appear in a valid reference, so
a valid one is inert in systemd's ExecStart (which expands `$VAR` and `%` specifiers) and
in a POSIX shell.
"""

from __future__ import annotations

import re

_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}"
REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
                       re.ASCII)
NAME_MAX = 255


class InvalidImage(ValueError):
    pass


def check_image(ref: str) -> str:
    """`ref` unchanged when it is a valid OCI image reference; `InvalidImage` (saying why)
    otherwise."""
    if not isinstance(ref, str) or not ref:
        raise InvalidImage("an image reference is required, e.g. 'ghcr.io/org/osu:1.0'")
    match = REFERENCE.fullmatch(ref)
    if match is None:
        bad = sorted({c for c in ref if not (c.isascii() and (c.isalnum() or c in "._-/:@[]"))})
        hint = f" (characters not allowed: {' '.join(repr(c) for c in bad)})" if bad else ""
        raise InvalidImage(f"{ref!r} is not a valid image reference{hint}; expected "
                           "[registry/]path[:tag][@sha256:digest], path in lower case")
    if len(match["name"]) > NAME_MAX:
        raise InvalidImage(f"image name longer than {NAME_MAX} characters")
    return ref
