"""Safety of Optuna searches: what defines a study, stale trials, storage checks, worker processes.

* A study records everything that defines it (device, law, budgets, precision, workload, preset,
  space, objectives) as the user attribute ``rooflaw.definition``; resuming it with another
  definition is refused, and the default study name carries a hash of the definition.
* Every trial records its owner (``host:pid``) and a heartbeat (UNIX time, refreshed every
  :data:`HEARTBEAT_S` by a thread of the worker while the trial runs). When the study is opened again a
  RUNNING trial is marked FAIL if its owner process on this host is gone (killed), or -- whatever the host,
  since another machine's pid cannot be checked -- if its heartbeat is older than :data:`STALE_HEARTBEAT_S`
  (hosts sharing a PostgreSQL study are assumed to keep their clocks within a minute, e.g. by NTP).
* Worker processes die with their parent: ``PR_SET_PDEATHSIG`` (Linux) plus a watchdog thread that
  exits when the parent pid changes (every platform).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import ExternalError, Infeasible, RooflawError, bad

#: A RUNNING trial without an owner older than this (seconds) is stale.
STALE_UNOWNED_S = 60.0
#: Seconds between heartbeats of a running trial.
HEARTBEAT_S = 20.0
#: A RUNNING trial of another host (or a live-looking pid) whose last heartbeat is older than this is stale.
STALE_HEARTBEAT_S = 120.0


# ---- what defines a study -------------------------------------------------------------------------
def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))


def _hash(obj: Any) -> str:
    return hashlib.sha256(_canon(obj).encode()).hexdigest()[:16]


def study_definition(problem: Any, objectives: Sequence[str]) -> dict[str, Any]:
    """Everything that decides a trial's values and feasibility, JSON-ready."""
    law, dev = problem.law, problem.device
    return {
        "objectives": list(objectives),
        "space": problem.space.name,
        "space_dims": problem.space.to_dict(),  # the values, so a resume on an edited space names the dimension
        "space_hash": _hash(problem.space.to_dict()),
        "phase": problem.phase,
        "device": dev.id,
        "device_figures": dev.to_dict(),  # the figures, so a resume on a changed device names the field
        "device_hash": _hash(dev.to_dict()),
        "law": law.name,
        "law_expression": law.text(bound=True),
        "precision": problem.precision.name,
        "workload": problem.workload.to_dict(),
        "preset": problem.preset,
        "engine": problem.engine,
        "latency_budget": problem.latency_budget,
        "memory_budget": problem.memory_budget,
        "energy_budget": problem.energy_budget,
        "tokens": problem.tokens,
        "align": problem.align,
        # the kinds and settings added since, only when set, so that studies written before keep their fingerprint
        **{c.field: c.bound for c in problem.constraints if c.kind in ("tpot", "ttft", "throughput")},
        **({"confidence": problem.confidence} if problem.confidence is not None else {}),
    }


def fingerprint(definition: dict[str, Any]) -> str:
    """A short hash of a study definition (goes into the default study name)."""
    return _hash(definition)[:10]


def check_definition(study_name: str, have: dict[str, Any] | None, want: dict[str, Any]) -> None:
    """Refuse to resume a study recorded with another definition (names the first differing field)."""
    if not have:
        return
    if _canon(have.get("joint")) != _canon(want.get("joint")):  # joint dimensions: none on one side differs too
        got, this = (("joint " + _canon(d.get("joint"))) if d.get("joint") else "no joint dimensions"
                     for d in (have, want))  # fmt: skip
        raise RooflawError(
            f"study_name={study_name!r}: exists with {got:.160}; this search has {this:.160} "
            "(choose another --study-name, or omit it to get a study named for this problem)"
        )
    for key, value in want.items():
        if key in have and _canon(have[key]) != _canon(value):
            old = have[key]
            if isinstance(value, dict) and isinstance(old, dict):  # name the first field that differs
                sub = next(
                    k for k in sorted(set(value) | set(old), key=str) if _canon(old.get(k)) != _canon(value.get(k))
                )
                what = key.split("_")[0]
                raise RooflawError(
                    f"study_name={study_name!r}: exists with {what}.{sub}={old.get(sub)!r:.100}; this search has "
                    f"{what}.{sub}={value.get(sub)!r:.100} (its trials were priced under other figures: choose another "
                    "--study-name, or omit it to get a study named for this problem)"
                )
            raise RooflawError(
                f"study_name={study_name!r}: exists with {key} {have[key]!r:.120}; this search has {value!r:.120} "
                "(choose another --study-name, or omit it to get a study named for this problem)"
            )


