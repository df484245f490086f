"""The functions' shared core: configuration from env, authentication, dispatch.

`functions/main.py` (functions-framework, GCP and local) and `functions/lambda_handler.py`
(AWS) are thin adapters over `handle()`; the control logic itself is `spotbench.control`.

Environment (every value has this one source, set by Pulumi or the local runner):
    SPOTBENCH_CLOUD            local | gcp | aws
    SPOTBENCH_SPEC             the sweep spec as JSON (or a path to a YAML spec)
    SPOTBENCH_RESULTS_URL      results URL (defaults to the spec's)
    SPOTBENCH_STATE_DIR        local: the sweep's state folder (cloud.db, secret)
    SPOTBENCH_GRACE_S          local: SIGTERM → SIGKILL grace period (default 30)
    SPOTBENCH_AUDIENCE         gcp: this function's URL (ID-token audience)
    SPOTBENCH_GCP_FRONT        gcp: `cloud-run` when deployed behind Cloud Run's front end,
                               which verifies tokens and strips their signature (infra sets it)
    SPOTBENCH_SCHEDULER_ACCOUNTS  gcp: comma-separated service accounts allowed start/stop
    SPOTBENCH_MEMBER_ACCOUNTS  gcp: the sweep's member account, comma-separated (done, grant)
    SPOTBENCH_GCP_SIGNER       gcp grant: the function's own account (signs POST policies)
    SPOTBENCH_GCP_SECRET       gcp grant: the sweep's secret (key seed, secret envs)
    SPOTBENCH_GCP_GRANT_ENDPOINT, SPOTBENCH_GCP_GRANT_TOKEN  gcp grant: a local double (tests)
    SPOTBENCH_GCP_CERTS_URL    gcp: Google's ID-token certificates URL override (tests)
    SPOTBENCH_GCP_PROJECT      gcp: project of the sweep's instances
    SPOTBENCH_GCP_API_ENDPOINT gcp: compute API endpoint override (tests)
    AWS_ENDPOINT_URL           aws: EC2 endpoint override (tests)
    SPOTBENCH_PRICES           optional CSV of price rows for budget checks
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from functions.grant import grant
from spotbench import control
from spotbench.auth import Caller, Forbidden, Unauthorized, Unavailable
from spotbench.clouds import Cloud, Provider, get_provider
from spotbench.results import ResultStore
from spotbench.spec import SpecError, SweepSpec, load_spec

log = logging.getLogger("spotbench.functions")

ACTIONS = {"start": control.start, "stop": control.stop, "done": control.done}
GRANT = "grant"  # a member's own group's grants and files (functions/grant.py)


MAX_BODY_BYTES = 64 * 1024  # start/stop/done bodies are a few hundred bytes
MAX_JSON_DEPTH = 32  # they nest two levels; deeper is an attack on the parser


class ConfigError(RuntimeError):
    pass


class BadBody(ValueError):
    """A request body the functions refuse (HTTP 400/413), with a short reason."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.status = status


