"""A group that runs longer than one grant keeps writing its checkpoints (issue #29).

The function's own credentials are a role session, so the grant it mints is role-chained:
STS gives it at most 1 h (docs/platform.md), while a group's deadline may be later. The
member side (`spotbench.clouds.aws.member_grant.grant_session`) must ask `/grant` again
before the credentials end and sign with the new ones. Here the function's grants last 8
seconds (its STS window shortened) and the account refuses a session past its `Expiration`
(`ExpiredToken`, tests/iam/account.py): the checkpoint written after the first grant ended
is stored only because the member renewed it.
"""

from __future__ import annotations

import os
import time

import pytest

from spotbench.clouds.aws import grants as aws_grants
from spotbench.clouds.aws import member_grant
from spotbench.done_client import group_storage
from spotbench.spec import load_spec
from tests.iam.account import EnforcedAccount, environment
from tests.iam.deployment import Declared, declare, deploy
from tests.iam.test_aws_checkpoints import BUCKET, REGION, RUN, SPEC, chief, granted, member_env
from tests.moto_server import MotoServer

pytestmark = pytest.mark.fidelity

GRANT_S = 8  # long enough for a loaded machine to answer `/grant` well inside it


@pytest.fixture(scope="module")
def declared() -> Declared:
    return declare(load_spec(SPEC))


@pytest.fixture(scope="module")
def deployed(declared):
    with MotoServer() as url, EnforcedAccount(url, REGION) as account:
        yield deploy(account, declared, BUCKET)


@pytest.fixture
def short_grants(monkeypatch):
    """The function's STS window: 8 s instead of 15–60 min (the same code path; botocore's
    client-side check of STS's 900 s minimum is off, moto honours what it is asked)."""
    from botocore.config import Config
    from botocore.session import get_session

    monkeypatch.setattr(aws_grants, "MIN_SESSION_S", GRANT_S)
    monkeypatch.setattr(aws_grants, "MAX_CHAINED_S", GRANT_S)
    monkeypatch.setattr(aws_grants, "_client", lambda service: get_session().create_client(
        service, region_name=REGION, endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        config=Config(parameter_validation=False)))
    calls: list[str] = []
    real = member_grant.fetch_grant

    def counted(done_url, action="grant", **kw):
        calls.append(action)
        return real(done_url, action, **kw)

    monkeypatch.setattr(member_grant, "fetch_grant", counted)
    return calls


def test_aws_checkpoints_are_written_past_the_first_grants_end(deployed, short_grants):
    from workloads.tf_mnist.checkpoints import CheckpointStore

    d = deployed
    name = chief(d)
    ctx = d.contexts[name]
    d.tick("start")
    with environment(member_env(d, name)):
        storage = group_storage(ctx)  # the member's one hook: records + checkpoints
        store = CheckpointStore(ctx.results_url, ctx.group, RUN, **storage.checkpoint_options)
        store.write_progress(10)
        asked = len(short_grants)
        # the harness does refuse credentials past their end: a grant kept as it was
        _, static = granted(d, name)
        stale = CheckpointStore(ctx.results_url, ctx.group, RUN, **static)
        time.sleep(GRANT_S + 1)
        with pytest.raises(Exception, match="ExpiredToken|token has expired"):
            stale.write_progress(11)
        store.write_progress(20)  # after the first grant ended: renewed through /grant
        assert store.progress() == 20
    assert len(short_grants) > asked  # the member asked `/grant` again, by itself
    assert d.account.denial_lines() == []
    assert not d.account.errors, d.account.errors
