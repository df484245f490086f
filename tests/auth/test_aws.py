"""SigV4 signing of the done call (VM side) and caller extraction (Lambda side)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from spotbench.auth import Caller, Forbidden, Unauthorized
from spotbench.clouds.aws.identity import (
    caller_from_function_url,
    caller_from_invocation,
    function_account,
    member_role_name,
    signed_post,
    url_region,
)
from spotbench.done_client import call_done
from spotbench.member import MemberContext
from spotbench.spec import load_spec

CREDS = Credentials("AKIDEXAMPLE", "secret", "session-token")


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[dict, bytes]] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Recorder.seen.append((dict(self.headers.items()), body))
        out = json.dumps({"action": "done", "stopped": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Recorder.seen = []
    httpd = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def test_url_region_and_function_account():
    assert url_region("https://abc123.lambda-url.eu-west-1.on.aws/") == "eu-west-1"
    assert url_region("http://127.0.0.1:9/") is None
    assert function_account("arn:aws:lambda:us-east-1:123456789012:function:x-done") == "123456789012"
    with pytest.raises(ValueError):
        function_account("nope")


def test_signed_post_sends_a_valid_sigv4_signature_for_lambda(server):
    resp = signed_post(server, {"group": "g1"}, timeout=10, region="eu-west-1", credentials=CREDS)
    assert resp.status_code == 200
    headers, body = _Recorder.seen[0]
    assert json.loads(body) == {"group": "g1"}
    auth = headers["Authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/lambda/aws4_request" in auth
    assert headers["X-Amz-Security-Token"] == "session-token"
    # Recompute the signature from what the server received: it must match exactly.
    again = AWSRequest(method="POST", url=server, data=body,
                       headers={"Content-Type": "application/json"})
    again.context["timestamp"] = headers["X-Amz-Date"]
    signer = SigV4Auth(CREDS.get_frozen_credentials(), "lambda", "eu-west-1")
    again.headers["X-Amz-Date"] = headers["X-Amz-Date"]
    again.headers["X-Amz-Security-Token"] = "session-token"
    canonical = signer.canonical_request(again)
    string_to_sign = signer.string_to_sign(again, canonical)
    assert auth.endswith("Signature=" + signer.signature(string_to_sign, again))


def test_done_client_signs_on_aws(server, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDVM")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    spec = load_spec({"name": "sx", "cloud": "aws", "region": "us-east-1",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}})
    group = spec.plan()[0]
    addresses = {m.name: (f"10.0.0.{m.rank + 10}", 2222) for m in group.members}
    ctx = MemberContext.for_member(group, group.members[0], addresses=addresses, cloud="aws",
                                   results_url="s3://b/sx", done_url=server)
    assert call_done(ctx, timeout=10) == {"action": "done", "stopped": []}
    headers, body = _Recorder.seen[0]
    assert json.loads(body) == {"group": group.id}
    assert "Credential=AKIDVM/" in headers["Authorization"]


def _event(iam):
    ctx = {"http": {"method": "POST"}}
    if iam is not None:
        ctx["authorizer"] = {"iam": iam}
    return {"requestContext": ctx}


def test_caller_from_function_url():
    role = member_role_name("sx", "eu-west-1")  # the sweep's one member role (issue #29)
    assert role == "sx-eu-west-1-member"
    arn = f"arn:aws:sts::111122223333:assumed-role/{role}/i-0abc1234def567890"
    iam = {"accountId": "111122223333", "userArn": arn}
    assert caller_from_function_url(_event(iam), account="111122223333", member_role=role) \
        == Caller("member", "i-0abc1234def567890")
    with pytest.raises(Unauthorized):
        caller_from_function_url(_event(None), account="111122223333", member_role=role)
    with pytest.raises(Unauthorized):
        caller_from_function_url(_event({"accountId": "111122223333"}), account="111122223333",
                                 member_role=role)
    with pytest.raises(Forbidden, match="account"):
        caller_from_function_url(_event(iam), account="999999999999", member_role=role)
    with pytest.raises(Forbidden, match="not this sweep's member role"):
        caller_from_function_url(_event(iam), account="111122223333",
                                 member_role=member_role_name("sx", "us-east-1"))
    user = {"accountId": "111122223333", "userArn": "arn:aws:iam::111122223333:user/alice"}
    with pytest.raises(Forbidden, match="assumed role"):
        caller_from_function_url(_event(user), account="111122223333", member_role=role)
    forged = {"accountId": "111122223333",
              "userArn": "arn:aws:sts::999999999999:assumed-role/r/i-0abc1234def567890"}
    with pytest.raises(Forbidden):
        caller_from_function_url(_event(forged), account="111122223333", member_role=role)


def test_caller_from_invocation():
    arn = "arn:aws:scheduler:us-east-1:1:schedule/default/sx-start"
    assert caller_from_invocation({"schedule": arn, "body": {}}) == Caller("scheduler", arn)
    assert caller_from_invocation({"body": {}}).kind == "operator"
