"""The boot lab's AWS function URL double (tests/fidelity/aws_function.py) refuses what the
real one refuses: `/keys` answers the calling instance's own group's entries only; an
unsigned call, a call whose signature does not verify, an instance of another role and an
instance that is no member of the plan get nothing. The boots (test_boot.py) show a member
gets its own keys through it; these show the double is no open door."""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import pytest

from spotbench.auth.group_keys import public_openssh
from spotbench.clouds.aws.grants import seed_parameter_name
from tests.fidelity import aws_function, aws_ssm, boot
from tests.fidelity.hub import CREDS, HUB_IP
from tests.infra.conftest import MOCKS

pytestmark = pytest.mark.fidelity
URL = f"http://{HUB_IP}:8080/done/keys"


@functools.cache
def _declared() -> tuple[list, dict]:
    rendered, _ = boot.render("examples/aws-osu.yaml", MOCKS)
    return rendered, aws_ssm.parameter_store(MOCKS.declared, "us-east-1")


def _public(b64: str) -> str:
    """The public key (OpenSSH) of a private key the function answered (base64 of OpenSSH
    PEM: its check integers are random, so compare keys, not texts)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(base64.b64decode(b64), None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def _hub(tmp_path: Path, rendered, store: dict, role: str | None = None) -> Path:
    """A hub folder as `boot.Lab` writes it: the function's knowledge, each VM's address →
    its Name and role."""
    (tmp_path / "function.json").write_text(json.dumps(store["function"]))
    (tmp_path / "names.json").write_text(json.dumps({r.ctx.me.host: r.name for r in rendered}))
    (tmp_path / "accounts.json").write_text(json.dumps(
        {r.ctx.me.host: role or r.account for r in rendered}))
    return tmp_path


def _signed(url: str = URL, body: bytes = b"{}", secret: str = CREDS["SecretAccessKey"],
            region: str = "us-east-1") -> dict[str, str]:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="POST", url=url, data=body,
                         headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(CREDS["AccessKeyId"], secret, CREDS["Token"]), "lambda",
              region).add_auth(request)
    return {**dict(request.headers.items()), "Host": url.split("/")[2]}  # as it arrives


def test_keys_answers_the_calling_instances_own_group_only(tmp_path):
    rendered, store = _declared()
    hub = _hub(tmp_path, rendered, store)
    groups = boot.groups(rendered)
    assert len(groups) >= 2
    for group, members in groups.items():
        for r in members:
            status, out = aws_function.answer(hub, "/done/keys", URL, _signed(), b"{}",
                                              r.ctx.me.host)
            assert status == 200 and out["group"] == group, out
            # the group's keys, derived from the sweep's one seed (no parameter per group)
            seed = bytes.fromhex(store["parameters"][seed_parameter_name(r.ctx.sweep)])
            assert {f: _public(v) for f, v in out["files"].items()} == {
                f: public_openssh(seed, group, f) for f in ("id_ed25519", "ssh_host_ed25519_key")}
            others = {public_openssh(seed, g, f) for g in groups if g != group
                      for f in ("id_ed25519", "ssh_host_ed25519_key")}
            assert others and not others & {_public(v) for v in out["files"].values()}


@pytest.mark.parametrize("case", ["unsigned", "bad signature", "other region", "other body"])
def test_keys_refuses_a_call_not_signed_by_the_instance_role(tmp_path, case):
    rendered, store = _declared()
    hub = _hub(tmp_path, rendered, store)
    headers = {"unsigned": {"Content-Type": "application/json", "Host": f"{HUB_IP}:8080"},
               "bad signature": _signed(secret="not-the-secret"),
               "other region": _signed(region="eu-west-1"),
               "other body": _signed(body=b'{"group": "x"}')}[case]
    status, out = aws_function.answer(hub, "/done/keys", URL, headers, b"{}",
                                      rendered[0].ctx.me.host)
    assert status == 403 and "files" not in out, out
    assert json.loads((hub / "function.jsonl").read_text())["signed"] is False


def test_keys_refuses_another_role_and_an_instance_outside_the_plan(tmp_path):
    rendered, store = _declared()
    hub = _hub(tmp_path, rendered, store, role="someone-elses-role")
    status, out = aws_function.answer(hub, "/done/keys", URL, _signed(), b"{}",
                                      rendered[0].ctx.me.host)
    assert status == 403 and "files" not in out, out
    hub = _hub(tmp_path, rendered, store)
    status, out = aws_function.answer(hub, "/done/keys", URL, _signed(), b"{}", "10.43.1.250")
    assert status == 403 and "files" not in out, out
