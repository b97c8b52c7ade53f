"""Recording stops and flushes at every way a process ends: normal exit,
sys.exit, an uncaught exception, SIGTERM -- and the program's own exit status
is kept (a SIGTERM still kills it with SIGTERM)."""
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ENDINGS = {
    "normal": ("pass", 0),
    "sys_exit": ("sys.exit(3)", 3),
    "uncaught_exception": ("raise ValueError('boom')", 1),
    # os.kill from the main thread: the handler interrupts a thread holding the
    # GIL, so the snapshot thread cannot answer; the hits are those of a
    # snapshot the program queues just before (not a periodic one, whose
    # timing would race the kill), which the handler's flush must write.
    # (The sleep only keeps the program from ending another way if no signal
    # came.)  A SIGTERM from outside while the program waits:
    # test_record_processes.py.
    "sigterm": ("dynscope._C.record_snapshot(); os.kill(os.getpid(), signal.SIGTERM); "
                "time.sleep(60)", -signal.SIGTERM),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_recording_is_flushed_whatever_way_the_process_ends(tmp_path, ending):
    code, want_status = ENDINGS[ending]
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, time
        import numpy as np
        import dynscope

        @dynscope.optimize("eager", dynamic=False)   # each n specializes
        def f(x, n):
            return x * n

        for n in range(3):
            f(np.ones(4), n)          # 1 compile + 2 recompiles
        for _ in range(10):
            f(np.ones(4), 2)          # hits
        {code}
    """))
    db = tmp_path / "run.db"
    env = dict(os.environ, DYNSCOPE_DB=str(db), PYTHONPATH=REPO)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == want_status, r.stderr
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (ended, dropped), = con.execute("SELECT ended_at, dropped_events FROM runs").fetchall()
        compiles = con.execute("SELECT count(*), sum(frame_compile_id > 0) FROM compiles").fetchone()
        hits = con.execute("SELECT sum(hits) FROM cache_entries").fetchone()[0]
    finally:
        con.close()
    assert ended is not None and dropped == 0
    assert compiles == (3, 2)
    assert hits == 10          # the final snapshot was written
