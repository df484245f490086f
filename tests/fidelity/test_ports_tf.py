"""Ports proof for TF: during a real parameter-server run (chief, ps, worker as local
processes), every port a member listens on (psutil, its whole process tree) is one the rules
`spotbench preview` shows for gcp and aws let the other members of its group reach."""

from __future__ import annotations

import threading

import psutil
import pytest

from spotbench.results import ResultStore
from tests.fidelity import boot
from tests.fidelity import rules as fw
from tests.infra.conftest import MOCKS
from tests.workloads.tf_mnist.harness import Cluster, DoneServer, group_for

pytestmark = pytest.mark.fidelity
TINY = {"steps": 20, "batch_size": 16, "dataset": "synthetic", "warmup_steps": 5}


def _listening(pid: int) -> set[tuple[str, str, int]]:
    out = set()
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return out
    for p in procs:
        try:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN or (c.type == 2 and not c.raddr):
                    out.add(("tcp" if c.type == 1 else "udp", c.laddr.ip, c.laddr.port))
        except psutil.Error:
            pass
    return out


@pytest.fixture(scope="module")
def tf_ports(tmp_path_factory) -> dict[str, set]:
    tmp = tmp_path_factory.mktemp("tfports")
    url = f"file://{tmp}/results"
    ResultStore(url).open_run()
    group = group_for({"strategy": "parameter_server", "workers": 1, "ps": 1, **TINY})
    seen: dict[str, set] = {}
    with DoneServer() as done:
        cluster = Cluster(group, url, done.url, tmp / "logs")
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.1):
                for name, proc in cluster.procs.items():
                    seen.setdefault(name, set()).update(_listening(proc.pid))

        try:
            cluster.start()
            threading.Thread(target=sample, daemon=True).start()
            assert cluster.wait(cluster.proc("chief"), 240) == 0, cluster.log_text()
        finally:
            stop.set()
            cluster.stop()
        assert done.calls == [{"group": group.id}]
    service = {name: ctx.me.port for name, ctx in cluster.contexts.items()}
    roles = {name: ctx.role for name, ctx in cluster.contexts.items()}
    return {"seen": seen, "service": service, "roles": roles}


@pytest.mark.parametrize("example", ["examples/gcp-tf.yaml", "examples/aws-tf-gpu.yaml"],
                         ids=["gcp", "aws"])
def test_every_port_tf_members_listen_on_is_allowed(tf_ports, example):
    rendered, rows = boot.render(example, MOCKS)
    hosts = fw.hosts(rows)
    group = next(iter(boot.groups(rendered).values()))
    by_role = {r.ctx.role: hosts[r.name] for r in group}
    cloud_port = group[0].ctx.me.port  # the TF server port every member uses on a cloud
    checked = 0
    for name, ports in tf_ports["seen"].items():
        dst = by_role[tf_ports["roles"][name]]
        for proto, _ip, port in ports:
            port = cloud_port if port == tf_ports["service"][name] else port
            for src in by_role.values():
                if src is not dst:
                    checked += 1
                    assert fw.allowed(rows, src, dst, proto, port), (
                        f"{tf_ports['roles'][name]} listens on {proto}/{port}; "
                        f"{src.name} may not reach it under {example}'s rules")
    assert checked >= 3, tf_ports
