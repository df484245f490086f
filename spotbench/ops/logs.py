"""`spotbench logs SPEC GROUP [--follow]`: what a group's members print, as it comes.

Each cloud's driver reads an instance's console (`console_output`, spotbench.clouds.base's
`ConsoleOutput`): the local cloud its member's log file, GCE serial port 1
(`instances.getSerialPortOutput` from a byte offset; the last 1 MB is kept), EC2
`GetConsoleOutput` (its latest 64 KB, no offsets: new text is what follows the last text
seen). Following stops once every member of the group is off (after a last read), or on
Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spotbench.clouds.base import ACTIVE, Cloud, ConsoleOutput, Instance
from spotbench.plan import RunGroup

OVERLAP = 2048  # characters of the last window looked for in the next one (EC2)


class NoLogs(LookupError):
    """The group's logs cannot be read; the message says why and what to do."""


def group_of(groups: list[RunGroup], group_id: str) -> RunGroup:
    found = next((g for g in groups if g.id == group_id), None)
    if found is None:
        shown = ", ".join(g.id for g in groups[:10]) + (" …" if len(groups) > 10 else "")
        raise NoLogs(f"no group {group_id!r} in this sweep: its groups are {shown} (spotbench plan SPEC)")
    return found


def new_text(previous: str, window: str) -> tuple[str, bool]:
    """What `window` (a cloud's latest output) adds to the `previous` window, and whether
    some output may be missing between the two (the last text seen is no longer in it)."""
    if not previous:
        return window, False
    if window.startswith(previous):
        return window[len(previous):], False
    tail = previous[-OVERLAP:]
    at = window.rfind(tail)
    if at >= 0:
        return window[at + len(tail):], False
    return window, True


@dataclass
class Follower:
    """Reads each member's console from where the last read ended."""

    cloud: Cloud
    offsets: dict[str, int] = field(default_factory=dict)
    windows: dict[str, str] = field(default_factory=dict)

    def read(self, instance: Instance) -> str:
        reader: Callable[..., ConsoleOutput] | None = getattr(self.cloud, "console_output", None)
        if reader is None:
            raise NoLogs(f"the {self.cloud.name} driver cannot read an instance's console")
        asked = self.offsets.get(instance.name, 0)
        out = reader(instance, asked)
        if out.window:
            text, gap = new_text(self.windows.get(instance.name, ""), out.text)
            self.windows[instance.name] = out.text
            return ("[… earlier output no longer kept by the cloud]\n" if gap else "") + text
        self.offsets[instance.name] = out.next
        lost = out.start - asked
        return (f"[… {lost} bytes no longer kept by the cloud]\n" if lost > 0 else "") + out.text


def tail(cloud: Cloud, group: RunGroup, emit: Callable[[str, str], None], *, follow: bool = False,
         interval_s: float = 2.0, sleep: Callable[[float], None] = time.sleep,
         max_polls: int | None = None) -> int:
    """Emit (member, text) of every member's console; with `follow`, keep reading every
    `interval_s` until the whole group is off. Returns how many reads were made."""
    follower = Follower(cloud)
    polls = 0
    while True:
        members = sorted(cloud.query(group.labels), key=lambda i: i.member)
        if not members and polls == 0:
            raise NoLogs(f"group {group.id} has no instance on {cloud.name} (not deployed yet? "
                         "`spotbench run SPEC` locally, `pulumi up` on a cloud)")
        for inst in members:
            text = follower.read(inst)
            if text:
                emit(inst.member, text)
        polls += 1
        running = any(i.state in ACTIVE for i in members)
        if not follow or not running or (max_polls is not None and polls >= max_polls):
            return polls
        sleep(interval_s)
