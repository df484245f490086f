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

MIN_OVERLAP = 32  # characters two windows must share to count as the same output (EC2)


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
    some output may be missing between the two. Both are tails of one stream: the text
    they share is the longest end of `previous` that begins `window` (the prefix function
    of `window` + a separator + `previous`, Knuth–Morris–Pratt); an overlap shorter than
    `MIN_OVERLAP` characters (and than `previous`) is taken for chance, not for the same
    output: the window is new, and output may be missing before it."""
    if not previous:
        return window, False
    joined = window + "\0" + previous
    border = [0] * len(joined)
    for i in range(1, len(joined)):
        k = border[i - 1]
        while k and joined[i] != joined[k]:
            k = border[k - 1]
        border[i] = k + (joined[i] == joined[k])
    shared = min(border[-1], len(window))
    if shared < min(MIN_OVERLAP, len(previous)):
        return window, True
    return window[shared:], False


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
