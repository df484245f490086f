"""SSH keys of the MPI members (GCP and AWS alike): one login and sshd host key pair per
run group, derived from the sweep's one seed (`key_seed`, `derived_mpi_keys`;
`spotbench.auth.group_keys` is the derivation), and the operator's key (pulumi_tls, a
secret); the known_hosts lines pinning each group's host key, and the `write_files` entries
that put a member's public keys on its VM.

The seed lives in the cloud's one per-sweep secret, which the functions alone read; they
derive a group's private keys for that group's members only, and the boot fetches them
(`FETCH_KEYS_PREAMBLE`). User-data and instance metadata, which anyone allowed to describe
the instance can read, carry the public files only (`ssh_files(..., private=False)`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_random

from spotbench.auth.group_keys import HOST_KEY, LOGIN_KEY, SEED_BYTES, public_openssh
from spotbench.images import IMAGE_GID, IMAGE_UID

# where the container finds its ssh files (the boot path mounts the keys there for any
# workload whose descriptor says `mpi`): the descriptor type's, never a workload's constant
from spotbench.workload import SSH_DIR_IN_CONTAINER  # noqa: F401 - for the boot renderers


def known_hosts(ips: list[pulumi.Input[str]], host_public_key: pulumi.Input[str],
                port: int) -> pulumi.Output[str]:
    """known_hosts lines pinning the sweep's sshd host key at every member address."""
    def render(values: list[str]) -> str:
        *addrs, key = values
        key = " ".join(key.split()[:2])  # type + base64, no comment
        return "".join(f"[{ip}]:{port} {key}\n" for ip in addrs)

    return pulumi.Output.all(*ips, host_public_key).apply(render)


@dataclass(frozen=True)
class SshKeys:
    """One run group's MPI login key pair and the host key its members' sshd presents
    (recorded by the stack, so launchers and `spotbench exec` pin it instead of trusting
    the first key they see), plus the operator's public key every member also accepts."""

    private_openssh: str
    public_openssh: str
    host_private_openssh: str = ""
    host_public_openssh: str = ""
    operator_public_openssh: str = ""


@dataclass
class MpiKeys:
    """Keys per run group — a member holds only its own group's private keys, so a VM of
    one group cannot log in to (or pose as) another group's members — and one operator key
    pair whose private half exists only in the stack's outputs."""

    groups: dict[str, pulumi.Output]  # group id → Output[SshKeys], secret
    login_private: pulumi.Output  # the operator key (secret), for `spotbench exec --key`
    host_public: dict[str, pulumi.Output]  # group id → that group's sshd host public key


def key_seed(name: str, parent: pulumi.Resource) -> pulumi_random.RandomId:
    """The sweep's key seed (`spotbench.auth.group_keys`): random once per stack, kept by
    later `pulumi up`s; the cloud's one per-sweep secret holds it, the functions alone read it."""
    return pulumi_random.RandomId(
        f"{name}-key-seed", byte_length=SEED_BYTES,
        opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=[
            "hex", "b64Url", "b64Std", "dec"]))


def derived_mpi_keys(name: str, parent: pulumi.Resource, group_ids: list[str],
                     seed_hex: pulumi.Output) -> MpiKeys:  # fmt: skip
    """Each group's public login and host keys, derived from the sweep's seed at declare
    time (the private halves are derived by the functions, for that group's members only),
    and the operator's key (pulumi_tls, a secret of the stack)."""
    import pulumi_tls as tls

    operator = tls.PrivateKey(f"{name}-operator-ssh", algorithm="ED25519",
                              opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=[
                                  "privateKeyOpenssh", "privateKeyPem"]))

    def keys(values: list[str], gid: str) -> SshKeys:
        seed, op = bytes.fromhex(values[0]), values[1]
        return SshKeys("", public_openssh(seed, gid, LOGIN_KEY), "",
                       public_openssh(seed, gid, HOST_KEY), op)

    both = pulumi.Output.all(seed_hex, operator.public_key_openssh)
    groups = {gid: both.apply(lambda v, g=gid: keys(v, g)) for gid in group_ids}
    hosts = {gid: seed_hex.apply(lambda h, g=gid: public_openssh(bytes.fromhex(h), g, HOST_KEY))
             for gid in group_ids}
    return MpiKeys(groups, pulumi.Output.secret(operator.private_key_openssh), hosts)


def group_known_hosts(addresses: Mapping[str, list[pulumi.Input[str]]],
                      host_public: Mapping[str, pulumi.Input[str]], port: int) -> pulumi.Output[str]:
    """known_hosts for every group: each group's host key pinned at its members' addresses."""
    parts = [known_hosts(addresses[gid], host_public[gid], port) for gid in addresses]
    return pulumi.Output.all(*parts).apply("".join)


def ssh_files(ssh_dir: str, ssh: SshKeys, *, private: bool = True) -> list[dict[str, str]]:
    """cloud-init `write_files` entries for the keys the workload container mounts; without
    the private keys when `private` is off (the boot fetches those from the secret store)."""
    def line(text: str) -> str:
        return text.rstrip("\n") + "\n"

    files = [
        {"path": f"{ssh_dir}/id_ed25519", "permissions": "0600", "content": line(ssh.private_openssh)},
        {"path": f"{ssh_dir}/id_ed25519.pub", "permissions": "0644", "content": line(ssh.public_openssh)},
        {"path": f"{ssh_dir}/authorized_keys", "permissions": "0644",
         "content": line(ssh.public_openssh) + (line(ssh.operator_public_openssh)
                                                 if ssh.operator_public_openssh else "")},
    ]
    if ssh.host_private_openssh or ssh.host_public_openssh:  # GCP: private half fetched
        files += [
            {"path": f"{ssh_dir}/ssh_host_ed25519_key", "permissions": "0600",
             "content": line(ssh.host_private_openssh)},
            {"path": f"{ssh_dir}/ssh_host_ed25519_key.pub", "permissions": "0644",
             "content": line(ssh.host_public_openssh)},
        ]
    if not private:
        secret = {f"{ssh_dir}/{name}" for name in (LOGIN_KEY, HOST_KEY)}
        files = [f for f in files if f["path"] not in secret]
    return files


def key_owner_command(ssh_dir: str) -> str:
    """ExecStartPre giving the key files to the uid the image runs as (`USER bench`).

    cloud-init writes them root-owned 0600 (its `owner` takes names, and the host has no
    `bench`); the container reads them as `IMAGE_UID`, so hand them over before each start.
    """
    return f"/bin/chown -R {IMAGE_UID}:{IMAGE_GID} {ssh_dir}"


# The start of each cloud's `fetch-keys` boot script (after `set -eu`): a VM that cannot read
# its group's keys cannot run its group, so it powers off (a stopped VM bills no compute; the
# control plane sees the group stopped without a result and retries it).
FETCH_KEYS_PREAMBLE = """power_off_on_failure() {
  status=$?
  if [ "$status" -ne 0 ]; then
    echo "spotbench: no ssh keys, powering off" >&2
    systemctl poweroff
  fi
}
trap power_off_on_failure EXIT
"""