# ---- stale trials -----------------------------------------------------------------------------------
def owner_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host. A zombie (dead, not yet reaped: an orphaned worker whose new
    parent does not reap it) is dead -- ``kill(pid, 0)`` alone would call it alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no procfs (macOS): kill(pid, 0) is all there is
        return True


def _last_beat(t: Any) -> float | None:
    """UNIX time of a trial's last heartbeat (its start time for trials that have none), or None."""
    hb = t.user_attrs.get("heartbeat")
    if isinstance(hb, (int, float)) and not isinstance(hb, bool):
        return float(hb)
    return t.datetime_start.timestamp() if t.datetime_start is not None else None


def is_stale(t: Any, host: str, now: float) -> bool:
    """Whether RUNNING trial ``t`` has no live owner: its owner on this host is dead, or its heartbeat
    (any host) is older than :data:`STALE_HEARTBEAT_S`; untagged trials after :data:`STALE_UNOWNED_S`."""
    owner = t.user_attrs.get("owner")
    last = _last_beat(t)
    if not owner:
        return last is not None and now - last > STALE_UNOWNED_S
    h, _, pid = str(owner).rpartition(":")
    if h == host and pid.isdigit():
        return not _alive(int(pid))
    return last is not None and now - last > STALE_HEARTBEAT_S


