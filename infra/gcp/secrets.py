"""A run group's ssh private keys — and a `container` group's env file — in Secret Manager,
readable by that group's account only.

One secret per group and key (`<group id>-login`, `<group id>-host`; group ids begin with
their sweep's name and `--`, so they are unique in the project), its single version holding
the key, and `roles/secretmanager.secretAccessor` on that secret (not the project) for the
group's member account. The VMs fetch them at boot (cloud_init.py: the metadata server's
access token, then `…/versions/latest:access`); the instance metadata — readable by anyone
who may `compute.instances.get` the VM: operators, the functions' account — carries the
public files only.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.keys import HOST_KEY, LOGIN_KEY, private_keys
from spotbench.plan import sweep_labels

SECRET_SUFFIX = {LOGIN_KEY: "login", HOST_KEY: "host"}
ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"


def secret_id(group: str, key_file: str) -> str:
    return f"{group}-{SECRET_SUFFIX[key_file]}"


def secret_name(project: str, group: str, key_file: str) -> str:
    """The secret's resource name, as the boot asks Secret Manager for it."""
    return f"projects/{project}/secrets/{secret_id(group, key_file)}"


class GroupSecrets(pulumi.ComponentResource):
    """`names`: key file name → secret resource name (what the boot fetches)."""

    def __init__(self, name: str, *, project: str, sweep: str, group: str,
                 keys: pulumi.Output, account: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None) -> None:  # fmt: skip
        super().__init__("spotbench:gcp:GroupSecrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        member = pulumi.Output.from_input(account).apply(lambda e: f"serviceAccount:{e}")
        self.names: dict[str, str] = {}
        self.resources: list[pulumi.Resource] = []  # what a VM's first boot needs to exist
        for key_file in (LOGIN_KEY, HOST_KEY):
            suffix = SECRET_SUFFIX[key_file]
            secret = gcp.secretmanager.Secret(
                f"{name}-{suffix}",
                secret_id=secret_id(group, key_file),
                project=project,
                replication={"auto": {}},
                labels=sweep_labels(sweep),
                opts=child,
            )
            data = keys.apply(lambda k, f=key_file: private_keys(k).get(f, ""))
            version = gcp.secretmanager.SecretVersion(
                f"{name}-{suffix}-v",
                secret=secret.secret_id.apply(lambda sid: f"projects/{project}/secrets/{sid}"),
                secret_data=pulumi.Output.secret(data),
                opts=child,
            )
            grant = gcp.secretmanager.SecretIamMember(
                f"{name}-{suffix}-accessor",
                project=project,
                secret_id=secret.secret_id,
                role=ACCESSOR_ROLE,
                member=member,
                opts=child,
            )
            self.names[key_file] = secret_name(project, group, key_file)
            self.resources += [secret, version, grant]
        self.register_outputs({"secrets": dict(self.names)})


ENV_SUFFIX = "env"


def env_secret_id(group: str) -> str:
    return f"{group}-{ENV_SUFFIX}"


class GroupEnvSecret(pulumi.ComponentResource):
    """A `container` group's env file (the spec's `env`: tokens, passwords) as one secret,
    `<group id>-env`, readable by the group's member account only; the boot fetches it
    (cloud_init.py) instead of reading it from the metadata. `name`: its resource name."""

    def __init__(self, name: str, *, project: str, sweep: str, group: str, text: str,
                 account: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spotbench:gcp:GroupEnvSecret", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        secret = gcp.secretmanager.Secret(
            f"{name}-{ENV_SUFFIX}", secret_id=env_secret_id(group), project=project,
            replication={"auto": {}}, labels=sweep_labels(sweep), opts=child)
        version = gcp.secretmanager.SecretVersion(
            f"{name}-{ENV_SUFFIX}-v",
            secret=secret.secret_id.apply(lambda sid: f"projects/{project}/secrets/{sid}"),
            secret_data=pulumi.Output.secret(text), opts=child)
        grant = gcp.secretmanager.SecretIamMember(
            f"{name}-{ENV_SUFFIX}-accessor", project=project, secret_id=secret.secret_id,
            role=ACCESSOR_ROLE,
            member=pulumi.Output.from_input(account).apply(lambda e: f"serviceAccount:{e}"),
            opts=child)
        self.name = f"projects/{project}/secrets/{env_secret_id(group)}"
        self.resources: list[pulumi.Resource] = [secret, version, grant]
        self.register_outputs({"secret": self.name})
