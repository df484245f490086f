"""Attack: a VM of one group asks Secret Manager for another group's ssh private keys.

Since issue #29 every group's keys derive from the sweep's one secret, which only the
functions' account may read; a VM gets its own group's keys from the `grant` function,
which answers each instance with its own group's only (tests/security/test_gcp_grant.py).
Here the VM goes around the function, straight to Secret Manager, with its own token.

The lab's hub is the VM's metadata server (access tokens of the service account the VM's
instance declares) and a Secret Manager double that serves each declared secret to the
members the declared IAM policy lets read it (tests/fidelity/boot.py `secret_store`). A VM
of group t1 — its own network namespace, its own account — asks with its own token, as its
boot's fetch-keys step does: its group's keys are answered, group t2's are refused, and a
token the metadata server never issued is not accepted. (That the real boot fetches its
keys this way and completes is tests/fidelity/test_boot.py's GCP OSU boot.)
"""

from __future__ import annotations

import base64
import json
import subprocess

import pytest

from tests.fidelity import boot
from tests.fidelity.hub import HUB_IP, METADATA_IP, SECRETS_PORT
from tests.infra.conftest import MOCKS

pytestmark = [pytest.mark.fidelity, pytest.mark.security]

TOKEN_URL = f"http://{METADATA_IP}/computeMetadata/v1/instance/service-accounts/default/token"


def _ask(vm: boot.VM, secret: str, token: str | None = None) -> tuple[str, str]:
    """(HTTP status, body) of the secret's `versions/latest:access`, asked from inside `vm`
    with the metadata server's access token (or `token`)."""
    get_token = (f"curl -fsS -H 'Metadata-Flavor: Google' {TOKEN_URL} | "
                 """sed -n 's/.*"access_token" *: *"\\([^"]*\\)".*/\\1/p'""")
    script = (f't=$({get_token}); ' if token is None else f"t={token}; ") + (
        f'curl -sS -o body -w "%{{http_code}}" -H "Authorization: Bearer $t" '
        f"http://{HUB_IP}:{SECRETS_PORT}/v1/{secret}/versions/latest:access; cat body")
    out = subprocess.run(["ip", "netns", "exec", vm.netns, "sh", "-c", script], cwd=vm.state,
                         capture_output=True, text=True, timeout=30)
    return out.stdout[:3], out.stdout[3:]


def test_gcp_member_is_refused_another_groups_ssh_keys(lab_dir):
    spec = boot.spec_variant("examples/gcp-osu.yaml", lab_dir, trials=2,
                             matrix={"machine_type": ["n2-standard-2"]})
    rendered, _ = boot.render(spec, MOCKS)
    store = boot.secret_store(MOCKS.declared)
    groups = boot.groups(rendered)
    mine, other = sorted(groups)
    member = groups[mine][0]
    assert member.account and member.account == groups[other][0].account  # one per sweep
    (secret,) = store  # the sweep's one secret: every group's key seed
    assert member.account.startswith("sb-gcp-osu-vm@")
    assert not any(member.account in r for r in store[secret]["readers"])
    (lab_dir / "gcp-secrets").mkdir()
    with boot.Lab(lab_dir / "gcp-secrets") as lab:
        lab.serve_secrets(store)
        vm = lab.vm(member.name, member.ctx.me.host, "gcp", member.user_data, member.account)
        answers = {(g, key): _ask(vm, secret) for g in (mine, other) for key in ("login", "host")}
        forged = _ask(vm, secret, token="sim-gcp-access-x")
        calls = lab.secret_calls()
    for key in ("login", "host"):
        assert answers[(other, key)][0] == "403", answers
        assert "PRIVATE KEY" not in answers[(other, key)][1]
        assert "seed" not in answers[(other, key)][1]
    assert forged[0] == "401"
    assert {c["account"] for c in calls if c["status"] != 401} == {member.account}
