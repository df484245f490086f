"""Files only their owner may read: local state folders 0700, files 0600, created so.

A local sweep's state (`.spotbench/<sweep>/`) holds what every credential derives from
(the secret, member tokens in the instance table, logs). Each file is created with its
final mode (`os.open(..., 0o600)`, folders under umask 077), never chmod-ed afterwards, so
there is no moment another local user could open it. SQLite gives its `-wal`/`-shm` files
the mode of the database file, so a database created here 0600 keeps them 0600 too.
"""

from __future__ import annotations

import os
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


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) 0700. A folder an older spotbench left open to
    others is closed (it is ours: refuse one another user owns)."""
    with _umask(0o077):
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
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
