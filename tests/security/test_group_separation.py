"""Attacks by a VM of one group on another group of the same sweep, read from the Pulumi
program under mocks (never a copy):

- connect to another group's members (their sshd on the MPI port, MPI's own ports): which
  TCP connections the network lets through is computed from the declared GCP firewall rules
  (by network tag) and AWS security-group ingress rules (by referenced group);
- log in to another group with the ssh key it was given, or pose as its sshd: every key a
  member gets is in its boot document (GCP cloud-config metadata, AWS user-data).

A member must reach its own group on the workload's ports and nothing of another group's;
its login key must be authorized on its own group only, its sshd host key must be its
group's, and the operator's private key must be on no member (its public half is
authorized everywhere, for `spotbench exec`).
"""

from __future__ import annotations

import itertools
import json

import pytest
import yaml

from spotbench.workload_registry import get_workload
from spotbench.spec import load_spec
from tests.infra.conftest import snapshot as _declared

pytestmark = pytest.mark.security

BASE = {"workload": {"name": "osu"}, "trials": 2, "schedule": {"cron": "0 3 * * *"},
        "deadline": "20m"}


@pytest.fixture(scope="module")
def gcp():
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec({**BASE, "name": "sep", "cloud": "gcp", "zone": "us-central1-a",
                      "matrix": {"machine_type": ["n2-standard-2"]}})
    return spec, _declared(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)),
                           {"gcp:project": "proj-1", "gcp:region": "us-central1"})


@pytest.fixture(scope="module")
def aws():
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = load_spec({**BASE, "name": "sep", "cloud": "aws", "region": "eu-west-1",
                      "zone": "eu-west-1a", "matrix": {"machine_type": ["c5n.large"]},
                      "results": "s3://res-bucket/runs/sep"})
    return spec, _declared(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)), {})


# ---- network ------------------------------------------------------------------------------
def _ports(spec) -> list[int]:
    """The workload's service port and ephemeral ports MPI's hydra proxies and ranks listen
    on (members open every port to their own group; tests/fidelity measures them)."""
    return [get_workload(spec.workload.name).port, 32768, 50793, 60999]


def _in(port: int, spec_: str) -> bool:
    lo, _, hi = str(spec_).partition("-")
    return int(lo) <= port <= int(hi or lo)


def gcp_reachable(mocks, src: dict, dst: dict, port: int) -> bool:
    for fw in (d.inputs for d in mocks.of_type("gcp:compute/firewall:Firewall")):
        if fw.get("direction", "INGRESS") != "INGRESS" or fw.get("sourceRanges"):
            continue  # range rules (IAP) do not admit a VM of the network
        if not set(fw.get("sourceTags") or []) & set(src["tags"]):
            continue
        if fw.get("targetTags") and not set(fw["targetTags"]) & set(dst["tags"]):
            continue
        if any(a["protocol"] in ("tcp", "all") and any(_in(port, p) for p in a.get("ports") or ["0-65535"])
               for a in fw["allows"]):
            return True
    return False


def _aws_members(mocks) -> list:
    """Spot members are SpotInstanceRequests, on-demand ones Instances."""
    members = [*mocks.of_type("aws:ec2/spotInstanceRequest:SpotInstanceRequest"),
               *mocks.of_type("aws:ec2/instance:Instance")]
    assert members, "the AWS sweep declared no members"
    return members


