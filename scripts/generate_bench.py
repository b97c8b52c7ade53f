#!/usr/bin/env python3
"""generate() with a KV cache: dynscope, TorchDynamo and eager side by side.

For each model of tests/models named (tiny random-init builds, no weights),
in a fresh process per model: `model.generate(prompt, max_new_tokens=N)`
greedy, eager first (the reference tokens and time), then with
`model.forward` wrapped by `dynscope.optimize("eager")`, then by
`torch.compile(backend="eager")` -- and again, in a process of its own,
both with `dynamic=True` (every size dynamic from the first compile, where
the default learns them as they change).  Each captured system runs the prompt
twice and a prompt of another length (what a user's loop does) before it
is timed; its compiles, recompiles, cache-limit hits and graph breaks are
counted over those runs, and its tokens must equal eager's.  Steady state
is the best of --reps interleaved rounds (eager, dynscope, Dynamo, one
generate() of the first prompt each), per generate and per token, and as a
ratio to eager in the same process (the machine is shared: compare
ratios).

Writes the section "generate() with a KV cache" of --out (docs/models.md
by default; make zoo runs it), replacing the one there.

    python scripts/generate_bench.py [--models llama,gpt2,t5,mistral] [--tokens 40]
                                     [--reps 5] [--out docs/models.md]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = "## generate() with a KV cache"


def worker(name: str, tokens: int, reps: int, dynamic=None) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import torch
    import models
    torch.set_num_threads(1)
    model, _, _ = models.build(name)
    model.generation_config.eos_token_id = None          # always `tokens` new ones
    g = torch.Generator().manual_seed(7)
    prompt = torch.randint(3, models.VOCAB, (1, 7), generator=g)
    other = torch.randint(3, models.VOCAB, (1, 11), generator=g)
    orig = model.forward

    def run(ids):
        return model.generate(ids, max_new_tokens=tokens, do_sample=False)

    rows = []
    with torch.no_grad():
        want, want_other = run(prompt), run(other)

        def warm(forward):
            """The prompt twice, then the other length: whether the tokens
            equal eager's."""
            model.forward = forward
            return all([torch.equal(run(prompt), want), torch.equal(run(prompt), want),
                        torch.equal(run(other), want_other)])

        import dynscope
        from dynscope import _C
        dynscope.reset()
        ds_forward = dynscope.optimize("eager", dynamic=dynamic)(orig)
        ds_equal = warm(ds_forward)
        c = _C.counters()
        rows.append({"system": "dynscope", "compiles": c["compiles"], "recompiles": c["recompiles"],
                     "limits": c["cache_limits"], "breaks": c["graph_breaks"]})

        import torch._dynamo
        import torch._dynamo.utils as du
        from torch._dynamo import convert_frame
        torch._dynamo.reset()
        du.counters.clear()
        dy_forward = torch.compile(orig, backend="eager", dynamic=dynamic)
        dy_equal = warm(dy_forward)
        compiles = dict(du.counters["frames"]).get("ok", 0)
        # compiles of a frame past its first (Dynamo's per-frame compile ids)
        per_frame = getattr(convert_frame, "FRAME_COMPILE_COUNTER", {})
        rows.append({"system": "dynamo", "compiles": compiles,
                     "recompiles": sum(max(0, n - 1) for n in per_frame.values()),
                     "limits": sum(v for k, v in du.counters["stats"].items() if "limit" in k),
                     "breaks": sum(du.counters["graph_break"].values())})
        rows.insert(0, {"system": "eager", "compiles": 0, "recompiles": 0, "limits": 0, "breaks": 0})

        # steady state: interleaved rounds, the best of each (a shared machine)
        forwards = {"eager": orig, "dynscope": ds_forward, "dynamo": dy_forward}
        times = {k: [] for k in forwards}
        equal = {"eager": True, "dynscope": ds_equal, "dynamo": dy_equal}
        for _ in range(reps):
            for k, fwd in forwards.items():
                model.forward = fwd
                t0 = time.perf_counter()
                out = run(prompt)
                times[k].append(time.perf_counter() - t0)
                equal[k] = equal[k] and torch.equal(out, want)
        model.forward = orig
        eager_s = min(times["eager"])
        for r in rows:
            r["seconds"] = min(times[r["system"]])
            r["equal"] = equal[r["system"]]
    for r in rows:
        r["model"] = name
        if dynamic and r["system"] != "eager":
            r["system"] += ", dynamic=True"
        r["ratio"] = r["seconds"] / eager_s
        r["per_token_ms"] = r["seconds"] / tokens * 1e3
    return {"rows": rows}


def versions() -> str:
    import platform
    import torch
    import transformers
    return (f"CPython {platform.python_version()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}, {platform.machine()}, "
            f"{os.cpu_count()} cores")