def fail_stale_running(study: Any) -> int:
    """Mark FAIL the RUNNING trials :func:`is_stale` finds (killed here, or silent elsewhere); returns how many.
    Trials of live processes on this host, or with a recent heartbeat on another, are left alone."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    now = time.time()
    n = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_stale(t, host, now):
            try:
                study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
                n += 1
            except Exception:  # noqa: BLE001 - finished meanwhile by its owner
                pass
    return n


class Heartbeat:
    """Tags each trial with its owner and beats its ``heartbeat`` user attribute every :data:`HEARTBEAT_S`
    from a daemon thread while it runs (so another host's resume can tell a live trial from a dead one).

    Use ``with Heartbeat(storage) as hb:`` and ``hb.start(trial)`` / ``hb.finish(lambda: study.tell(...))``.
    """

    def __init__(self, storage: Any, interval: float | None = None) -> None:
        self.storage = storage
        self.interval = HEARTBEAT_S if interval is None else interval
        self.lock = threading.Lock()
        self.trial_id: int | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rooflaw-trial-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        with self.lock:
            self.trial_id = None

    def start(self, trial: Any) -> None:
        trial.set_user_attr("owner", owner_tag())
        trial.set_user_attr("heartbeat", time.time())
        with self.lock:
            self.trial_id = trial._trial_id

    def finish(self, tell: Callable[[], Any]) -> Any:
        """Stop beating for the current trial, then run ``tell`` (no beat can land on a finished trial)."""
        with self.lock:
            self.trial_id = None
            return tell()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            with self.lock:
                if self.trial_id is None:
                    continue
                with contextlib.suppress(Exception):  # a missed beat only shortens the trial's grace
                    self.storage.set_trial_user_attr(self.trial_id, "heartbeat", time.time())


# ---- storage checks ---------------------------------------------------------------------------------
def storage_path(url: str | None) -> Path | None:
    """The local file behind a storage URL (SQLite or journal), or None."""
    if not url:
        return None
    if url.startswith("journal://") or url.endswith((".log", ".journal")):
        path = url[len("journal://") :] if url.startswith("journal://") else url
        return Path(path[1:] if path.startswith("//") else path)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :].split("?", 1)[0]
        return None if path in ("", ":memory:") else Path(path)
    return None


def is_memory_storage(url: str | None) -> bool:
    """True for storages that live inside one process (other processes cannot see them)."""
    if url is None:
        return False
    u = url.strip().lower()
    in_memory = u.rstrip("/") in ("sqlite:", "sqlite:/") or ":memory:" in u or "mode=memory" in u
    return u.startswith("sqlite") and in_memory


def check_out_not_storage(out: Any, url: str | None) -> None:
    """Refuse an output file that is the study's own storage file (writing it would destroy the study)."""
    sp = storage_path(url)
    if out is None or sp is None:
        return
    if Path(str(out)).resolve() == sp.resolve():
        raise bad("out", str(out), "is the study's storage file; writing it would destroy every trial")


# ---- worker processes -------------------------------------------------------------------------------
def _set_pdeathsig() -> None:
    """PR_SET_PDEATHSIG(SIGTERM): the kernel signals this process when its parent dies (Linux).
    Until a worker installs its handler SIGTERM kills at once; after, the worker fails its running
    trial (releasing storage locks) and exits; the watchdog kills it if that takes over 3 s."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001 - the watchdog still covers it
            pass


def die_with_parent(parent_pid: int) -> None:
    """Make this process exit when ``parent_pid`` dies: PR_SET_PDEATHSIG(SIGKILL) on Linux, and a
    watchdog thread that notices the parent pid changing (a re-parented orphan, every platform)."""
    _set_pdeathsig()
    if os.getppid() != parent_pid:  # the parent died before the line above ran
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.25)
        import signal

        os.kill(os.getpid(), signal.SIGTERM)  # a clean stop first (fails the running trial) ...
        time.sleep(3.0)
        os._exit(1)  # ... then no matter what

    threading.Thread(target=watch, name="rooflaw-parent-watchdog", daemon=True).start()


_ERRORS = {"Infeasible": Infeasible, "ExternalError": ExternalError, "RooflawError": RooflawError}


def _child_main() -> None:
    """Body of a worker process: ``fn(*args)`` read from stdin (cloudpickle), the outcome written to
    the original stdout; anything the work prints goes to stderr (captured by the parent)."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    die_with_parent(int(sys.argv[1]))
    import cloudpickle

    result_pipe = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        fn, args = cloudpickle.loads(sys.stdin.buffer.read())
        outcome: tuple = ("ok", fn(*args))
    except KeyboardInterrupt:
        outcome = ("interrupted", None)
    except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent as one line
        name = next((n for n, c in _ERRORS.items() if type(e) is c), None)
        outcome = ("error", (name, str(e) or type(e).__name__, type(e).__name__))
    result_pipe.write(cloudpickle.dumps(outcome))
    result_pipe.close()


def run_workers(fn: Callable[..., Any], arg_lists: Sequence[tuple]) -> list[Any]:
    """Run ``fn(*args)`` for each ``args`` in its own process and return the results in order.

    Each worker is started with PR_SET_PDEATHSIG set before it runs any Python (so a ``kill -9`` of
    this process takes every worker with it at once) and a parent watchdog; it imports rooflaw from
    where this process did, never from the working directory. A worker's rooflaw error is re-raised
    here with its message; a worker that dies raises :class:`ExternalError`.
    """
    import subprocess
    import tempfile

    import cloudpickle

    import rooflaw

    home = str(Path(rooflaw.__file__).resolve().parent.parent)
    code = (
        "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
        f"sys.path.insert(0, {home!r}); "
        "from rooflaw.solver.search.safety import _child_main; _child_main()"
    )
    parent = os.getpid()

    def pre() -> None:  # runs in the child between fork and exec; the death signal survives exec
        _set_pdeathsig()
        if os.getppid() != parent:
            os._exit(1)

    procs: list[tuple[subprocess.Popen, Any]] = []
    out: dict[int, Any] = {}
    try:
        for args in arg_lists:
            err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
            p = subprocess.Popen(
                [sys.executable, "-c", code, str(parent)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                preexec_fn=pre if os.name == "posix" else None,  # noqa: PLW1509
            )  # fmt: skip
            procs.append((p, err))
            assert p.stdin is not None
            p.stdin.write(cloudpickle.dumps((fn, args)))
            p.stdin.close()
        while len(out) < len(procs):
            time.sleep(0.1)
            for i, (p, err) in enumerate(procs):
                if i in out or p.poll() is None:
                    continue
                data = p.stdout.read() if p.stdout is not None else b""
                if not data:
                    err.seek(0)
                    tail = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
                    last = f": {tail[-1][:200]}" if tail else ""
                    raise ExternalError(f"search worker {i} died (exit code {p.returncode}){last}")
                status, value = cloudpickle.loads(data)
                if status == "ok":
                    out[i] = value
                elif status == "interrupted":
                    raise KeyboardInterrupt
                else:
                    name, msg, tname = value
                    if name is not None:
                        raise _ERRORS[name](msg)
                    raise ExternalError(f"search worker {i} failed: {tname}: {msg}")
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.terminate()  # SIGTERM: the worker fails its running trial and exits
        for p, err in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
            for f in (p.stdout, err):
                if f is not None:
                    f.close()
    return [out[i] for i in range(len(procs))]
