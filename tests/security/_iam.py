"""IAM policy evaluation for the condition keys moto does not enforce (tests only).

`allowed(docs, action, resource, context)` follows AWS's order for one principal's
identity policies: an explicit Deny wins, else any matching Allow, else implicit deny.
A statement matches when an Action and a Resource pattern match (`*`/`?` wildcards,
NotAction/NotResource honoured) and every Condition holds. Operators this project uses are
implemented; any other raises, so a policy using one cannot pass unnoticed. A key missing
from the request context fails a positive operator and satisfies a negated one, as in AWS;
`...IfExists` holds when the key is missing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _glob(pattern: str, value: str, case: bool = True) -> bool:
    if not case:
        pattern, value = pattern.lower(), value.lower()
    return fnmatch.fnmatchcase(value, pattern)


def _test(op: str, key: str, wanted: Any, context: Mapping[str, Any]) -> bool:
    if_exists = op.endswith("IfExists")
    base = op.removesuffix("IfExists")
    negated = "Not" in base
    if key not in context:
        return if_exists or negated
    values = [str(v) for v in _list(context[key])]
    wanted = [str(w) for w in _list(wanted)]
    if base in ("StringEquals", "StringNotEquals", "ArnEquals", "ArnNotEquals"):
        hit = any(v == w for v in values for w in wanted)
    elif base in ("StringLike", "StringNotLike", "ArnLike", "ArnNotLike"):
        hit = any(_glob(w, v) for v in values for w in wanted)
    elif base == "Bool":
        hit = any(v.lower() == w.lower() for v in values for w in wanted)
    else:
        raise NotImplementedError(f"condition operator {op} is not evaluated by tests/security/_iam.py")
    return not hit if negated else hit


def _matches(stmt: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]) -> bool:
    if "Action" in stmt:
        ok = any(_glob(a, action, case=False) for a in _list(stmt["Action"]))
    else:
        ok = not any(_glob(a, action, case=False) for a in _list(stmt["NotAction"]))
    if not ok:
        return False
    if "Resource" in stmt:
        ok = any(_glob(r, resource) for r in _list(stmt["Resource"]))
    else:
        ok = not any(_glob(r, resource) for r in _list(stmt["NotResource"]))
    if not ok:
        return False
    return all(_test(op, key, wanted, context)
               for op, conds in (stmt.get("Condition") or {}).items()
               for key, wanted in conds.items())


def allowed(docs: Iterable[Mapping[str, Any]], action: str, resource: str,
            context: Mapping[str, Any] | None = None) -> bool:
    context = context or {}
    stmts = [s for d in docs for s in _list(d["Statement"])]
    if any(s["Effect"] == "Deny" and _matches(s, action, resource, context) for s in stmts):
        return False
    return any(s["Effect"] == "Allow" and _matches(s, action, resource, context) for s in stmts)
