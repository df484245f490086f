"""SSH access to a running group's members with fabric: run a command on all of them,
collect raw logs and tool output into the results store, or open a shell on one.

How members are reached (`AccessConfig.via`, CLI `--via`, env `SPOTBENCH_SSH_VIA`):

- `direct`  the member's IP (local runs, tests, a VPN into the sweep's network)
- `jump`    through a bastion (`--jump user@host[:port]`), ProxyJump-style, its host key
            checked against the same known_hosts
- a cloud's own way (its provider's `ssh_vias`: GCP's `iap`, AWS's `ssm`): the member's
            instance name as the host, reached through the ProxyCommand the provider builds
            (`Provider.ssh_proxy`, handed in as `AccessConfig.proxy` by `access_options`)

Host keys are checked against `known_hosts` (the keys the stack recorded, e.g. exported
from its outputs to `.spotbench/<sweep>/known_hosts`) with paramiko's RejectPolicy: an
unknown host is refused, a changed key is refused; nothing is ever auto-accepted or
written back. One unreachable member is reported; the others are still served.
"""

from __future__ import annotations

import io
import logging
import posixpath
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fabric import Config, Connection, ThreadingGroup
from fabric.exceptions import GroupException
from paramiko import RejectPolicy

from spotbench.clouds import Cloud
from spotbench.plan import RunGroup
from spotbench.results import ResultStore

log = logging.getLogger("spotbench.remote")

NEUTRAL_VIAS = ("direct", "jump")  # every cloud's; a cloud adds its own (`Provider.ssh_vias`)
DEFAULT_COLLECT_PATHS = ("/var/log/spotbench",)
MAX_COLLECT_BYTES = 64 << 20  # one file a member serves to `collect` (its words, its size)
MAX_COLLECT_FILES = 1000  # files per member


class TooLarge(OSError):
    """A collected file grew past MAX_COLLECT_BYTES while it was fetched."""


class _Capped(io.BytesIO):
    """A buffer that refuses to hold more than MAX_COLLECT_BYTES (the member's sftp server
    says the size, and may send more): the fetch stops there."""

    def write(self, data) -> int:  # noqa: ANN001 - bytes-like
        if self.tell() + len(data) > MAX_COLLECT_BYTES:
            raise TooLarge(f"larger than {MAX_COLLECT_BYTES} bytes")
        return super().write(data)


@dataclass(frozen=True)
class Target:
    member: str
    host: str  # IP, hostname, or (a cloud's proxy) the instance name / id
    port: int = 22
    zone: str | None = None  # where the cloud says the instance is (a proxy may need it)


@dataclass
class AccessConfig:
    known_hosts: Path
    user: str = "spotbench"
    key_filename: str | None = None
    via: str = "direct"  # direct | jump | one of the cloud's `ssh_vias` (with its `proxy`)
    port: int = 22
    jump: str | None = None  # user@host[:port], for via=jump
    proxy: Callable[[Target], str] | None = None  # the cloud's ProxyCommand (`access_options`)
    connect_timeout: float = 15.0

    @property
    def by_name(self) -> bool:
        """A cloud's own way reaches members by instance name, not IP."""
        return self.via not in NEUTRAL_VIAS

    def proxy_command(self, target: Target) -> str | None:
        if not self.by_name:
            return None
        if self.proxy is None:
            raise ValueError(f"via={self.via!r} needs its cloud's proxy: build the AccessConfig "
                             "with `**get_provider(spec.cloud).access_options(spec, via)`")
        return self.proxy(target)


@dataclass
class MemberOutcome:
    member: str
    ok: bool
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    error: str = ""  # why the member could not be served (unreachable, host key, …)
    files: list[str] = field(default_factory=list)  # collect: where each file was stored


class HostKeyError(RuntimeError):
    pass


def targets_for(group: RunGroup, cloud: Cloud | None, cfg: AccessConfig,
                overrides: Mapping[str, str] | None = None) -> list[Target]:
    """Each member's address: `overrides` (member → host[:port]) first, then the cloud's
    view (its IP; through a cloud's proxy its name). A member the cloud does not know is skipped."""
    overrides = dict(overrides or {})
    from spotbench.ops.status import member_name

    known = {member_name(i): i for i in cloud.query(group.labels)} if cloud is not None else {}
    out = []
    for m in group.members:
        if m.name in overrides:
            host, _, port = overrides[m.name].rpartition(":") if ":" in overrides[m.name] else (
                overrides[m.name], "", "")
            out.append(Target(m.name, host, int(port) if port else cfg.port))
        elif m.name in known:
            inst = known[m.name]
            host = inst.name if cfg.by_name else (inst.ip or inst.name)
            out.append(Target(m.name, host, cfg.port, zone=inst.zone))
    return out


def _checked(conn: Connection, cfg: AccessConfig) -> Connection:
    if not cfg.known_hosts.exists():
        raise HostKeyError(
            f"no known_hosts file at {cfg.known_hosts}: export the host keys the stack recorded "
            "there (refusing to trust keys on first use)"
        )
    conn.client.set_missing_host_key_policy(RejectPolicy())
    conn.client.get_host_keys().load(str(cfg.known_hosts))
    return conn


