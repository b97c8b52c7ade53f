"""Recording engine events into a dynscope SQLite database.

    dynscope.record("run.db")        # or DYNSCOPE_DB=run.db, or python -m dynscope run --db
    ...                              # compiles, recompiles, breaks, guard failures land in SQL
    dynscope.stop_recording()        # flush and close (also done at exit)

The engine queues events in memory and a writer thread (C, store/) batches
them into SQLite; the program is never blocked or broken by recording.
Cache-entry counters (hits, guard time) are snapshotted every
`snapshot_interval` seconds and at stop.  Each process writes its own `runs`
row; a forked child (multiprocessing) opens its own after the fork.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

from . import _C

__all__ = ["record", "stop_recording", "recording_path"]

_lock = threading.Lock()
_snapshotter: "_Snapshotter | None" = None
_interval = 0.5
_hooks_installed = False


class _Snapshotter(threading.Thread):
    """Queues the changed cache-entry counters every `interval` seconds."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="dynscope-snapshots", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            _C.record_snapshot()


def recording_path() -> str | None:
    """The database being recorded to, or None."""
    return _C.record_path()


def record(path, *, snapshot_interval: float = 0.5) -> int:
    """Start recording to the dynscope database at `path` (created 0600).

    Returns the run id of this process's `runs` row.  Raises OSError with the
    reason when the file cannot be used (not a dynscope database, a newer
    schema, unwritable); once recording, failures are dropped and counted
    (runs.dropped_events), never raised into the program.
    """
    global _snapshotter, _interval
    path = os.fspath(path)
    if snapshot_interval <= 0:
        raise ValueError("snapshot_interval must be > 0")
    with _lock:
        argv = [str(a) for a in (sys.argv or [])] or [sys.executable]
        run_id = _C.record_start(os.path.abspath(path), argv, sys.version.split()[0])
        _interval = snapshot_interval
        _install_hooks()
        _start_snapshotter()
    return run_id


def stop_recording() -> dict | None:
    """Write everything queued and close the database.  Returns the store's
    counters (submitted, written, dropped, ...), or None if not recording."""
    global _snapshotter
    with _lock:
        snap, _snapshotter = _snapshotter, None
        if snap is not None:
            snap.stopped.set()
            if snap is not threading.current_thread():
                snap.join(timeout=5)
        if _C.record_path() is None:
            return None
        _C.record_snapshot()
        return _C.record_stop()


def _start_snapshotter() -> None:
    global _snapshotter
    _snapshotter = _Snapshotter(_interval)
    _snapshotter.start()


def _on_sigterm(signum, frame) -> None:
    """Flush, then die of SIGTERM as the program would have."""
    try:
        stop_recording()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


class _MpToken:
    """Key of our multiprocessing after-fork hook (weakly referenced)."""


_mp_token = _MpToken()
_mp_hooked = False


def _register_mp_finalizer(_token=None) -> None:
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None and _C.record_path() is not None:
        # pool workers leave through os._exit after running these finalizers
        mp_util.Finalize(None, stop_recording, exitpriority=100)


def _before_fork() -> None:
    global _mp_hooked
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None and not _mp_hooked:
        # multiprocessing's Process._bootstrap clears the finalizer registry
        # after os.register_at_fork's child hooks have run, then runs its own
        # after-fork hooks: register the worker's finalizer from there.
        _mp_hooked = True
        mp_util.register_after_fork(_mp_token, _register_mp_finalizer)
    _C.record_before_fork()


def _after_fork_parent() -> None:
    _C.record_after_fork_parent()


def _after_fork_child() -> None:
    global _snapshotter
    if _C.record_after_fork_child() is None:
        return
    # threads do not survive fork: a new snapshotter for this process
    _snapshotter = None
    _start_snapshotter()
    _register_mp_finalizer()


def _install_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(stop_recording)
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent,
                        after_in_child=_after_fork_child)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):
            pass


def _start_from_environment() -> None:
    """DYNSCOPE_DB=path records the whole process."""
    path = os.environ.get("DYNSCOPE_DB")
    if not path or _C.record_path() is not None:
        return
    try:
        record(path)
    except OSError as exc:
        print(f"dynscope: DYNSCOPE_DB: {exc}; not recording", file=sys.stderr)
