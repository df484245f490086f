"""A run group's MPI ssh keys, derived from one per-sweep seed (issue #29).

A sweep keeps one secret whatever its group count: a 32-byte seed. Each group's login and
sshd host keys are Ed25519 keys whose private bytes are HMAC-SHA256(seed, "<kind> <group>"),
so the deployment (public keys: authorized_keys, known_hosts) and the `grant` function
(private keys, to that group's instances only) compute the same pairs, and a group's key
says nothing about another's.
"""

from __future__ import annotations

import hashlib
import hmac

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

LOGIN_KEY = "id_ed25519"  # file names in the key folder the container mounts (infra/keys.py)
HOST_KEY = "ssh_host_ed25519_key"
KEY_FILES = (LOGIN_KEY, HOST_KEY)
SEED_BYTES = 32


def _key(seed: bytes, group: str, key_file: str) -> Ed25519PrivateKey:
    if len(seed) != SEED_BYTES:
        raise ValueError(f"the sweep's key seed must be {SEED_BYTES} bytes, got {len(seed)}")
    if key_file not in KEY_FILES:
        raise ValueError(f"unknown key file {key_file!r}; one of {', '.join(KEY_FILES)}")
    raw = hmac.new(seed, f"{key_file} {group}".encode(), hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(raw)


def private_openssh(seed: bytes, group: str, key_file: str) -> str:
    return _key(seed, group, key_file).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()


def public_openssh(seed: bytes, group: str, key_file: str) -> str:
    return _key(seed, group, key_file).public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
