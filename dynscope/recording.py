"""Recording engine events into a dynscope SQLite database.

    dynscope.record("run.db")        # or DYNSCOPE_DB=run.db, or python -m dynscope run --db
    ...                              # compiles, recompiles, breaks, guard failures land in SQL
    dynscope.stop_recording()        # flush and close (also done at exit)

The engine queues events in memory and a writer thread (C, store/) batches
them into SQLite; the program is never blocked or broken by recording.
Cache-entry counters (hits, guard time) are snapshotted every
`snapshot_interval` seconds and at stop.  Each process writes its own `runs`
row; a forked child (multiprocessing) opens its own after the fork.

What this module installs in the process, and why each is safe (no Python
code ever runs from a signal handler; nothing waits on a lock the program may
hold): docs/recording.md, "What dynscope installs in your process".
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import threading

from . import _C

__all__ = ["record", "stop_recording", "recording_path"]

# Serializes record() and stop_recording() of this process.  A fork child
# gets a new one (_after_fork_child): the parent's may have been held by
# another thread at the fork, and would never be released in the child.
_lock = threading.Lock()
_interval = 0.5
_hooks_installed = False

# How long a process killed by SIGTERM lets the writer flush before it dies
# of SIGTERM (ms).  DYNSCOPE_SIGTERM_FLUSH_MS=0 turns the handler off.
SIGTERM_FLUSH_MS_DEFAULT = 1000


def recording_path() -> str | None:
    """The database being recorded to, or None."""
    return _C.record_path()


def record(path, *, snapshot_interval: float = 0.5, flush_on_exit: bool = True,
           redact=None) -> int:
    """Start recording to the dynscope database at `path` (created 0600).

    redact: what never reaches the file (dynscope/redact.py): True or
    "values" (each str and bytes value a guard expected or saw becomes its
    type, length and a keyed hash; the key is this recording's and is not
    stored), "all" (numbers and shapes too), "paths" (the home directory
    becomes ~), or several: "values,paths".  None: $DYNSCOPE_REDACT.

    Returns the run id of this process's `runs` row.  Raises OSError with the
    reason when the file cannot be used (not a dynscope database, a newer
    schema, unwritable); once recording, failures are dropped and counted
    (runs.dropped_events), never raised into the program.

    With `flush_on_exit`, the ways a process ends without Python's cleanup
    still keep what it recorded, waiting at most $DYNSCOPE_SIGTERM_FLUSH_MS
    (default 1000; 0 turns both off) ms for the writer: SIGTERM at its
    default disposition (a C handler flushes, then the process dies of
    SIGTERM as it would have; a program's own handler is never replaced),
    and os._exit (a fork child's usual end).
    """
    global _interval
    path = os.fspath(path)
    if snapshot_interval <= 0:
        raise ValueError("snapshot_interval must be > 0")
    flush_ms = _sigterm_flush_ms() if flush_on_exit else 0
    from . import redact as _redact
    words = _redact.parse_words(os.environ.get("DYNSCOPE_REDACT", "") if redact is None else redact)
    redactor = _redact.Redactor(words) if words else None
    already = False
    with _lock:
        argv = [str(a) for a in (sys.argv or [])] or [sys.executable]
        if redactor is not None:              # the program kept, its arguments as values
            argv = [redactor.path(a) for a in argv]
            if "values" in redactor.words:
                argv = argv[:1] + json.loads(redactor.argv(json.dumps(argv)))[1:]
        # The SIGTERM handler goes in first: until the Store is watched it
        # dies as SIG_DFL would, and record_start blocks SIGTERM from the
        # runs row to the watch, so a SIGTERM during the start (a spawned
        # pool worker terminated at once) still ends the run.
        if flush_ms > 0:
            _C.record_sigterm_install(flush_ms)
        try:
            already = _C.record_path() is not None     # record_start refuses it: keep its redactor
            if not already:
                _C.record_redactor(redactor.record_fields if redactor is not None else None)
            run_id = _C.record_start(os.path.abspath(path), argv, sys.version.split()[0],
                                     ",".join(sorted(words)) if words else None)
        except BaseException:
            if not already:
                _C.record_redactor(None)
            if flush_ms > 0:
                _C.record_sigterm_uninstall()
            raise
        _interval = snapshot_interval
        _install_hooks()
        if flush_ms > 0:
            _C.record_wrap_os_exit(flush_ms)
        _start_snapshotter()
    return run_id


def stop_recording() -> dict | None:
    """Write everything queued and close the database.  Returns the store's
    counters (submitted, written, dropped, ...), or None if not recording."""
    with _lock:
        _C.record_snapshot_stop()
        if _C.record_path() is None:
            return None
        _C.record_snapshot()
        stats = _C.record_stop()
        _C.record_redactor(None)
        _C.record_sigterm_uninstall()
        _C.record_unwrap_os_exit()
        return stats


def _sigterm_flush_ms() -> int:
    raw = os.environ.get("DYNSCOPE_SIGTERM_FLUSH_MS", "")
    if not raw:
        return SIGTERM_FLUSH_MS_DEFAULT
    try:
        ms = int(raw)
    except ValueError:
        ms = -1
    if not 0 <= ms <= 60000:
        print(f"dynscope: DYNSCOPE_SIGTERM_FLUSH_MS={raw!r} is not 0..60000; "
              f"using {SIGTERM_FLUSH_MS_DEFAULT}", file=sys.stderr)
        return SIGTERM_FLUSH_MS_DEFAULT
    return ms


def _start_snapshotter() -> None:
    """The snapshot thread (a C thread, engine/sinks/record.c): the entry counters
    every `_interval` seconds, and at once when SIGTERM is about to end the
    process."""
    _C.record_snapshot_start(_interval)


class _MpToken:
    """Key of our multiprocessing after-fork hook (weakly referenced)."""


_mp_token = _MpToken()
_mp_hooked = False


def _register_mp_finalizer(_token=None) -> None:
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None and _C.record_path() is not None:
        # pool workers leave through os._exit after running these finalizers
        mp_util.Finalize(None, stop_recording, exitpriority=100)


# Around a fork the recording's two threads (the snapshot thread and the
# store's writer) end, and start again in the parent and in the child
# (engine/sinks/record.c): a process that forks has no thread of dynscope's, as
# it would not without recording (from Python 3.12 os.fork() warns in a
# multi-threaded process).


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


def _after_fork_child() -> None:
    global _lock
    _lock = threading.Lock()
    if _C.record_after_fork_child() is None:
        return
    _register_mp_finalizer()


def _install_hooks() -> None:
    """atexit and fork hooks, once per process (docs/recording.md)."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(stop_recording)
    # the parent's hook is the C function itself: on 3.13 the threads start
    # again in a pending call, which Python code run by a hook would run at
    # once, before os.fork() counts the threads (engine/sinks/record.c)
    os.register_at_fork(before=_before_fork, after_in_parent=_C.record_after_fork_parent,
                        after_in_child=_after_fork_child)


def _start_from_environment() -> None:
    """DYNSCOPE_DB=path records the whole process."""
    path = os.environ.get("DYNSCOPE_DB")
    if not path or _C.record_path() is not None:
        return
    try:
        record(path)
    except OSError as exc:
        print(f"dynscope: DYNSCOPE_DB: {exc}; not recording", file=sys.stderr)
    except ValueError as exc:          # DYNSCOPE_REDACT: never record what was to be hidden
        print(f"dynscope: DYNSCOPE_REDACT={os.environ.get('DYNSCOPE_REDACT')!r}: {exc};"
              " not recording", file=sys.stderr)