def section(rows: list, command: str, tokens: int) -> str:
    lines = [HEADING, "",
             f"Made by `{command}` on {time.strftime('%Y-%m-%d')} ({versions()}).",
             f"`model.generate(prompt, max_new_tokens={tokens})`, greedy, with `model.forward`",
             "captured. *compiles* (recompiles, cache-limit hits, breaks) count the prompt run",
             "twice and a prompt of another length (7 and 11 tokens); *equal*: the tokens equal",
             "eager's on every run. Times: the best of interleaved rounds (eager, dynscope, Dynamo)",
             "of the 7-token prompt, in one process per model, torch on one thread; *ratio* to",
             "eager in that process.",
             "",
             "| model | system | compiles | recompiles | cache-limit hits | breaks | equal "
             "| ms per generate | ms per token | ratio |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['system']} | {r['compiles']} | {r['recompiles']} | "
                     f"{r['limits']} | {r['breaks']} | {'yes' if r['equal'] else 'NO'} | "
                     f"{r['seconds'] * 1e3:.1f} | {r['per_token_ms']:.2f} | {r['ratio']:.2f} |")
    lines += ["",
              "A decoder-only model compiles its prompt, then the first decoding step, which",
              "takes the KV cache's length as dynamic at once: the cache is first read in the",
              "miss on the prompt's length 7 becoming 1, with that length (`L['kwargs']['cache']",
              ".layers[0].keys.size(2) is now dynamic`), the mask's relation to it guarded",
              "(`SIZES_HOLD`). Dynamo compiles the first step static and a third time for the",
              "second. A prompt of another length compiles once more, its length dynamic from",
              "then on. Mistral's sliding-window cache counts what it saw in an int attribute",
              "(`cumulative_length`), a symbol from the first step. T5 (encoder-decoder)",
              "compiles its prompt, the first step (the self-attention cache made: its length",
              "1, specialized as a size of 1 is), the second (length 2: dynamic), and those three",
              "again for the new prompt's encoder length. The recompile reasons are in any",
              "recording (`python -m dynscope run --db run.db script.py`, then `SELECT name,",
              "reason FROM recompiles`).",
              "",
              "With `dynamic=True` (rows so marked, measured in a process of their own against",
              "that process's eager) sizes are dynamic from the first compile, so a new prompt",
              "length compiles nothing new: a decoder compiles its prefill and its steps, T5 its",
              "prefill, its first step (the self-attention cache of length 1 is specialized, as",
              "a size of 1 is) and the steps after, and Mistral learns `cumulative_length` on",
              "its first change, as the default does."]
    return "\n".join(lines) + "\n"


def write_section(path: str, text: str) -> None:
    doc = open(path).read() if os.path.exists(path) else ""
    if HEADING in doc:
        start = doc.index(HEADING)
        nxt = doc.find("\n## ", start + len(HEADING))
        doc = doc[:start] + text + ("\n" + doc[nxt + 1:] if nxt >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    with open(path, "w") as f:
        f.write(doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="llama,gpt2,t5,mistral", help="comma-separated zoo names")
    ap.add_argument("--tokens", type=int, default=40, help="new tokens per generate()")
    ap.add_argument("--reps", type=int, default=10, help="timed rounds (a generate() per system)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "models.md"))
    ap.add_argument("--worker", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("--dynamic-true", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.tokens, args.reps,
                                True if args.dynamic_true else None)))
        return 0
    rows = []
    runs = [(name, dyn) for name in args.models.split(",") if name for dyn in (False, True)]
    for name, dyn in runs:
        p = subprocess.run([sys.executable, __file__, "--worker", name, "--tokens", str(args.tokens),
                            "--reps", str(args.reps)] + (["--dynamic-true"] if dyn else []),
                           capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            print(f"{name}: the worker failed (exit {p.returncode}):\n{p.stderr[-3000:]}",
                  file=sys.stderr)
            return 1
        got = json.loads(p.stdout.strip().splitlines()[-1])["rows"]
        if dyn:
            got = [r for r in got if r["system"] != "eager"]    # its eager: the row above
        for r in got:
            print(f"{r['model']:8} {r['system']:23} compiles {r['compiles']:3} limits {r['limits']} "
                  f"breaks {r['breaks']:3} equal {r['equal']} {r['seconds'] * 1e3:8.1f} ms "
                  f"ratio {r['ratio']:.2f}", flush=True)
        rows += got
    command = "python scripts/generate_bench.py" + (
        f" --out {os.path.relpath(args.out, ROOT)}" if os.path.abspath(args.out) !=
        os.path.join(ROOT, "docs", "models.md") else "")
    write_section(args.out, section(rows, command, args.tokens))
    print(f"wrote {args.out}")
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
