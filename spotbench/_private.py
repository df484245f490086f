"""Files only their owner may read: local state folders 0700, files 0600, created so.

A local sweep's state (`.spotbench/<sweep>/`) holds what every credential derives from
(the secret, member tokens in the instance table, logs). Each file is created with its
final mode (`os.open(..., 0o600)`, folders under umask 077), never chmod-ed afterwards, so
there is no moment another local user could open it. SQLite gives its `-wal`/`-shm` files
the mode of the database file, so a database created here 0600 keeps them 0600 too.

A private folder is only as private as the folders above it: whoever may write one of them
can rename ours away and put theirs (with their `cloud.db`, whose instances are commands we
run) in its place, or a symlink. `trusted_path` checks every component from `/` down —
no symlink, owned by you or root, not writable by others unless sticky (like /tmp) — and
runs at creation and again before each open of a state file (`LocalState`, the local
cloud's database), so a swap after the first check is refused too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DIR_MODE, FILE_MODE = 0o700, 0o600


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


class UntrustedPath(PermissionError):
    """A folder on the way to a state folder could be swapped by another user."""


def trusted_path(path: Path | str) -> Path:
    """`path` (absolute) if no other user can replace it or any folder above it; else raise
    `UntrustedPath` naming the component and what to do. Components not created yet end
    the walk (they will be made by us, 0700, inside a checked folder)."""
    path = Path(os.path.abspath(path))
    uid = os.getuid()
    current = Path(path.anchor)
    for part in (None, *path.parts[1:]):
        current = current if part is None else current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            raise UntrustedPath(f"{current} is a symbolic link on the way to the state folder "
                                f"{path}: point SPOTBENCH_STATE_ROOT at a real folder of yours")
        if st.st_uid not in (uid, 0):
            raise UntrustedPath(f"{current} belongs to uid {st.st_uid} (not you, uid {uid}, nor "
                                f"root): that user could swap the state folder {path}; use a "
                                "state folder of your own (SPOTBENCH_STATE_ROOT)")
        if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UntrustedPath(f"{current} is writable by other users (mode "
                                f"{stat.S_IMODE(st.st_mode):o}, no sticky bit): they could swap the "
                                f"state folder {path}; chmod go-w it or use another folder")
    return path


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) 0700, after checking every folder above it
    (`trusted_path`). A folder an older spotbench left open to others is closed (it is
    ours: refuse one another user owns)."""
    trusted_path(path)
    with _umask(0o077):
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    trusted_path(path)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
                              "use a state folder of your own (SPOTBENCH_STATE_ROOT)")
    if st.st_mode & 0o077:
        os.chmod(path, DIR_MODE)
    return path


def open_private_append(path: Path):
    """`open(path, "ab")`, a new file created 0600."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE), "ab")


def write_private(path: Path, text: str) -> None:
    """Replace `path` atomically with `text`, 0600 from the start."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    tmp.replace(path)
