"""The MPI keys of a GCP sweep: every group's login and sshd host pair derived from the one
seed the sweep's secret holds (`spotbench.auth.group_keys`), and the operator's key
(pulumi_tls). The deployment computes the public halves (authorized_keys, known_hosts);
the private halves are fetched at boot from the `grant` function, so `SshKeys` here carries
none (`ssh_files(..., private=False)`)."""

from __future__ import annotations

import pulumi
import pulumi_random

from infra.keys import MpiKeys, SshKeys
from spotbench.auth.group_keys import HOST_KEY, LOGIN_KEY, SEED_BYTES, public_openssh


def key_seed(name: str, parent: pulumi.Resource) -> pulumi_random.RandomId:
    """The sweep's key seed: random once per stack, kept by later `pulumi up`s."""
    return pulumi_random.RandomId(
        f"{name}-key-seed", byte_length=SEED_BYTES,
        opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=[
            "hex", "b64Url", "b64Std", "dec"]))


def derived_mpi_keys(name: str, parent: pulumi.Resource, group_ids: list[str],
                     seed_hex: pulumi.Output) -> MpiKeys:  # fmt: skip
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
