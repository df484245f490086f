"""The boot lab's AWS function URL: the sweep's `done` Lambda's `/grant` and `/keys` paths
(issue #29, docs/identity.md), as a member's boot and workload reach them.

`function_of(declared)` takes, from the program's declarations (the recording mocks), what the
real function knows: the sweep's one member role (`member_role_name(sweep, region)`, from the
Lambda's declared `SPOTBENCH_SPEC`), the entries it hands per group
(`SPOTBENCH_SECRET_FILES`), the SSM parameters it reads (the sweep's key seed, from which it
derives a group's ssh keys, and a container's env: it reads them with its own role; members
have no SSM read), and each declared instance's `Name` → its
deployer-written `spotbench-group` tag (what EC2 DescribeInstances answers the function).

`answer(hub_dir, …)` is the hub's answer to a POST on the function URL's `/grant` or `/keys`:
- the URL's `AWS_IAM` auth: a request not SigV4-signed for service `lambda` with the
  instance role's credentials and session token (the hub's IMDS `CREDS`), or whose
  signature does not verify (recomputed here with botocore), is refused 403 before the
  function runs, as a function URL does;
- the function (functions/lambda_handler.py, functions/aws_grants.py): the calling
  instance's role must be the sweep's member role, and the instance must be one of the
  plan's members carrying its group's tag; then `/keys` answers that group's entries only,
  `{"group": …, "files": {name: base64}}`, and `/grant` that group's storage grant
  (simulated STS credentials: the lab's results store is a local folder). Anything else is
  a JSON 403.

Which instance signed: every lab VM gets the same simulated IMDS credentials, so the caller's
instance is told by its address (DIR/names.json and DIR/accounts.json, written by
`boot.Lab.vm`) — on AWS the session name of the signing credentials says it. What the lab
does not model: `/grant`'s refusal outside an open run or past the group's deadline (unit-
tested on functions/aws_grants.py). Each call is recorded in DIR/function.jsonl.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spotbench.labels import GROUP_LABEL

FUNCTION = "aws:lambda/function:Function"
INSTANCES = ("aws:ec2/instance:Instance", "aws:ec2/spotInstanceRequest:SpotInstanceRequest")
PARAMETER = "aws:ssm/parameter:Parameter"
PATHS = ("grant", "keys")
_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
                   r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[^,]+), ?"
                   r"Signature=(?P<signature>[0-9a-f]{64})$")


def function_of(declared: list) -> dict:
    """What the sweep's function knows (see the module's docstring), from the declarations."""
    from spotbench.clouds.aws.identity import member_role_name

    done = next(d for d in declared if d.type == FUNCTION
                and d.inputs["environment"]["variables"].get("SPOTBENCH_ACTION") == "done")
    env = done.inputs["environment"]["variables"]
    spec = json.loads(env["SPOTBENCH_SPEC"])
    return {"sweep": spec["name"], "region": spec["region"],
            "member_role": member_role_name(spec["name"], spec["region"]),
            "secret_files": json.loads(env.get("SPOTBENCH_SECRET_FILES") or "[]"),
            "parameters": {d.inputs["name"]: d.inputs["value"] for d in declared
                           if d.type == PARAMETER},
            "instances": {d.inputs["tags"]["Name"]: d.inputs["tags"].get(GROUP_LABEL)
                          for d in declared if d.type in INSTANCES}}


def signature_problem(method: str, url: str, headers: Mapping[str, str], body: bytes,
                      region: str) -> str:
    """'' when the request is SigV4-signed (service `lambda`, `region`) with the lab's
    instance credentials and the signature verifies; else what is wrong."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tests.fidelity.hub import CREDS

    lower = {k.lower(): v for k, v in headers.items()}
    m = _AUTH.match(lower.get("authorization", ""))
    if not m:
        return "not signed with SigV4"
    if m["key"] != CREDS["AccessKeyId"]:
        return f"unknown access key {m['key']}"
    if (m["service"], m["region"]) != ("lambda", region):
        return f"signed for {m['service']} in {m['region']}, not lambda in {region}"
    if lower.get("x-amz-security-token") != CREDS["Token"]:
        return "no or another session token"
    signed = m["signed"].split(";")
    if "host" not in signed or any(h not in lower for h in signed):
        return f"signed headers {signed} missing from the request"
    request = AWSRequest(method=method, url=url, data=body,
                         headers={h: lower[h] for h in signed})
    request.context["timestamp"] = lower.get("x-amz-date", "")
    auth = SigV4Auth(Credentials(CREDS["AccessKeyId"], CREDS["SecretAccessKey"], CREDS["Token"]),
                     "lambda", region)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)),
                              request)
    return "" if expected == m["signature"] else "the signature does not match"


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def answer(hub_dir: Path, path: str, url: str, headers: Mapping[str, str], body: bytes,
           client: str, now: datetime | None = None) -> tuple[int, dict]:
    """(status, JSON) of a POST on the function URL's `/grant` or `/keys` from `client`."""
    function = _json(hub_dir / "function.json")
    action = path.rstrip("/").rsplit("/", 1)[-1]
    entry: dict = {"path": path, "client": client}
    status, out = 403, {"Message": "Forbidden"}  # the URL's own refusal: the function never runs
    problem = signature_problem("POST", url, headers, body, function.get("region", ""))
    role = _json(hub_dir / "accounts.json").get(client, "")
    name = _json(hub_dir / "names.json").get(client, "")
    group = function.get("instances", {}).get(name)
    entry.update(signed=not problem, role=role, name=name)
    if problem:
        entry["refused"] = problem
    elif role != function.get("member_role"):
        out = {"error": f"caller role {role} is not this sweep's member role"}
    elif not group:
        out = {"error": f"instance {name or client} is not a member of sweep {function.get('sweep')}"}
    elif action == "keys":  # what the real function answers (spotbench.clouds.aws.grants)
        from spotbench.clouds.aws.grants import group_entries

        status, out = 200, {"group": group, "files": group_entries(
            function["sweep"], group, function["secret_files"], function["parameters"].get)}
    elif action == "grant":
        until = (now or datetime.now(UTC)) + timedelta(hours=1)
        status, out = 200, {"group": group, "credentials": {
            "AccessKeyId": "ASIASIMULATEDGRANT01", "SecretAccessKey": "simulated-grant-secret",
            "SessionToken": f"simulated-grant-token-{group}", "Expiration": until.isoformat()}}
    else:
        status, out = 404, {"error": f"no path {path} here"}
    entry.update(status=status, group=out.get("group"), files=sorted(out.get("files", {})))
    with open(hub_dir / "function.jsonl", "a") as fh:
        fh.write(json.dumps(entry) + "\n")
    return status, out
