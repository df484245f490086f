"""The boot lab's SSM Parameter Store, as AWS would answer it to a member's instance role.

Since issue #29 a member's `fetch-keys` step does not read SSM: it asks the sweep's function
URL (`/keys`, tests/fidelity/aws_function.py), which reads the group's parameters with its
own role. Members' declared policies grant no `ssm:GetParameter`, so this double (which
grants only what the declared policies allow) refuses any member that tries.

`parameter_store(declared)` takes, from the program's declarations (the recording mocks),
each `aws.ssm.Parameter` (name → value) and each role's inline policy documents, plus the
account and region the lab plays; the lab hands it to the hub folder (`Lab.serve_secrets`),
and each VM's role is the instance profile's (`Rendered.account`, written by `Lab.vm`).

`answer(state, argv)` is the `curl` shim's answer to `https://ssm.REGION.amazonaws.com/`: it
checks the call is what the AMI's curl sends (SigV4 for service `ssm` in the region, the
instance role's IMDS credentials and session token, `AmazonSSM.GetParameter` with
`WithDecryption`), then evaluates `ssm:GetParameter` on the parameter's ARN against the VM
role's declared policies as AWS does (tests/iam/policy.py): a denial is answered
`AccessDeniedException` (curl -f exits 22), a missing name `ParameterNotFound`. Each call is
recorded in the VM's calls.jsonl (`ssm`: the checks, `parameter`, `status`).
"""

from __future__ import annotations

import json
from pathlib import Path

ACCOUNT = "123456789012"  # the mocks' account
PARAMETER = "aws:ssm/parameter:Parameter"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PROFILE = "aws:iam/instanceProfile:InstanceProfile"


def parameter_store(declared: list, region: str) -> dict:
    roles = {f"{d.name}-id": d.inputs["name"] for d in declared if d.type == ROLE}
    policies: dict[str, list[dict]] = {}
    for d in declared:
        if d.type == ROLE_POLICY:
            policies.setdefault(roles[d.inputs["role"]], []).append(json.loads(d.inputs["policy"]))
    from tests.fidelity.aws_function import function_of

    return {"account": ACCOUNT, "region": region, "policies": policies,
            "parameters": {d.inputs["name"]: d.inputs["value"] for d in declared
                           if d.type == PARAMETER},
            "function": function_of(declared)}  # what the function answers (`/keys`)


def instance_role(declared: list, profile: str) -> str:
    """The role EC2 gives an instance launched with instance profile `profile`."""
    return next(d.inputs["role"] for d in declared
                if d.type == PROFILE and d.inputs["name"] == profile)


def answer(state: Path, argv: list[str], record) -> int:
    from tests.fidelity.hub import CREDS
    from tests.iam.policy import Authorization, evaluate

    def opt(name: str) -> list[str]:
        return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]

    url = next(a for a in argv if a.startswith("https://"))
    region = url.split("/")[2].split(".")[1]
    headers = dict(h.split(": ", 1) for h in opt("-H"))
    body = json.loads((opt("-d") or ["{}"])[0])
    name = str(body.get("Name", ""))
    checks = {
        "sigv4": opt("--aws-sigv4") == [f"aws:amz:{region}:ssm"],
        "user": opt("--user") == [f"{CREDS['AccessKeyId']}:{CREDS['SecretAccessKey']}"],
        "session": headers.get("X-Amz-Security-Token") == CREDS["Token"],
        "target": headers.get("X-Amz-Target") == "AmazonSSM.GetParameter",
        "decrypt": body.get("WithDecryption") is True,
    }
    role_file = state / "account"
    role = role_file.read_text().strip() if role_file.exists() else ""
    store = json.loads((state.parent / "hub" / "secrets.json").read_text())
    arn = f"arn:aws:ssm:{region}:{store['account']}:parameter{name}"
    if not all(checks.values()):
        status, out = 400, {"__type": "UnrecognizedClientException"}
    elif not evaluate(store["policies"].get(role, []), Authorization("ssm:GetParameter", arn)):
        status, out = 400, {"__type": "AccessDeniedException",
                            "message": f"{role} is not authorized to perform: ssm:GetParameter "
                                       f"on resource: {arn}"}
    elif name not in store["parameters"]:
        status, out = 400, {"__type": "ParameterNotFound"}
    else:
        status, out = 200, {"Parameter": {"Name": name, "Type": "SecureString", "Version": 1,
                                          "Value": store["parameters"][name], "ARN": arn}}
    record(state, program="curl", argv=argv, ssm=checks, parameter=name, role=role,
           status=status)
    if status != 200:
        return 22  # curl -f: an HTTP error, nothing on stdout
    print(json.dumps(out))
    return 0
