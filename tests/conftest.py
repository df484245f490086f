"""What every test session shares: a temporary folder of its own, the shipped price tables, and the rule that keeps a
module's shared fixtures on one pytest-xdist worker (`make test` runs `-n N --dist
loadgroup`; tests/parallel.py has the rule and the scheduler).

TMPDIR: each session (each xdist worker, the controller, a plain `pytest` run) gets a fresh
folder for `tempfile`, inherited by the processes it starts. Names made under `$TMPDIR`
from a sweep's or member's name (the OSU exec agent's key, `$TMPDIR/spotbench-<uid>/
<member>.agent-key`) then never meet another worker's, or another checkout's test run on
the same machine. Mode 1777, like /tmp: the boot lab's image user and the `setpriv`
attackers create and traverse folders in it as they would in /tmp. pytest's own
`tmp_path` folders stay under the machine's temporary folder (/tmp/pytest-of-<user>).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests import parallel
from tests.moto_server import MotoServer

_TMPDIR = pytest.StashKey[str]()


def _own_tmpdir() -> str:
    root = os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = tempfile.mkdtemp(prefix=f"sbt-{worker}-", dir=root)  # short: unix socket paths
    os.chmod(base, 0o1777)
    os.environ["TMPDIR"] = base
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    assert tempfile.gettempdir() == base
    return base


def pytest_configure(config: pytest.Config) -> None:
    base = config.stash[_TMPDIR] = _own_tmpdir()
    if "PYTEST_XDIST_WORKER" in os.environ:
        # xdist starts its workers with COLUMNS=80 LINES=24; Rich's console (made when
        # spotbench.cli is imported) would freeze that width and ignore the COLUMNS a test
        # sets: run the workers with the environment a serial run has
        for name in ("COLUMNS", "LINES"):
            if os.environ.get(name) == {"COLUMNS": "80", "LINES": "24"}[name]:
                del os.environ[name]
    if "PYTEST_XDIST_WORKER" not in os.environ:  # the controller (or a serial run)
        groups = os.path.join(base, "xdist-groups")
        os.mkdir(groups)
        os.environ[parallel.GROUPS_ENV] = groups  # the workers it starts inherit it


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    # here, not at unconfigure: an xdist worker is ended soon after its session finishes
    base = session.config.stash.get(_TMPDIR, None)
    if base:
        shutil.rmtree(base, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parallel.mark_groups(config, items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of pytest-xdist (dev extra)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    return parallel.make_scheduler(config, log)


@pytest.fixture(autouse=True)
def _no_refreshed_prices(tmp_path_factory, monkeypatch):
    """Price with the shipped tables unless a test refreshes its own: a table the machine's
    user refreshed (`spotbench prices`, ~/.cache/spotbench/prices) never changes a figure."""
    monkeypatch.setenv("SPOTBENCH_PRICES_DIR", str(tmp_path_factory.mktemp("prices") / "none"))
    # likewise the machine types `spotbench prices` lists (spotbench.catalog.live): the shipped
    # catalog judges specs unless a test refreshes its own
    monkeypatch.setenv("SPOTBENCH_CATALOG_DIR", str(tmp_path_factory.mktemp("catalog") / "none"))


@pytest.fixture(autouse=True)
def _no_run_from_an_earlier_test(monkeypatch):
    """`SPOTBENCH_RUN` as a shell has it (unset): code under test sets it in-process for the
    members it runs (workloads.common), and on a shared xdist worker it would otherwise
    reach the next test."""
    monkeypatch.delenv("SPOTBENCH_RUN", raising=False)


@pytest.fixture(scope="module")
def moto_url():
    """A moto_server of the test module's own, on a free port of 127.0.0.1, stopped after
    the module (`MotoServer.fresh_account` empties it for each test that wants a new account)."""
    with MotoServer() as url:
        yield url

