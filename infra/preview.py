"""Offline preview: run the Pulumi program under mocks and record what it would declare.

No Pulumi CLI, no credentials and no network are needed: `pulumi.runtime.set_mocks` swaps
the engine for `RecordingMocks`, which records every resource registration and answers
with plausible computed outputs (ids, self links, urls, emails, ARNs, IP addresses,
key material) for *any* resource type, so the GCP and AWS programs both run unchanged.

The same mocks back the Pulumi unit tests (`tests/infra/conftest.py`). What was declared
(`spotbench.preview.Declared`) and how it is shown live in `spotbench.preview`, which
imports no Pulumi; `spotbench preview` (the CLI) calls `preview()` here.

Contract of `RecordingMocks.new_resource` (what a program may rely on under mocks):
- outputs = the inputs, plus for every type, when not given as input: `id`
  (`<name>-id`), `name` (the resource name), `selfLink`, `url`, `uri`, `functionUrl`, `arn`,
  `spotInstanceId` (`<name>-instance-id`), a gen2 function's `serviceConfig.uri` (its
  run.app URL, `run_app_url`), `email`
  (`<accountId or name>@<project>.iam.gserviceaccount.com`), `address`, `privateIp`,
  `ipAddress` (a stable private IPv4 derived from the resource name), `publicKeyOpenssh`,
  `privateKeyOpenssh`, `privateKeyPem`, `publicKeyPem` (fake key text; a `tls` private
  key gets a real, fresh ED25519 pair, so a rendered boot can really log in with it);
- `call` (provider functions) answers `{}` except a few common data sources (zones,
  caller identity, AMI / SSM lookups, GCP project / service-account lookups).
"""

from __future__ import annotations

import base64
import contextlib
import gc
import hashlib
import os
import runpy
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulumi

from spotbench import PROJECT_ROOT, limits
from spotbench.clouds import get_provider
from spotbench.clouds.gcp import PREVIEW_PROJECT
from spotbench.preview import Declared

PROGRAM = PROJECT_ROOT / "infra" / "__main__.py"


