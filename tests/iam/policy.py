"""AWS's evaluation of identity-based policies, for the requests a test makes.

What AWS documents ("Policy evaluation logic", "IAM JSON policy elements: Condition
operators") for a principal with identity policies only (no SCPs, boundaries or resource
policies in a spotbench account):

- a request is one or more `Authorization`s: an action on a resource, with its request
  context (condition keys and their values); all must be allowed;
- an explicit `Deny` in any statement wins; otherwise an `Allow` whose Action, Resource and
  Condition all match allows; otherwise the request is implicitly denied;
- Action/Resource match with `*` and `?` wildcards, actions case-insensitively;
- a Condition block is the AND of its operators, each operator the AND of its keys, each key
  the OR of its values; a key missing from the request context makes a condition false,
  except with `...IfExists` (true) and the negated operators (`StringNotEquals`,
  `StringNotLike`, `ArnNotEquals`, `ArnNotLike`: true); condition *keys* are
  case-insensitive, values are compared case-sensitively (`StringEqualsIgnoreCase` aside).

Date operators compare the request's value with the policy's (`aws:CurrentTime` the
request's time, which the harness puts in every request's context).

Only the operators spotbench's policies use are implemented; any other raises, so a new
operator in `infra/` cannot be silently treated as matching.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Doc = Mapping[str, Any]


@dataclass(frozen=True)
class Authorization:
    action: str  # "s3:GetObject"
    resource: str  # an ARN, or "*" for actions without resource-level permissions
    context: Mapping[str, str | Sequence[str]] = field(default_factory=dict)

    def describe(self) -> str:
        ctx = ", ".join(f"{k}={v}" for k, v in sorted(self.context.items()))
        return f"{self.action} on {self.resource}" + (f" [{ctx}]" if ctx else "")


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def wildcard(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM wildcards: `*` any run of characters (`:` and `/` included), `?` one character."""
    return _compiled(pattern, ignore_case).fullmatch(value) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: each of the six colon-separated parts matched on its own."""
    p, v = pattern.split(":", 5), value.split(":", 5)
    return len(p) == len(v) == 6 and all(wildcard(a, b) for a, b in zip(p, v))


def _date(text: str):
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00"))


_OPERATORS = {
    "StringEquals": lambda want, got: want == got,
    "StringEqualsIgnoreCase": lambda want, got: want.lower() == got.lower(),
    "StringLike": lambda want, got: wildcard(want, got),
    "ArnEquals": lambda want, got: want == got,
    "ArnLike": _arn_like,
    "Bool": lambda want, got: want.lower() == got.lower(),
    # the request's value against the policy's: aws:CurrentTime < the grant's deadline
    "DateLessThan": lambda want, got: _date(got) < _date(want),
    "DateGreaterThan": lambda want, got: _date(got) > _date(want),
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike",
            "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}


def _condition_holds(operator: str, key: str, wanted: Any, context: Mapping[str, Any]) -> bool:
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    negated = base in _NEGATED
    compare = _OPERATORS.get(_NEGATED.get(base, base))
    if compare is None or ":" in base:  # ForAnyValue:/ForAllValues: are not used by spotbench
        raise NotImplementedError(f"condition operator {operator!r} is not implemented here")
    present = {k.lower(): v for k, v in context.items()}
    if key.lower() not in present:
        return if_exists or negated
    got = [str(v) for v in as_list(present[key.lower()])]
    hit = any(compare(str(w), g) for w in as_list(wanted) for g in got)
    return not hit if negated else hit


def _matches(statement: Doc, auth: Authorization) -> bool:
    if "Action" in statement:
        if not any(wildcard(a, auth.action, ignore_case=True) for a in as_list(statement["Action"])):
            return False
    elif any(wildcard(a, auth.action, ignore_case=True) for a in as_list(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(wildcard(r, auth.resource) for r in as_list(statement["Resource"])):
            return False
    elif any(wildcard(r, auth.resource) for r in as_list(statement["NotResource"])):
        return False
    for operator, keys in (statement.get("Condition") or {}).items():
        for key, wanted in keys.items():
            if not _condition_holds(operator, key, wanted, auth.context):
                return False
    return True


@dataclass(frozen=True)
class Decision:
    allowed: bool
    by: str | None  # Sid (or index) of the deciding statement; None: implicit deny

    def __bool__(self) -> bool:
        return self.allowed


def allowed(policies: Sequence[Doc], action: str, resource: str,
            context: Mapping[str, str | Sequence[str]] | None = None) -> bool:
    """`evaluate` for one action on one resource."""
    return evaluate(policies, Authorization(action, resource, context or {})).allowed


def evaluate(policies: Sequence[Doc], auth: Authorization) -> Decision:
    """AWS's decision for one authorization under a principal's identity policies."""
    allow: str | None = None
    for doc in policies:
        for i, statement in enumerate(as_list(doc.get("Statement", []))):
            if not _matches(statement, auth):
                continue
            sid = statement.get("Sid") or f"#{i}"
            if statement["Effect"] == "Deny":
                return Decision(False, sid)
            allow = allow or sid
    return Decision(allow is not None, allow)


def moto_projection(doc: Doc, moto_actions: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """What moto itself can enforce of `doc`: the same statements with their conditions
    dropped (moto cannot see tags, prefixes or function-URL keys: the harness checks them),
    resources widened to `*` outside S3 (moto authorizes other services against `*`), and
    each IAM action joined by the names moto uses for the same operations
    (`moto_actions`, e.g. s3:ListBucket → s3:ListObjectsV2, s3:HeadBucket). moto matches a
    resource as a regular expression with only `*` translated: IAM's `?` (one character)
    is handed to it as `.`."""
    out = []
    for statement in as_list(doc.get("Statement", [])):
        actions = as_list(statement.get("Action", []))
        # a wildcard action (`s3:GetBucket*`) grants moto's names of every action it matches
        extra = [m for a in actions for key, names in moto_actions.items()
                 if fnmatch.fnmatchcase(key.lower(), a.lower()) for m in names]
        s3_only = all(a.lower().startswith("s3:") for a in actions)
        resources = [r.replace("?", ".") for r in as_list(statement.get("Resource", "*"))]
        projected = {"Effect": statement["Effect"], "Action": actions + extra,
                     "Resource": resources if s3_only else "*"}
        if "Sid" in statement:
            projected["Sid"] = statement["Sid"]
        out.append(projected)
    return {"Version": doc.get("Version", "2012-10-17"), "Statement": out}



def post_policy_allows(policy: Doc, key: str, bucket: str, size: int = 0) -> bool:
    """S3's check of a POST policy's conditions on `key`, `bucket` and the file's `size`
    (AWS: "Creating a POST policy": `eq`/`starts-with`, the `{"field": value}` form and
    `content-length-range`). A condition of another kind raises."""
    fields = {"key": key, "bucket": bucket}
    for cond in policy["conditions"]:
        if isinstance(cond, dict):
            (name, value), = cond.items()
            if name in fields and fields[name] != value:
                return False
        elif cond[0] in ("starts-with", "eq"):
            name = cond[1].lstrip("$")
            if name in fields and not (fields[name].startswith(cond[2]) if cond[0] == "starts-with"
                                       else fields[name] == cond[2]):
                return False
        elif cond[0] == "content-length-range":
            if not int(cond[1]) <= size <= int(cond[2]):
                return False
        else:
            raise AssertionError(f"POST policy condition {cond!r} is not modelled")
    return True
