"""Issue 28 (Reliability II), hangs: every network call has a connect/handshake deadline and a one-line error
naming the option, and Ctrl-C ends a wait at once. The servers here listen on 127.0.0.1 only, accept and never
answer (or answer garbage), and close within the test."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import default_sigint

from rooflaw import net
from rooflaw.errors import RooflawError

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def loopback_server(reply: bytes = b"", lifetime: float = 60.0):
    """A TCP server on 127.0.0.1 that accepts every connection and then sends ``reply`` (nothing: never answers);
    it closes when the block ends (or after ``lifetime`` seconds). Yields its port."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()
    conns: list[socket.socket] = []
    end = time.monotonic() + lifetime

    def serve() -> None:
        while not stop.is_set() and time.monotonic() < end:
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            conns.append(c)
            if reply:
                with contextlib.suppress(OSError):
                    c.sendall(reply)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        for c in conns:
            c.close()
        srv.close()


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setattr(net, "CONNECT_TIMEOUT_S", 2.0)
    return 2.0


def test_within_bounds_a_call_that_never_returns():
    t0 = time.monotonic()
    with pytest.raises(RooflawError, match=r"scheduler='x': the thing did not answer within 0.5 s"):
        net.within(lambda: time.sleep(30), 0.5, "scheduler", "x", "the thing")
    assert time.monotonic() - t0 < 2
    assert net.within(lambda: 42, 1, "f", "v", "w") == 42
    with pytest.raises(RooflawError, match=r"f='v': w failed \(ZeroDivisionError"):
        net.within(lambda: 1 / 0, 1, "f", "v", "w")


pytest.importorskip("distributed")


def test_a_dask_scheduler_that_never_answers(short_timeout):
    from rooflaw.solver.discrete.distributed import _probe, parse_scheduler

    with loopback_server() as port:
        sched = parse_scheduler(f"tcp://127.0.0.1:{port}")
        t0 = time.monotonic()
        with pytest.raises(RooflawError, match=rf"scheduler='tcp://127.0.0.1:{port}'.*(timeout|did not answer)"):
            _probe(sched)
        assert time.monotonic() - t0 < short_timeout + 6


def test_a_dask_scheduler_that_answers_garbage(short_timeout):
    from rooflaw.solver.discrete.distributed import _probe, parse_scheduler

    junk = b"\xff" * 8 + b"HTTP/1.1 200 OK\r\n\r\nnot dask" * 8
    with (
        loopback_server(junk) as port,
        pytest.raises(
            RooflawError, match=rf"scheduler='tcp://127.0.0.1:{port}': answered, but not as a Dask scheduler"
        ),
    ):
        _probe(parse_scheduler(f"tcp://127.0.0.1:{port}"))


def test_frontier_on_a_silent_scheduler_exits_2_naming_the_option(capsys, short_timeout):
    from tests.cli_helpers import run_cli

    with loopback_server() as port:
        code, _, err = run_cli(capsys, "frontier", "--device", "h100-sxm", "--space", "paper", "--n-jobs", "1",
                               "--backend", "numpy", "--scheduler", f"tcp://127.0.0.1:{port}")  # fmt: skip
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("rooflaw: error: scheduler=")


def test_a_postgresql_storage_that_never_answers(short_timeout):
    pytest.importorskip("psycopg2")
    from rooflaw.solver.search.storage import open_storage

    with loopback_server() as port:
        t0 = time.monotonic()
        with pytest.raises(RooflawError, match="storage=.*127.0.0.1"):
            open_storage(f"postgresql://u:p@127.0.0.1:{port}/db")
        assert time.monotonic() - t0 < 3 * short_timeout + 5


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
def test_ctrl_c_while_a_postgresql_storage_never_answers_ends_promptly():
    pytest.importorskip("psycopg2")
    with loopback_server() as port:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen(
            [sys.executable, "-m", "rooflaw", "search", "--device", "h100-sxm", "--space", "paper", "--n-trials", "2",
             "--storage", f"postgresql://u:p@127.0.0.1:{port}/db"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env,
            preexec_fn=default_sigint,
        )  # fmt: skip
        try:
            time.sleep(4.0)  # past the imports, into the connection
            os.killpg(p.pid, signal.SIGINT)
            t0 = time.monotonic()
            _, err = p.communicate(timeout=20)
            took = time.monotonic() - t0
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode in (130, 2), err  # 2: it had already given up (connect timeout) when Ctrl-C came
    assert took < 5, took
    assert err.decode().count("\n") == 1, err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes read-only directories")
def test_sqlite_storage_in_a_read_only_directory_names_it(tmp_path):
    from rooflaw.solver.search.storage import open_storage

    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        with pytest.raises(RooflawError, match=f"directory '{d}' is not writable"):
            open_storage(f"sqlite:///{d}/study.db")
    finally:
        d.chmod(0o755)


def test_sqlite_storage_in_a_missing_directory_names_it(tmp_path):
    from rooflaw.solver.search.storage import open_storage

    with pytest.raises(RooflawError, match=f"directory '{tmp_path}/missing' does not exist"):
        open_storage(f"sqlite:///{tmp_path}/missing/study.db")


def test_a_lost_cluster_is_told_apart_from_the_tasks_own_errors():
    """A scheduler killed mid-scan cancels the futures (exit 4, one line naming --scheduler); an error the task
    itself raised keeps its meaning (bad input 2, a bug 1)."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    from rooflaw.solver.discrete.distributed import _lost

    assert _lost(FutureCancelledError("k", "scheduler-connection-lost"))
    assert _lost(CommClosedError("in tcp: ConnectionRefusedError"))
    assert _lost(KilledWorker("k", "tcp://127.0.0.1:1", 3))
    assert not _lost(RooflawError("layers=-1: must be positive"))
    assert not _lost(ZeroDivisionError("a bug"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("scheme", ["journal://", "sqlite:///"])
def test_a_storage_file_that_is_a_fifo_is_refused(tmp_path, scheme):
    from rooflaw.solver.search.storage import open_storage

    fifo = tmp_path / "study.log"
    os.mkfifo(fifo)
    hung, _ = net_thread(lambda: pytest.raises(RooflawError, open_storage, f"{scheme}{fifo}"))
    assert not hung


def net_thread(fn, seconds: float = 10.0):
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
    t.start()
    t.join(seconds)
    return t.is_alive(), box.get("v")
