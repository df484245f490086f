"""The `grant` action: a member instance asks for what its own group may use (issue #29).

Which group the caller is comes from the sweep's own records (`spotbench.auth.instance.
group_of`: the claimed name is a planned member's, the live instance of that name has the
claimed id and the deployer-written group label), never from the request. Then:

- body `{"file": "<id>"}`: one of the group's files — its ssh private keys (`id_ed25519`,
  `ssh_host_ed25519_key`), its secret env (`env`) — as `{"data": <base64>}` (the boot's
  `fetch-keys` reads it with sed);
- otherwise: the group's storage grants in the open run, valid until the group's deadline
  (its last launch + the spec's `deadline`): `{"grant", "records": POST policy form,
  "checkpoints": downscoped token}` (the cloud's `Provider.grants`). After the deadline, or
  before the group was launched, the answer is 403.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from spotbench.auth import Caller, Forbidden
from spotbench.auth.instance import (  # GrantRefused, past_deadline: every cloud's refusal
    Grant, GrantRefused, InstanceClaim, Roster, deadline_of, group_of, past_deadline,
)
from spotbench.control import BadRequest

if TYPE_CHECKING:
    from spotbench.control import Sweep
    from spotbench.spec import SweepSpec


class FunctionConfig(Protocol):
    """What `grant` reads of the function's settings (functions.app.FunctionConfig has it;
    a Protocol here, so this module never imports the adapter that dispatches to it)."""

    @property
    def spec(self) -> SweepSpec: ...
    @property
    def account(self) -> str: ...
    @property
    def grants(self) -> Any: ...
    @property
    def sweep(self) -> Sweep: ...

MAX_FILE_ID = 64


def claim_of(caller: Caller) -> InstanceClaim:
    if caller.kind != "member" or not (caller.instance_id and caller.zone and caller.account):
        raise Forbidden("only an instance of the sweep, with its instance identity token "
                        "(format=full), may ask for its group's grant")
    return InstanceClaim(caller.instance_id, caller.name, caller.zone, caller.account)


def caller_group(config: FunctionConfig, caller: Caller) -> str:
    sweep = config.sweep
    roster = Roster.of_plan(config.spec.name, config.account, sweep.groups)
    return group_of(claim_of(caller), roster, sweep.cloud.lookup)


def current_grant(config: FunctionConfig, group: str, now: datetime | None = None) -> Grant:
    """The group's grant in the open run, until its deadline; `GrantRefused` otherwise."""
    now = now or datetime.now(UTC)
    store, spec = config.sweep.store, config.spec
    run = store.current_run()
    if run is None:
        raise GrantRefused(f"no run of sweep {spec.name} is open: group {group} has no grant")
    launched = store.last_launch(run.run, group)
    if launched is None:
        raise GrantRefused(f"group {group} was not launched in run {run.run}")
    grant = Grant.for_group(group, run.run, deadline_of(launched, spec.deadline),
                            checkpoints=spec.keeps_checkpoints())
    if grant.expired(now):
        raise past_deadline(grant, run.run)
    return grant


def grant(config: FunctionConfig, caller: Caller, body: Any) -> dict[str, Any]:
    group = caller_group(config, caller)
    minter = config.grants
    if isinstance(body, dict) and "file" in body:
        file_id = body["file"]
        if not isinstance(file_id, str) or not 0 < len(file_id) <= MAX_FILE_ID:
            raise BadRequest("file must be the id of one of the group's files")
        data = minter.file(group, file_id)
        if data is None:
            raise Forbidden(f"group {group} has no file {file_id!r}")
        return {"group": group, "file": file_id, "data": base64.b64encode(data).decode()}
    return {"group": group, **minter.storage(current_grant(config, group))}