def aws_reachable(mocks, src: dict, dst: dict, port: int) -> bool:
    rules = [r.inputs for r in mocks.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")]
    for rule in rules:
        if rule["securityGroupId"] not in dst["vpcSecurityGroupIds"]:
            continue
        if rule.get("referencedSecurityGroupId") not in src["vpcSecurityGroupIds"]:
            continue
        if rule["ipProtocol"] in ("tcp", "-1") and rule["fromPort"] <= port <= rule["toPort"]:
            return True
    return False


def _check(instances: list[dict], spec, reachable) -> None:
    assert len({i["group"] for i in instances}) == 2
    for src, dst in itertools.permutations(instances, 2):
        for port in _ports(spec):
            ok = reachable(src, dst, port)
            if src["group"] == dst["group"]:
                assert ok, f"{src['name']} cannot reach its own group's {dst['name']}:{port}"
            else:
                assert not ok, f"{src['name']} (group {src['group']}) reaches {dst['name']}:{port}"


def test_gcp_members_reach_only_their_own_group(gcp) -> None:
    spec, mocks = gcp
    instances = [{"name": d.inputs["name"], "tags": d.inputs.get("tags") or [],
                  "group": d.inputs["labels"]["spotbench-group"]}
                 for d in mocks.of_type("gcp:compute/instance:Instance")]
    _check(instances, spec, lambda s, d, p: gcp_reachable(mocks, s, d, p))


def test_aws_members_reach_only_their_own_group(aws) -> None:
    spec, mocks = aws
    instances = [{"name": d.name, "vpcSecurityGroupIds": d.inputs["vpcSecurityGroupIds"],
                  "group": d.inputs["tags"]["spotbench-group"]}
                 for d in _aws_members(mocks)]
    _check(instances, spec, lambda s, d, p: aws_reachable(mocks, s, d, p))


# ---- keys ---------------------------------------------------------------------------------
def _files(user_data: str) -> dict[str, str]:
    doc = yaml.safe_load(user_data.removeprefix("#cloud-config\n"))
    return {f["path"].rsplit("/", 1)[-1]: f["content"] for f in doc["write_files"]}


def _pub(line: str) -> str:
    return " ".join(line.split()[:2])


def _check_keys(members: list[tuple[str, dict[str, str]]], operator_private: str) -> None:
    groups = {g for g, _ in members}
    assert len(groups) == 2
    for g, files in members:
        assert operator_private.strip() not in "".join(files.values())
    for (g1, f1) in members:
        for (g2, f2) in members:
            authorized = {_pub(line) for line in f2["authorized_keys"].splitlines() if line.strip()}
            mine = _pub(f1["id_ed25519.pub"])
            if g1 == g2:
                assert mine in authorized
                assert f1["ssh_host_ed25519_key"] == f2["ssh_host_ed25519_key"]
            else:
                assert mine not in authorized, f"a {g1} member's key logs in to {g2}"
                assert f1["ssh_host_ed25519_key"] != f2["ssh_host_ed25519_key"], \
                    f"a {g1} member holds {g2}'s sshd host key"


def _gcp_granted_files(mocks, group: str, account: str) -> dict[str, str]:
    """The private keys a VM of `group` can get (issue #29): what the `grant` function
    answers its instances — the group's keys derived from the sweep's one secret — and no
    declared secret its own account could read directly (the functions' account alone
    reads it). Key files as its fetch-keys step writes them."""
    from spotbench.auth.group_keys import private_openssh
    from tests.fidelity.gcp_iam import DeclaredPolicy, declared_secrets, secret_access

    policy = DeclaredPolicy.from_declared(mocks.declared, "proj-1")
    secrets = declared_secrets(mocks.declared, "proj-1")
    assert not [n for n in secrets if policy.allows(f"serviceAccount:{account}", secret_access(n))]
    (payload,) = [json.loads(v) for v in secrets.values()]
    seed = bytes.fromhex(payload["seed"])
    files = {}
    for d in mocks.of_type("gcp:compute/instance:Instance"):
        if d.inputs["labels"]["spotbench-group"] != group:
            continue
        doc = yaml.safe_load(d.inputs["metadata"]["user-data"])
        script = next((f["content"] for f in doc["write_files"]
                       if f["path"].endswith("/fetch-keys")), "")
        for line in script.splitlines():
            if line.startswith("fetch "):
                key_file = line.split()[1]  # one serialization per key (OpenSSH's is salted)
                text = _GRANTED.setdefault((seed, group, key_file),
                                           private_openssh(seed, group, key_file))
                files[line.split()[2].rsplit("/", 1)[-1]] = text
    return files


_GRANTED: dict[tuple[bytes, str, str], str] = {}


def test_gcp_members_hold_only_their_groups_keys(gcp) -> None:
    """Every key a member gets: its boot document's files and what `grant` answers its
    instance (what its fetch-keys step stores)."""
    _, mocks = gcp
    members = [(d.inputs["labels"]["spotbench-group"],
                {**_files(d.inputs["metadata"]["user-data"]),
                 **_gcp_granted_files(mocks, d.inputs["labels"]["spotbench-group"],
                                      d.inputs["serviceAccount"]["email"])})
               for d in mocks.of_type("gcp:compute/instance:Instance")]
    _check_keys(members, _operator_private(mocks))


def test_gcp_instance_metadata_holds_no_private_key(gcp) -> None:
    """Anyone who may read an instance (`compute.instances.get`: operators, the functions'
    account) reads its metadata: no private key is there, and no seed; the sweep's one
    secret (every group's key seed) is readable by the functions' account alone, never by
    the member account (issue #29)."""
    from spotbench.auth.group_keys import KEY_FILES, private_openssh
    from tests.fidelity.gcp_iam import DeclaredPolicy, declared_secrets, secret_access

    _, mocks = gcp
    ((name, data),) = declared_secrets(mocks.declared, "proj-1").items()
    seed = json.loads(data)["seed"]
    instances = mocks.of_type("gcp:compute/instance:Instance")
    for d in instances:
        text = json.dumps(d.inputs["metadata"])
        assert "PRIVATE KEY" not in text and seed not in text, d.inputs["name"]
        group = d.inputs["labels"]["spotbench-group"]
        for key_file in KEY_FILES:
            body = private_openssh(bytes.fromhex(seed), group, key_file).strip().splitlines()[1]
            assert body not in text
    policy = DeclaredPolicy.from_declared(mocks.declared, "proj-1")
    accounts = {d.inputs["serviceAccount"]["email"] for d in instances}
    assert len(accounts) == 1  # one member account per sweep
    functions = {f.inputs["serviceConfig"]["serviceAccountEmail"]
                 for f in mocks.of_type("gcp:cloudfunctionsv2/function:Function")}
    assert not any(policy.allows(f"serviceAccount:{a}", secret_access(name)) for a in accounts)
    assert all(policy.allows(f"serviceAccount:{a}", secret_access(name)) for a in functions)



def _operator_private(mocks) -> str:
    """The private key `spotbench exec` uses (the stack's ssh_private_key output): the key
    resource no member's id_ed25519 is."""
    from infra.preview import _computed

    keys = [d for d in mocks.of_type("tls:index/privateKey:PrivateKey")]
    assert keys
    return next((_computed(d.type, d.name, d.inputs)["privateKeyOpenssh"] for d in keys
                 if "operator" in d.name), "no operator key declared")