def _depth(raw: str) -> int:
    """How deeply JSON text nests arrays/objects (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_body(raw: bytes | str | None) -> Any:
    """The JSON body of a request (None when empty), bounded in size and nesting.

    Raises `BadBody` with a reason that never repeats the body."""
    if raw is None or len(raw) == 0:
        return None
    if len(raw) > MAX_BODY_BYTES:
        raise BadBody(f"the request body is larger than {MAX_BODY_BYTES} bytes", 413)
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise BadBody("the request body is not UTF-8 text") from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _depth(text) > MAX_JSON_DEPTH:
        raise BadBody(f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise BadBody("the request body is not valid JSON") from None


@dataclass
class FunctionConfig:
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def need(self, key: str) -> str:
        value = self.env.get(key)
        if not value:
            raise ConfigError(f"environment variable {key} is not set")
        return value

    @cached_property
    def cloud_name(self) -> str:
        return self.env.get("SPOTBENCH_CLOUD") or self.spec.cloud

    @cached_property
    def spec(self) -> SweepSpec:
        raw = self.need("SPOTBENCH_SPEC")
        try:
            if raw.lstrip().startswith("{"):
                return load_spec(json.loads(raw), origin="SPOTBENCH_SPEC")
            return load_spec(Path(raw))
        except SpecError as exc:
            raise ConfigError(f"invalid spec\n{exc}") from None

    @cached_property
    def state_dir(self) -> Path:
        return Path(self.need("SPOTBENCH_STATE_DIR"))

    @cached_property
    def secret(self) -> str:
        return (self.state_dir / "secret").read_text().strip()

    @cached_property
    def provider(self) -> Provider:
        return get_provider(self.cloud_name)

    @cached_property
    def cloud(self) -> Cloud:
        return self.provider.cloud(self.spec, self.env)

    @cached_property
    def account(self) -> str:
        """The project/account the sweep's instances live in (the instance rule's), as the
        provider reads it from the function's settings (`Provider.function_account`; AWS's
        needs the invocation's context: the Lambda adapter asks with it)."""
        return self.provider.function_account(self)

    @cached_property
    def grants(self) -> Any:
        return self.provider.grants(self.spec, self.env)

    @cached_property
    def sweep(self) -> control.Sweep:
        url = self.env.get("SPOTBENCH_RESULTS_URL") or self.spec.results_url()
        store = ResultStore(url, lease_objects=self.provider.lease_objects)  # the control lease's
        return control.Sweep(spec=self.spec, cloud=self.cloud, store=store,
                             prices=self.env.get("SPOTBENCH_PRICES") or None)


def authenticate(headers: Mapping[str, str], config: FunctionConfig) -> Caller:
    """Who is calling, as the sweep's cloud proves it; raises Unauthorized/Forbidden."""
    return config.provider.authenticate(headers, config)


def policy_refusal(config: FunctionConfig) -> dict | None:
    """The deployed guardrails (the spec's `policy:` as deployed, and SPOTBENCH_POLICY):
    a sweep whose spec breaks them starts nothing."""
    from spotbench.policy import PolicyError, load_policy, violations

    try:
        problems = violations(config.spec, load_policy(config.spec, None, {
            k: v for k, v in config.env.items() if k == "SPOTBENCH_POLICY"}))
    except ConfigError:
        return None  # the action itself reports the broken configuration
    except PolicyError as exc:
        return {"error": f"invalid policy: {exc}"}
    if not problems:
        return None
    log.warning("start refused by policy: %s", "; ".join(problems))
    return {"error": f"sweep {config.spec.name} breaks its policy; nothing started",
            "violations": problems}


def handle(action: str, body: Any, caller: Caller, config: FunctionConfig) -> tuple[int, dict]:
    """Run `action` for an authenticated caller; returns (HTTP status, JSON body)."""
    fn = ACTIONS.get(action)
    if action == GRANT:
        fn = lambda sweep, who, data: grant(config, who, data)  # noqa: E731
    if fn is None:
        return 404, {"error": f"unknown action {action!r}; use one of {sorted([*ACTIONS, GRANT])}"}
    if action == "start":
        refused = policy_refusal(config)
        if refused is not None:
            return 403, refused
    try:
        return 200, fn(config.sweep, caller, body)
    except control.BadRequest as exc:
        return 400, {"error": str(exc)}
    except control.Busy as exc:  # another call holds the control lock: retryable
        log.warning("%s: %s", action, exc)
        return 503, {"error": f"{action}: {exc}", "retry_after_s": exc.retry_after_s}
    except (control.StoreError, Unavailable) as exc:  # store or an API down: the caller retries
        log.error("%s: %s", action, exc)
        return 503, {"error": f"{action}: {exc}"}
    except Unauthorized as exc:
        return 401, {"error": str(exc)}
    except Forbidden as exc:
        log.warning("%s refused for %s %s: %s", action, caller.kind, caller.name, exc)
        return 403, {"error": str(exc)}
    except Exception:  # noqa: BLE001 - the caller gets JSON, the log gets the trace
        log.exception("%s failed for %s %s", action, caller.kind, caller.name)
        return 500, {"error": f"internal error in {action}; see the function's log"}