def _unsecret(value: Any) -> tuple[Any, bool]:
    """Strip Pulumi's secret envelope (recursively); say whether one was found."""
    from pulumi.runtime import rpc

    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            inner, _ = _unsecret(value.get("value"))
            return inner, True
        found = False
        out = {}
        for k, v in value.items():
            out[k], s = _unsecret(v)
            found |= s
        return out, found
    if isinstance(value, list):
        pairs = [_unsecret(v) for v in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def _stable_ip(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.{digest[0]}.{digest[1]}.{2 + digest[2] % 250}"


TLS_PRIVATE_KEY = "tls:index/privateKey:PrivateKey"


def _ed25519_pair() -> dict[str, str]:
    """A real ED25519 key pair in the shapes pulumi_tls outputs (OpenSSH + PEM)."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pub = key.public_key()
    return {
        "privateKeyOpenssh": key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH,
                                               ser.NoEncryption()).decode(),
        "privateKeyPem": key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8,
                                           ser.NoEncryption()).decode(),
        "publicKeyOpenssh": pub.public_bytes(ser.Encoding.OpenSSH,
                                             ser.PublicFormat.OpenSSH).decode() + "\n",
        "publicKeyPem": pub.public_bytes(ser.Encoding.PEM,
                                         ser.PublicFormat.SubjectPublicKeyInfo).decode(),
    }


def _computed(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    project = inputs.get("project") or PREVIEW_PROJECT
    service = typ.split(":")[1].split("/")[0] if ":" in typ else "resource"
    account = inputs.get("accountId") or name
    fake_key = f"FAKE-KEY-{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    return {
        "id": f"{name}-id",
        "name": name,
        "selfLink": f"https://www.googleapis.com/mock/{project}/{service}/{name}",
        "url": f"https://{name}.mock.invalid",
        "uri": f"https://{name}.mock.invalid",
        "functionUrl": f"https://{hashlib.sha256(name.encode()).hexdigest()[:32]}"
                       ".lambda-url.us-east-1.on.aws/",
        "arn": f"arn:aws:{service}:us-east-1:123456789012:{name}",
        "spotInstanceId": f"{name}-instance-id",
        "email": f"{account}@{project}.iam.gserviceaccount.com",
        "address": _stable_ip(name),
        "privateIp": _stable_ip(name),
        "ipAddress": _stable_ip(name),
        "publicKeyOpenssh": f"ssh-ed25519 {fake_key} spotbench",
        "privateKeyOpenssh": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{fake_key}\n-----END",
        "privateKeyPem": f"-----BEGIN PRIVATE KEY-----\n{fake_key}\n-----END",
        "publicKeyPem": f"-----BEGIN PUBLIC KEY-----\n{fake_key}\n-----END",
        **(_ed25519_pair() if typ == TLS_PRIVATE_KEY else {}),
        **(_random_id(inputs) if typ == RANDOM_ID else {}),
    }


RANDOM_ID = "random:index/randomId:RandomId"
GCF2_FUNCTION = "gcp:cloudfunctionsv2/function:Function"


def run_app_url(name: str, project: str, region: str) -> str:
    """The mocks' `serviceConfig.uri` of a gen2 function: its Cloud Run service's run.app URL
    in Google's deterministic form `https://SERVICE-PROJECT_NUMBER.REGION.run.app` (the
    number a stable stand-in for the project's)."""
    number = int(hashlib.sha256(project.encode()).hexdigest()[:8], 16)
    return f"https://{name}-{number}.{region}.run.app"


def _service_config(typ: str, raw: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """A gen2 function's `serviceConfig` output: its inputs plus the service's `uri`."""
    if typ != GCF2_FUNCTION or not isinstance(raw.get("serviceConfig"), dict):
        return {}
    uri = run_app_url(str(plain.get("name")), str(plain.get("project") or PREVIEW_PROJECT),
                      str(plain.get("location")))
    return {"serviceConfig": {**raw["serviceConfig"], "uri": uri}}


def _random_id(inputs: dict[str, Any]) -> dict[str, str]:
    """pulumi_random's RandomId: new random bytes each time the resource is created (kept
    in the stack's state by later updates, which a mock run never has)."""
    raw = os.urandom(int(inputs.get("byteLength") or 8))
    b64 = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return {"hex": raw.hex(), "b64Url": b64, "b64Std": base64.b64encode(raw).decode(),
            "dec": str(int.from_bytes(raw, "big"))}


_CALLS: dict[str, dict[str, Any]] = {
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/mock",
        "userId": "MOCK",
    },
    "aws:index/getRegion:getRegion": {"name": "us-east-1", "region": "us-east-1"},
    "aws:index/getAvailabilityZones:getAvailabilityZones": {
        "names": ["us-east-1a", "us-east-1b", "us-east-1c"],
        "zoneIds": ["use1-az1", "use1-az2", "use1-az3"],
    },
    "aws:ec2/getAmi:getAmi": {"id": "ami-0mock", "imageId": "ami-0mock"},
    "aws:ssm/getParameter:getParameter": {"value": "ami-0mock", "type": "String"},
    "gcp:organizations/getProject:getProject": {"projectId": PREVIEW_PROJECT, "number": "1"},
}


class RecordingMocks(pulumi.runtime.Mocks):
    """Generic Pulumi mocks that record registrations (see module docstring)."""

    def __init__(self) -> None:
        self.declared: list[Declared] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        # token → its answer, in place of the generic one (the boot lab's AMIs: tests/fidelity/amis.py)
        self.answers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}

    def reset(self) -> None:
        self.declared.clear()
        self.calls.clear()

    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        raw = dict(args.inputs)
        plain: dict[str, Any] = {}
        secrets = set()
        for key, value in raw.items():
            plain[key], secret = _unsecret(value)
            if secret:
                secrets.add(key)
        self.declared.append(
            Declared(args.typ, args.name, plain, bool(args.custom), frozenset(secrets))
        )
        outputs = {**_computed(args.typ, args.name, plain), **raw,
                   **_service_config(args.typ, raw, plain)}
        rid = plain.get("id") if isinstance(plain.get("id"), str) else f"{args.name}-id"
        return rid, outputs

    def call(self, args: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, dict(args.args)))
        answer = self.answers.get(args.token)
        return (answer(dict(args.args)) if answer else dict(_CALLS.get(args.token, {}))), []

    # ---- queries used by tests and the preview table --------------------------------
    def of_type(self, typ: str) -> list[Declared]:
        return [d for d in self.declared if d.type == typ]

    def one(self, typ: str, name_suffix: str = "") -> Declared:
        found = [d for d in self.of_type(typ) if d.name.endswith(name_suffix)]
        if len(found) != 1:
            names = [d.name for d in self.of_type(typ)]
            raise AssertionError(f"expected one {typ} ending {name_suffix!r}, got {names}")
        return found[0]