def connection(target: Target, cfg: AccessConfig) -> Connection:
    """A fabric Connection whose host key must already be in `cfg.known_hosts`."""
    config = Config(overrides={"load_ssh_configs": False})
    connect_kwargs = {
        "key_filename": cfg.key_filename,
        "allow_agent": cfg.key_filename is None,
        "look_for_keys": cfg.key_filename is None,
        "banner_timeout": cfg.connect_timeout,
        "auth_timeout": cfg.connect_timeout,
    }
    gateway: Connection | str | None = cfg.proxy_command(target)
    if cfg.via == "jump":
        if not cfg.jump:
            raise ValueError("via=jump needs a jump host (--jump user@host[:port])")
        gateway = _checked(Connection(cfg.jump, config=config, connect_kwargs=dict(connect_kwargs),
                                      connect_timeout=int(cfg.connect_timeout)), cfg)
    conn = Connection(
        target.host, user=cfg.user, port=target.port, config=config, gateway=gateway or False,
        connect_kwargs=connect_kwargs, connect_timeout=int(cfg.connect_timeout),
    )
    return _checked(conn, cfg)


def _explain(exc: BaseException) -> str:
    import paramiko

    if isinstance(exc, paramiko.BadHostKeyException):
        return f"host key mismatch (refused): {exc}"
    if isinstance(exc, paramiko.SSHException) and "known_hosts" in str(exc):
        return f"host key not in known_hosts (refused): {exc}"
    return f"{type(exc).__name__}: {exc}"


def run_on_group(targets: list[Target], cfg: AccessConfig, command: str) -> list[MemberOutcome]:
    """Run `command` on every member at once; each member's exit code and output, or why it
    could not be reached. A non-zero exit is reported, not raised."""
    endpoints = [(t.host, t.port) for t in targets]
    if len(set(endpoints)) != len(endpoints):
        raise ValueError(f"two members share one address: {endpoints}; give each its own host:port")
    conns = {target.member: connection(target, cfg) for target in targets}
    by_conn = {id(c): m for m, c in conns.items()}
    group = ThreadingGroup.from_connections(list(conns.values()))
    try:  # no stdin: a batch command must not wait for input
        results = group.run(command, hide=True, warn=True, in_stream=False)
    except GroupException as exc:  # some members failed; exc.result holds every member's
        results = exc.result
    outcomes = {}
    for conn, res in results.items():
        member = by_conn[id(conn)]
        if isinstance(res, BaseException):
            outcomes[member] = MemberOutcome(member, False, error=_explain(res))
        else:
            outcomes[member] = MemberOutcome(member, res.exited == 0, res.exited, res.stdout, res.stderr)
    for conn in conns.values():
        conn.close()
    return [outcomes[t.member] for t in targets]


def collect(targets: list[Target], cfg: AccessConfig, store: ResultStore, group: str,
            paths: tuple[str, ...] = DEFAULT_COLLECT_PATHS, run: str | None = None) -> list[MemberOutcome]:
    """Fetch every file under `paths` from every member into the results store, beside the
    group's records: `runs/<run>/<group>.<attempt>/collected/<member>/<path>`."""
    run = run or _run_for(store)
    attempt = max(1, len(store.group_files(run, group)))
    listing = " ".join(shlex.quote(p) for p in paths)
    found = run_on_group(targets, cfg, f"find {listing} -type f 2>/dev/null; true")
    conns = {t.member: t for t in targets}
    for outcome in found:
        if not outcome.ok:
            continue
        conn = connection(conns[outcome.member], cfg)
        refused: list[str] = []
        too_large: list[str] = []
        try:
            for remote in list(filter(None, outcome.stdout.splitlines()))[:MAX_COLLECT_FILES]:
                rel = collected_name(remote)
                if rel is None:  # the member's listing is not trusted: it may name anything
                    refused.append(remote)
                    continue
                buf = _Capped()
                try:
                    conn.get(remote, local=buf)
                except TooLarge:  # refused alone: the member chose its size
                    too_large.append(remote)
                    continue
                name = posixpath.join("collected", outcome.member, rel)
                outcome.files.append(store.write_raw(run, group, name, buf.getvalue(), attempt=attempt))
        except Exception as exc:  # noqa: BLE001 - report, keep what was fetched
            outcome.ok, outcome.error = False, f"while fetching files: {_explain(exc)}"
        finally:
            conn.close()
        if too_large:
            shown = ", ".join(repr(r) for r in too_large[:5]) + (" …" if len(too_large) > 5 else "")
            outcome.ok = False
            outcome.error = "; ".join(filter(None, [outcome.error, f"refused files larger than "
                                                    f"{MAX_COLLECT_BYTES} bytes: {shown}"]))
        if refused:
            log.warning("collect: %s listed %d unsafe file names; refused", outcome.member, len(refused))
            shown = ", ".join(repr(r) for r in refused[:5]) + (" …" if len(refused) > 5 else "")
            outcome.ok = False
            outcome.error = "; ".join(filter(None, [outcome.error, f"refused file names that would "
                                                    f"leave the results folder: {shown}"]))
    return found


def collected_name(remote: str) -> str | None:
    """Where a member's file goes under `collected/<member>/`: its path made relative and
    normalised, or None when it would climb out (`..`), is empty, or holds control bytes."""
    if not remote or any(ord(c) < 0x20 or c == "\x7f" for c in remote) or "\\" in remote:
        return None
    rel = posixpath.normpath(remote.lstrip("/"))
    if rel in (".", "..") or rel.startswith("../") or posixpath.isabs(rel):
        return None
    return rel


def _run_for(store: ResultStore) -> str:
    current = store.current_run()
    if current is not None:
        return current.run
    runs = store.runs()
    if runs:
        return runs[-1].run
    raise ValueError(f"no run in {store.url} yet: nothing to collect into (give --run)")


def open_shell(target: Target, cfg: AccessConfig) -> int:
    """An interactive shell on one member; returns its exit code."""
    with connection(target, cfg) as conn:
        return conn.shell().exited
