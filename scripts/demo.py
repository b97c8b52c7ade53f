"""make demo: run the demo workload under capture, then show what happened.

Prints the per-function cache (entries, hits, guards), the engine's counters,
and an explain() report of one training step.
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import dynscope  # noqa: E402
from dynscope import _C  # noqa: E402
import demo_workload as w  # noqa: E402


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        w.main(steps=40)
    print()
    print("Cache entries per function")
    for fn in (w.forward, w.loss, w.log_step, w.scale):
        entries = dynscope.cache_entries(fn)
        status = _C.code_status(fn)
        print(f"  {fn.__name__}: {len(entries)} entries, "
              f"{sum(e.hits for e in entries)} hits, last failing guard: {status['last_failure']}")
        for e in entries[:3]:
            kinds = ", ".join(sorted({g.kind for g in e.guards}))
            print(f"      [{e.compile_id}] offset {e.resume_offset:3d}  hits {e.hits:4d}  guards: {kinds}")
        if len(entries) > 3:
            print(f"      ... {len(entries) - 3} more")
    print()
    print("Engine counters:", _C.counters())
    print()
    x = np.ones((8, 16), np.float32)
    print(dynscope.explain(w.forward)(x))


if __name__ == "__main__":
    main()
