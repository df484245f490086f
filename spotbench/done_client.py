"""The VM side of self-stop: call the sweep's `done` function for this member's group (and
ask it how the group writes its objects, `group_storage`).

Auth per cloud (the provider's `post_done`): `local` sends the member's bearer token; `gcp`
fetches the VM's identity token from the metadata server (audience = the done URL,
`format=full` so the function can read the instance name and zone from its claims); `aws`
signs the request with the instance role (SigV4, see `spotbench.clouds.aws.identity`). Connection errors and 5xx answers are retried with
backoff; 4xx answers are final and raised with the function's JSON error.
"""

from __future__ import annotations

from datetime import datetime

import requests

from spotbench.clouds import get_provider
from spotbench.clouds.provider import GroupStorage
from spotbench.member import MemberContext
from spotbench.retries import http_retry

class DoneError(RuntimeError):
    pass


def _send(ctx: MemberContext, body: dict, timeout: float) -> requests.Response:
    assert ctx.done_url
    return get_provider(ctx.cloud).post_done(ctx, body, timeout)


# ~16 s in all: rides out a function's cold start or the local server's restart
@http_retry(attempts=8, max_wait_s=5)
def call_done(ctx: MemberContext, *, started_at: datetime | None = None, timeout: float = 30) -> dict:
    """Ask the sweep to stop this member's group. Returns the function's JSON answer.

    `started_at` (when this attempt of the member began) lets the control plane ignore the
    call if it arrives after the group was launched again (an earlier attempt's `done`,
    delivered late or retried past a busy lock)."""
    if not ctx.done_url:
        raise DoneError("this member has no done URL; the group will stop at its deadline")
    body = {"group": ctx.group}
    if started_at is not None:
        body["started_at"] = started_at.isoformat()
    resp = _send(ctx, body, timeout)
    if resp.status_code >= 500:
        resp.raise_for_status()
    if resp.status_code >= 400:
        raise DoneError(f"done refused ({resp.status_code}): {resp.text.strip()}")
    return resp.json()


def group_storage(ctx: MemberContext) -> GroupStorage:
    """How this member writes its group's records and checkpoints, the same way on every
    cloud (`Provider.group_storage`): on GCP and AWS with what the sweep's `grant` mints for
    its group (asked once; renewed before it ends), elsewhere its own identity."""
    return get_provider(ctx.cloud).group_storage(ctx)
