"""Dump every resource the Pulumi programs declare under mocks — type, name, inputs, secret
inputs, dependencies — for each cloud example spec and the 30-VM bench sweeps, to compare a
change that must not change what is declared (a speed-up, a refactor):

    python scripts/declared_dump.py /tmp/before.json   # on the base commit
    python scripts/declared_dump.py /tmp/after.json    # with the change
    cmp /tmp/before.json /tmp/after.json

Deterministic: key material comes from the resource's name (not fresh randomness, and the
OpenSSH private form, whose check bytes are random, is replaced by the PKCS#8 one), random
ids from fixed bytes, RFC 3339 times (spot `validUntil`) become `<TIME>`. Prints one line
per spec: resources and a digest.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pulumi  # noqa: E402
from pulumi.runtime import mocks as pulumi_mocks  # noqa: E402

import infra.preview as pv  # noqa: E402

DEPENDENCIES: dict[tuple[str, str], Any] = {}
_computed, _register = pv._computed, pulumi_mocks.MockMonitor.RegisterResource


def _pair(name: str) -> dict[str, str]:
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.from_private_bytes(hashlib.sha256(name.encode()).digest())
    pkcs8 = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8,
                              ser.NoEncryption()).decode()
    pub = key.public_key()
    return {"privateKeyOpenssh": "OPENSSH-" + pkcs8, "privateKeyPem": pkcs8,
            "publicKeyOpenssh": pub.public_bytes(ser.Encoding.OpenSSH,
                                                 ser.PublicFormat.OpenSSH).decode() + "\n",
            "publicKeyPem": pub.public_bytes(ser.Encoding.PEM,
                                             ser.PublicFormat.SubjectPublicKeyInfo).decode()}


def _fixed_computed(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    out = _computed(typ, name, inputs)
    return {**out, **_pair(name)} if typ == pv.TLS_PRIVATE_KEY else out


def _recording_register(self, request):
    DEPENDENCIES[(request.type, request.name)] = (
        sorted(request.dependencies),
        {k: sorted(v.urns) for k, v in request.propertyDependencies.items()})
    return _register(self, request)


def _encode(value: Any) -> Any:
    if isinstance(value, pulumi.asset.AssetArchive):
        return {k: _encode(v) for k, v in value.assets.items()}
    if isinstance(value, pulumi.asset.StringAsset):
        return {"text": value.text}
    if isinstance(value, (pulumi.asset.FileAsset, pulumi.asset.FileArchive)):
        return {"path": value.path}
    return repr(value)


def _rows(declared: list) -> list:
    return sorted(([d.type, d.name, d.inputs, sorted(d.secrets), d.custom,
                    DEPENDENCIES.get((d.type, d.name))] for d in declared),
                  key=lambda r: (r[0], r[1]))


def dump() -> dict[str, list]:
    pv._computed = _fixed_computed
    pv.os = type("FixedOs", (), {"urandom": staticmethod(lambda n: bytes(range(n)))})
    pulumi_mocks.MockMonitor.RegisterResource = _recording_register
    out = {f.name: _rows(pv.preview(f)) for f in sorted((ROOT / "examples").glob("*.yaml"))
           if "local" not in f.name}
    for path in sorted((ROOT / "bench").glob("_scale_*.py")):  # one per stack-deployed cloud
        cloud = path.stem.removeprefix("_scale_")
        spec = importlib.util.spec_from_file_location(f"bench._scale_{cloud}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out[f"bench-{cloud}-30"] = _rows(getattr(module, f"declare_{cloud}")(30)["_declared"])
    return out


def main() -> None:
    text = json.dumps(dump(), indent=1, sort_keys=True, default=_encode)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<TIME>", text)
    Path(sys.argv[1]).write_text(text)
    for key, rows in json.loads(text).items():
        digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:12]
        print(key, len(rows), digest)


if __name__ == "__main__":
    main()