_MOCKED = False  # set by install(): the program runs under RecordingMocks, nothing deploys


def install(mocks: RecordingMocks, *, stack: str = "preview") -> None:
    global _MOCKED
    pulumi.runtime.set_mocks(mocks, project="spotbench", stack=stack, preview=False)
    _MOCKED = True


def mocked() -> bool:
    """Whether the program runs under `RecordingMocks` (offline preview, the Pulumi tests):
    nothing it declares is deployed, so what only a deploy needs (the Lambda layer's pip
    build) is skipped."""
    return _MOCKED


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, back as it was after.

    A declaration allocates millions of long-lived objects (each resource's outputs,
    futures and tasks) and frees few: the collector's full passes re-walk the whole
    growing heap, which made declaring grow faster than linearly — 41% of a 1,000-VM GCP
    declaration's CPU time (bench/infra_scale.py, 2026-11-25). Without it peak memory grew
    8% (605 → 653 MB); the cycles left are collected once the block ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_declarations(fn: Callable[[], Any]) -> None:
    """Run `fn` as a Pulumi program under the installed mocks and wait for every RPC
    (with the cyclic collector paused: `cyclic_gc_paused`).

    Errors raised by the program (e.g. `pulumi.RunError` for a bad spec) propagate.
    """
    with cyclic_gc_paused():
        pulumi.runtime.test(fn)()


def preview(
    spec_path: Path,
    *,
    cloud: str | None = None,
    project: str | None = None,
    region: str | None = None,
) -> list[Declared]:
    """Run `infra/__main__.py` under mocks with `spotbench:spec = spec_path`. What it would
    send past a cloud's limit (a boot document, an environment, a condition, a name: each
    measured where the program renders it) raises `LimitsExceeded`, naming every one."""
    from spotbench.spec import load_spec

    spec = load_spec(spec_path)  # fails early with the CLI's own message
    if cloud and spec.cloud != cloud:
        raise ValueError(
            f"{spec_path} is a {spec.cloud!r} spec but --cloud {cloud} was given; "
            f"set `cloud: {cloud}` in the spec or drop --cloud"
        )
    mocks = RecordingMocks()
    install(mocks)
    config = {"spotbench:spec": str(Path(spec_path).resolve())}
    config |= get_provider(spec.cloud).stack_config(spec, project, region)
    pulumi.runtime.set_all_config(config)
    if str(PROJECT_ROOT) not in sys.path:  # `infra` is a top-level package of the checkout
        sys.path.insert(0, str(PROJECT_ROOT))
    try:
        with limits.collecting() as over:  # every field past a limit, not only the first
            run_declarations(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"))
    finally:
        pulumi.runtime.set_all_config({})
    if over:
        raise LimitsExceeded(over)
    return list(mocks.declared)


class LimitsExceeded(ValueError):
    """What the program would send past the clouds' limits (`spotbench.limits`), every one."""

    SHOWN = 3  # fields shown per limit (500 groups past one limit: 3 lines and a count)

    def __init__(self, errors: list[limits.LimitError]):
        self.errors = list(errors)
        lines: list[str] = []
        for key in dict.fromkeys(e.limit.key for e in self.errors):
            same = [e for e in self.errors if e.limit.key == key]
            lines += [str(e) for e in same[: self.SHOWN]]
            if len(same) > self.SHOWN:
                lines.append(f"… and {len(same) - self.SHOWN} more past the same limit ({key})")
        super().__init__("\n".join(lines))
