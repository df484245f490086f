"""The sweep's one secret in Secret Manager, readable by the functions' account only.

Whatever the group count, a sweep holds one secret, `<sweep>-spotbench` (sweep names are
unique in the project), one version: JSON with the seed every group's MPI ssh keys derive
from (`spotbench.auth.group_keys`: HMAC of the seed and the group id) and the env files of
`container` groups whose env holds the spec's own values (`env`: digest → text,
`env_of`: group id → digest; groups sharing an env share its text). Only the function
account holds `roles/secretmanager.secretAccessor` on it; the `grant` function hands a
group's keys and env to that group's instances alone (spotbench/clouds/gcp/grants.py), and the
instance metadata — readable by anyone who may `compute.instances.get` the VM — carries the
public files only. A version holds at most 64 KiB (docs/platform.md): `SweepSecret` refuses
more, naming the env texts as the cause.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import pulumi
import pulumi_gcp as gcp

from spotbench.plan import sweep_labels

ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"
MAX_PAYLOAD_BYTES = 64 * 1024  # Secret Manager: a version's payload (docs/platform.md)


def secret_id(sweep: str) -> str:
    return f"{sweep}-spotbench"


def secret_name(project: str, sweep: str) -> str:
    """The secret's resource name, as the functions read it (SPOTBENCH_GCP_SECRET)."""
    return f"projects/{project}/secrets/{secret_id(sweep)}"


def payload(seed_hex: str, envs: Mapping[str, str]) -> str:
    """The version's JSON: the key seed, and each secret env once (by digest)."""
    texts = {hashlib.sha256(t.encode()).hexdigest()[:16]: t for t in envs.values()}
    env_of = {g: hashlib.sha256(t.encode()).hexdigest()[:16] for g, t in sorted(envs.items())}
    text = json.dumps({"seed": seed_hex, "env": texts, "env_of": env_of}, sort_keys=True)
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise pulumi.RunError(
            f"the sweep's secret would hold {len(text.encode())} bytes, over Secret Manager's "
            f"{MAX_PAYLOAD_BYTES} per version: the `env` values differ per matrix point; "
            "keep secret values the same across the matrix, or pass large values another way")
    return text


class SweepSecret(pulumi.ComponentResource):
    """`name`: the secret's resource name; `resources`: what a VM's first boot needs."""

    def __init__(self, name: str, *, project: str, sweep: str, seed_hex: pulumi.Input[str],
                 envs: Mapping[str, str], reader: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None) -> None:  # fmt: skip
        super().__init__("spotbench:gcp:SweepSecret", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        secret = gcp.secretmanager.Secret(
            f"{name}-secret", secret_id=secret_id(sweep), project=project,
            replication={"auto": {}}, labels=sweep_labels(sweep), opts=child)
        version = gcp.secretmanager.SecretVersion(
            f"{name}-v",
            secret=secret.secret_id.apply(lambda sid: f"projects/{project}/secrets/{sid}"),
            secret_data=pulumi.Output.secret(
                pulumi.Output.from_input(seed_hex).apply(lambda seed: payload(seed, envs))),
            opts=child)
        grant = gcp.secretmanager.SecretIamMember(
            f"{name}-accessor", project=project, secret_id=secret.secret_id, role=ACCESSOR_ROLE,
            member=pulumi.Output.from_input(reader).apply(lambda e: f"serviceAccount:{e}"),
            opts=child)
        self.name = secret_name(project, sweep)
        self.resources: list[pulumi.Resource] = [secret, version, grant]
        self.register_outputs({"secret": self.name})
