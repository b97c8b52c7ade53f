#!/usr/bin/env python3
"""hf_sweep.py -- every transformers architecture, dynscope and TorchDynamo
side by side (`make sweep`; issue 38).

    .venv/bin/python scripts/hf_sweep.py                  # all, resumable; writes docs/sweep.md
    .venv/bin/python scripts/hf_sweep.py --types gpt2,bert,vit --out /tmp/s.md
    .venv/bin/python scripts/hf_sweep.py --sample         # the 20 of tests/test_sweep.py
    .venv/bin/python scripts/hf_sweep.py --fresh          # forget earlier results

It walks transformers' own table of base models
(`transformers.models.auto.modeling_auto.MODEL_MAPPING_NAMES`: model type ->
class) and, for each type, builds a tiny random-init model from the type's
default config made small (SMALL: 2 layers, width 64, 4 heads, a vocabulary
of 256, 32-pixel images; OVERRIDES holds what one family needs besides),
with inputs made from its `main_input_name` (and decoder ids for an
encoder-decoder).  Offline: no weights, no hub.  Then, in that process:

  eager      the outputs every captured call must equal exactly;
  dynscope   dynscope.explain(forward) for graphs and breaks (each break and
             skipped frame typed by the registry, docs/breaks.md), then
             dynscope.optimize("eager")(forward): the first call's time
             (capture), exactness on it and on a cache hit, per-call time;
  dynamo     torch._dynamo.explain(forward) and torch.compile(forward,
             backend="eager"), the same measures;
             each model is measured with nn.Module.__init__ as torch defines
             it (plain_module_init): Dynamo, once it compiled in a process,
             wraps it for good (its mutation_guard tags every module made
             later in a registry of its own), which made a module built
             inside forward a write into that registry for the models after
             the first -- a program that calls torch.compile once has it,
             one that never does has not;
  time       eager, dynscope's and Dynamo's captured calls timed together:
             --reps rounds, each calling every one once in turn (the order
             rotated), the median of each -- so a load that comes and goes
             on the machine falls on all three alike, and the ratios hold.

Models run BATCH to a process (imports are paid once), each under an alarm
of --timeout seconds; results go to a JSON-lines file as they come
(build/sweep.jsonl), so an interrupted sweep resumes where it stopped and
a process that dies costs only the model it was on (retried alone, then
recorded as a failure).  docs/sweep.md gets one row per architecture,
the totals first, the break types that cost the most models, and the
architectures that could not be built or run, each with its reason.
"""
from __future__ import annotations

import argparse
import contextlib
import collections
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

RESULTS = os.path.join(ROOT, "build", "sweep.jsonl")
BATCH = 12

# What every config is made to, where it has the attribute (through its
# attribute_map too: n_embd, d_model ...), in its sub-configs as well.
SMALL = {
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "encoder_layers": 2,
    "decoder_layers": 2, "num_decoder_layers": 2, "num_encoder_layers": 2,
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "embed_dim": 64,
    "num_attention_heads": 4, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16,
    "intermediate_size": 128, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "d_ff": 128,
    "ffn_dim": 128, "n_inner": 128,
    "vocab_size": 256, "max_position_embeddings": 128, "n_positions": 128,
    "image_size": 32, "patch_size": 8, "num_channels": 3,
    "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
}
# A family's own needs, by model type (applied after SMALL).
OVERRIDES = {
    "bigbird_pegasus": {"attention_type": "original_full"},
    "big_bird": {"attention_type": "original_full"},
    "reformer": {"axial_pos_shape": [8, 16], "axial_pos_embds_dim": [32, 32]},
    "longformer": {"attention_window": 8},
    "led": {"attention_window": 8},
}
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
             "sep_token_id", "cls_token_id", "unk_token_id", "mask_token_id")
SEQ = 8
# Train mode (--train): each causal-LM head, dropout at least this.
TRAIN_TABLE = "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"
TRAIN_DROPOUT = 0.1
TRAIN_RESULTS = os.path.join(ROOT, "build", "sweep_train.jsonl")

# The fixed sample tests/test_sweep.py runs in CI (dynscope only).
SAMPLE = ("bert", "gpt2", "llama", "mistral", "qwen2", "phi", "gemma", "opt", "bloom", "gpt_neo",
          "roberta", "distilbert", "electra", "t5", "bart", "vit", "deit", "resnet", "mobilebert",
          "xglm",
          # one each of what the sweep taught the translator: a mixture of
          # experts (topk's named tuple, a custom op of torch.ops), sort and
          # max(dim) results, a weight-norm parametrization (torch's private
          # _weight_norm, a generator expression kept), @torch.no_grad() on a
          # method
          "mixtral", "gpt_oss", "hubert", "m2m_100")


class Timeout(Exception):
    pass


def shrink(cfg, overrides: dict, seen=None) -> None:
    """Make cfg (a PretrainedConfig) small, in place, sub-configs too."""
    import transformers
    seen = set() if seen is None else seen
    if id(cfg) in seen:
        return
    seen.add(id(cfg))
    amap = getattr(cfg, "attribute_map", {}) or {}
    for key, value in {**SMALL, **overrides}.items():
        target = amap.get(key, key)
        if target == "num_stages" or (isinstance(cfg.__dict__.get(target), (list, tuple))
                                      and not isinstance(value, (list, tuple))):
            continue                  # per-stage lists: made small below
        if key in cfg.__dict__ or key in amap:
            try:
                setattr(cfg, key, value)
            except Exception:
                pass
    # staged models (ConvNext, Swin, ResNet): one block a stage, narrow stages
    staged = isinstance(cfg.__dict__.get("depths"), (list, tuple))
    if staged:
        cfg.depths = [1] * len(cfg.depths)
    if isinstance(cfg.__dict__.get("hidden_sizes"), (list, tuple)):
        cfg.hidden_sizes = [16 * 2 ** i for i in range(len(cfg.hidden_sizes))]
    if isinstance(cfg.__dict__.get("num_heads"), (list, tuple)):
        cfg.num_heads = [4] * len(cfg.num_heads)
    if staged and "image_size" in cfg.__dict__:
        cfg.image_size = 64           # four stages of downsampling need room
    for key in TOKEN_IDS:
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v >= SMALL["vocab_size"]:
            setattr(cfg, key, TOKEN_IDS.index(key) % 3)
    for v in list(cfg.__dict__.values()):
        if isinstance(v, transformers.PretrainedConfig):
            shrink(v, overrides, seen)


def build(model_type: str, table: str = "MODEL_MAPPING_NAMES", dropout: float = None):
    """(model, kwargs) of a tiny random-init model of model_type, its class
    from transformers' table (the base models', or another: train mode
    builds the causal-LM heads), in eval mode; with dropout, every dropout
    probability of the config at least that."""
    import torch
    import transformers
    from transformers.models.auto import modeling_auto
    names = getattr(modeling_auto, table)[model_type]
    name = names[0] if isinstance(names, (tuple, list)) else names
    cls = getattr(transformers, name)
    cfg = transformers.AutoConfig.for_model(model_type)
    shrink(cfg, OVERRIDES.get(model_type, {}))
    if dropout is not None:
        dropout_on(cfg, dropout)
    if hasattr(cfg, "_attn_implementation"):
        cfg._attn_implementation = "sdpa" if getattr(cls, "_supports_sdpa", False) else "eager"
    torch.manual_seed(0)
    model = cls(cfg).eval()
    return model, inputs_for(model, cfg)


def dropout_on(cfg, p: float, seen=None) -> None:
    """Every dropout probability of cfg (a float field named for dropout:
    attention_dropout, resid_pdrop, hidden_dropout_prob ...) at least p,
    sub-configs too: a train step then draws from the RNG in forward."""
    import transformers
    seen = set() if seen is None else seen
    if id(cfg) in seen:
        return
    seen.add(id(cfg))
    for key, v in list(cfg.__dict__.items()):
        if ("dropout" in key or "pdrop" in key) and isinstance(v, float) and v < p:
            try:
                setattr(cfg, key, p)
            except Exception:
                pass
        elif isinstance(v, transformers.PretrainedConfig):
            dropout_on(v, p, seen)


def _sub(cfg, key, default):
    for c in (cfg, getattr(cfg, "vision_config", None), getattr(cfg, "text_config", None)):
        if c is not None and getattr(c, key, None) is not None:
            return getattr(c, key)
    return default


def inputs_for(model, cfg) -> dict:
    """Inputs from the model's main input name (and decoder ids)."""
    import inspect
    import torch
    g = torch.Generator().manual_seed(1)
    main = getattr(model, "main_input_name", "input_ids")
    vocab = _sub(cfg, "vocab_size", 256)
    if main == "input_ids":
        kw = {"input_ids": torch.randint(3, max(4, min(vocab, 256)), (1, SEQ), generator=g)}
    elif main == "pixel_values":
        size = _sub(cfg, "image_size", 64)
        size = size[0] if isinstance(size, (list, tuple)) else size
        kw = {"pixel_values": torch.randn(1, _sub(cfg, "num_channels", 3), size, size, generator=g)}
    elif main == "input_values":
        kw = {"input_values": torch.randn(1, 4000, generator=g)}
    else:
        raise ValueError(f"no inputs made for main_input_name {main!r}")
    params = inspect.signature(model.forward).parameters
    if getattr(cfg, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        kw["decoder_input_ids"] = torch.randint(3, max(4, min(vocab, 256)), (1, 4), generator=g)
    return kw


def _interleaved_us(fns: list, reps: int) -> list:
    """Median microseconds per call of each of fns, timed in rounds that
    call each once in turn (order rotated): a load on the machine that comes
    and goes falls on all of them alike, so their ratios hold."""
    times = [[] for _ in fns]
    for r in range(reps):
        for k in range(len(fns)):
            i = (k + r) % len(fns)
            t0 = time.perf_counter_ns()
            fns[i]()
            times[i].append(time.perf_counter_ns() - t0)
    return [statistics.median(t) / 1e3 for t in times]


def _tensors(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _same(a, b) -> bool:
    import torch
    ta, tb = _tensors(a), _tensors(b)
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb))


def measure(model_type: str, reps: int, systems=("dynscope", "dynamo"), train: bool = False) -> dict:
    """One architecture, each of systems; a dict for JSON.  train: its
    causal-LM head in training mode, a step that is forward with labels and
    loss.backward() (train_step)."""
    import warnings
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    row = {"type": model_type}
    t0 = time.perf_counter()
    try:
        model, kw = build(model_type, TRAIN_TABLE, TRAIN_DROPOUT) if train else build(model_type)
    except Exception as exc:                 # the sweep's finding, not its failure
        return {**row, "stage": "build", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    row["class"] = type(model).__name__
    row["params"] = sum(p.numel() for p in model.parameters())
    if train:
        model.train()
        forward, call = train_step(model, kw)
        mode = contextlib.nullcontext()
    else:
        def forward():
            return model(**kw)

        def call(f):
            return f()
        mode = torch.no_grad()

    with mode:
        try:
            want = call(forward)
        except Exception as exc:
            return {**row, "stage": "eager", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        row["eager_repeats"] = _same(want, call(forward))   # random in forward: it does not
        as_compiled = None
        timed = {"eager": lambda: call(forward)}            # timed together below
        for system in systems:
            try:
                row[system], first, captured = run_system(system, forward, want, call)
                timed[system] = lambda captured=captured: call(captured)
                if row[system]["equal"] is False:
                    # transformers takes other paths under torch.compile
                    # (is_compiling(), which dynscope answers as Dynamo):
                    # equal to eager run that way is no wrong answer
                    if as_compiled is None:
                        as_compiled = eager_as_compiled(lambda: call(forward))
                    row[system]["equal_compiled"] = _same(first, as_compiled)
            except Exception as exc:
                row[system] = raised(exc, lambda: call(forward))
        try:
            us = _interleaved_us(list(timed.values()), reps)
        except Exception as exc:
            us = None
            for system in systems:
                if system in timed:
                    row[system] = {"error": f"timing: {type(exc).__name__}: {str(exc)[:200]}"}
        for name, t in zip(timed, us or ()):
            if name == "eager":
                row["eager_us"] = t
            else:
                row[name]["us"] = t
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def train_step(model, kw):
    """(step, call) for train mode: step() is what a user captures -- the
    model's loss on labels equal to its inputs, then loss.backward(); call(f)
    runs a step from zeroed gradients and a fixed seed (dropout draws the
    same masks) and returns the loss and every parameter's gradient (an
    empty tensor for one left without), all of which must be bit-equal."""
    import torch
    kw = {**kw, "labels": kw["input_ids"]} if "input_ids" in kw else kw
    params = [p for p in model.parameters() if p.requires_grad]
    none = torch.zeros(0)

    def step():
        loss = model(**kw).loss
        loss.backward()
        return loss

    def call(f):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        loss = f()
        return [loss.detach()] + [none if p.grad is None else p.grad.clone() for p in params]
    return step, call


def raised(exc: BaseException, forward) -> dict:
    """A captured run's exception, for JSON; "as_compiled" when eager, run
    as under a compiler (eager_as_compiled), raises the same: the program's
    own path under is_compiling(), not the capture's doing."""
    said = f"{type(exc).__name__}: {str(exc)[:200]}"
    try:
        eager_as_compiled(forward)
    except Exception as again:
        if type(again) is type(exc) and str(again) == str(exc):
            return {"error": said, "as_compiled": True}
    return {"error": said}


def eager_as_compiled(forward):
    """forward() eagerly, with torch.compiler.is_compiling() and
    torch._dynamo.is_compiling() answering True, as under a compiler."""
    from unittest import mock
    with mock.patch("torch.compiler.is_compiling", lambda: True), \
            mock.patch("torch._dynamo.is_compiling", lambda: True):
        return forward()


@contextlib.contextmanager
def plain_module_init():
    """nn.Module.__init__ (and __setstate__) as torch defines them, while the
    block runs, Dynamo's mutation_guard wrapping them first if it has not
    yet (it does at its first compile in a process, which would be inside
    the block: lara_mini, the first of its batch, then made a module in
    forward through the wrapper on every call, and Dynamo's calls between
    them changed what the wrapper reads, so dynscope recompiled; Dynamo does
    not wrap them again: its flag says it did); restored after.  Around a whole model's measures, never around each
    call: assigning a class attribute invalidates every type cache."""
    from torch.nn import Module
    try:       # wrapped now if Dynamo will wrap them (at its first compile), so undone below
        from torch._dynamo.mutation_guard import install_generation_tagging_init
        install_generation_tagging_init()
    except Exception:
        pass
    patched = {name: Module.__dict__[name] for name in ("__init__", "__setstate__")}
    plain = {}
    for name, fn in patched.items():
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        inner = cells.get("init" if name == "__init__" else "setstate")
        if getattr(fn, "__module__", "") == "torch._dynamo.mutation_guard" and inner is not None:
            plain[name] = inner.cell_contents
    for name, fn in plain.items():
        setattr(Module, name, fn)
    try:
        yield
    finally:
        for name in plain:
            setattr(Module, name, patched[name])


def run_system(system: str, forward, want, call):
    """(the measures, a dict for JSON; the first captured call's output;
    the captured callable, which measure() times beside the others).
    call(f) runs f as measure() does (a train step's gradients with it)."""
    import torch
    if system == "dynscope":
        import dynscope
        from dynscope import _C
        dynscope.reset()
        ex = dynscope.explain(forward)()
        types = collections.Counter(_C.break_type_of(b.kind, str(b.reason))[1] for b in ex.break_reasons)
        types.update(_C.break_type_of("skip", s[2])[1] for s in ex.skipped
                     if len(s) > 2 and isinstance(s[2], str))
        out = {"graphs": ex.graph_count, "breaks": ex.graph_break_count,
               "reasons": collections.Counter(str(b.reason).splitlines()[0][:100]
                                              for b in ex.break_reasons).most_common(3),
               "types": dict(types)}
        dynscope.reset()
        captured = dynscope.optimize("eager")(forward)
    else:
        import torch._dynamo as dynamo
        dynamo.reset()
        ex = dynamo.explain(forward)()
        out = {"graphs": ex.graph_count, "breaks": ex.graph_break_count,
               "reasons": collections.Counter(str(getattr(b, "reason", b)).splitlines()[0][:100]
                                              for b in ex.break_reasons).most_common(3)}
        dynamo.reset()
        captured = torch.compile(forward, backend="eager")
    t0 = time.perf_counter()
    first = call(captured)
    out["capture_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    out["equal"] = _same(first, want) and _same(call(captured), want)
    return out, first, captured


def _die_with_parent() -> None:
    """SIGKILL this worker when the process that started it ends (Linux
    prctl PR_SET_PDEATHSIG): an alarm cannot stop a worker stuck in C code,
    and a killed sweep (a test's timeout) must not leave it running."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def batch_worker(types: list, reps: int, timeout: int, systems: tuple, train: bool) -> None:
    """Measure each type, a JSON line each, under an alarm each."""
    _die_with_parent()

    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    for t in types:
        signal.alarm(timeout)
        try:
            with plain_module_init():        # per model: what the first saw
                row = measure(t, reps, systems, train)
        except Timeout:
            row = {"type": t, "stage": "timeout", "error": f"over {timeout} s"}
        except BaseException as exc:             # noqa: BLE001 -- one model, not the batch
            row = {"type": t, "stage": "run", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        finally:
            signal.alarm(0)
        try:
            import dynscope
            dynscope.reset()
            import torch._dynamo
            torch._dynamo.reset()
        except Exception:
            pass
        print(json.dumps(row), flush=True)


def all_types(train: bool = False) -> list:
    from transformers.models.auto import modeling_auto
    return sorted(getattr(modeling_auto, TRAIN_TABLE if train else "MODEL_MAPPING_NAMES"))


def load(path: str) -> dict:
    done = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                done[row["type"]] = row
    return done


def run_chunk(chunk: list, args) -> list:
    """The rows a worker process reported for chunk (one may die: fewer)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", ",".join(chunk),
           "--reps", str(args.reps), "--timeout", str(args.timeout), "--systems", args.systems]
    cmd += ["--train"] if args.train else []
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                           timeout=args.timeout * len(chunk) + 120)
        stdout = p.stdout
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    rows = []
    for line in stdout.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


def head_commit() -> str:
    """The commit this checkout is at (short), "+changes" when its tracked
    files differ from it; "unknown" outside git."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+changes" if dirty else "")) if head else "unknown"


def commits_line(rows: list) -> str:
    """Which commits the rows were measured at (each row keeps its own: a
    resumed sweep's rows may come from several)."""
    seen = collections.Counter(r.get("commit", "not recorded") for r in rows)
    return "Rows measured at: " + ", ".join(f"{c} ({n})" for c, n in seen.most_common()) + "."


def record(rows: list, args) -> None:
    head = head_commit()
    with open(args.results, "a") as f:
        for row in rows:
            row.setdefault("commit", head)
            f.write(json.dumps(row) + "\n")
    for row in rows:
        ds, dy = row.get("dynscope") or {}, row.get("dynamo") or {}
        said = (row["error"][:70] if "error" in row else
                f"dynscope {ds.get('graphs')} graphs {ds.get('breaks')} breaks, "
                f"Dynamo {dy.get('graphs')} / {dy.get('breaks')}")
        print(f"{row['type']:32} {said}", flush=True)


def run_batches(todo: list, args) -> None:
    """Each chunk in a process; a type a dead process did not report runs
    alone, and if that dies too it is recorded as a crash."""
    os.makedirs(os.path.dirname(args.results), exist_ok=True)
    for i in range(0, len(todo), args.batch):
        chunk = todo[i:i + args.batch]
        rows = run_chunk(chunk, args)
        record(rows, args)
        reported = {r["type"] for r in rows}
        for t in chunk:
            if t in reported:
                continue
            alone = run_chunk([t], args) if len(chunk) > 1 else []
            record(alone or [{"type": t, "stage": "crash",
                              "error": "the worker process died or ran out of time on it"}], args)


def one_graph(r: dict, system: str) -> bool:
    s = r.get(system) or {}
    return "error" not in s and s.get("graphs") == 1 and s.get("breaks") == 0


def raised_cell(rows: list, system: str) -> str:
    """Totals' cell for the models a system raised on where eager ran: how
    many, named, marking those where eager run as under a compiler raises
    the same (transformers' own path under is_compiling())."""
    names = [r["type"] + (" (eager as compiled raises the same)" if r[system].get("as_compiled") else "")
             for r in rows]
    return f"{len(rows)}{': ' + ', '.join(names) if names else ''}"


def cells(s: dict, r: dict) -> list:
    """A system's four cells of a row: graphs / breaks, equal, capture, time."""
    if not s:
        return ["-", "-", "-", "-"]
    if "error" in s:
        said = "as eager run as compiled raises: " if s.get("as_compiled") else "error: "
        return [said + s["error"][:60], "-", "-", "-"]
    eq = ("yes" if s.get("equal") else "random" if r.get("eager_repeats") is False
          else "as compiled" if s.get("equal_compiled") else "**NO**")
    return [f"{s['graphs']} / {s['breaks']}", eq,
            f"{s.get('capture_ms', 0):.0f}", f"{s.get('us', 0):.0f}"]


def row_line(r: dict) -> str:
    """One architecture's row of a table (inference or training)."""
    ds, dy = r.get("dynscope") or {}, r.get("dynamo") or {}
    ratio = (f"{ds['us'] / dy['us']:.2f}" if "us" in ds and "us" in dy and dy["us"] else "-")
    first = (ds.get("reasons") or [["", 0]])[0][0] if ds.get("reasons") else ""
    return "| " + " | ".join([r["type"], r.get("class", "")] + cells(ds, r) + cells(dy, r)
                             + [f"{r.get('eager_us', 0):.0f}", ratio,
                                first.replace("|", "\\|")[:80]]) + " |"


def train_section(rows: list) -> list:
    """docs/sweep.md's lines for the training pass (--train)."""
    if not rows:
        return []
    built = [r for r in rows if "error" not in r]
    failed = [r for r in rows if "error" in r]
    graphs = {s: [r for r in built if (r.get(s) or {}).get("graphs") == 1] for s in ("dynscope", "dynamo")}
    fewer = [r for r in built if "graphs" in (r.get("dynscope") or {}) and "graphs" in (r.get("dynamo") or {})
             and r["dynscope"]["graphs"] <= r["dynamo"]["graphs"]]
    wrong = {s: [r["type"] for r in built if (r.get(s) or {}).get("equal") is False
                 and r.get("eager_repeats") is not False and (r.get(s) or {}).get("equal_compiled") is not True]
             for s in ("dynscope", "dynamo")}
    random_eager = [r["type"] for r in built if r.get("eager_repeats") is False]
    both = [r for r in built if r in graphs["dynscope"] and r in graphs["dynamo"]
            and "us" in r["dynscope"] and "us" in r["dynamo"] and r["dynamo"]["us"] > 0]
    ratios = [r["dynscope"]["us"] / r["dynamo"]["us"] for r in both]
    named = lambda names: f"{len(names)}{': ' + ', '.join(names) if names else ''}"   # noqa: E731
    lines = ["", "## Training mode: each causal-LM head, a step with `loss.backward()`", "",
             "Made by `make sweep` (its second pass, `hf_sweep.py --train`): each type of transformers' "
             "causal-LM table, built as above with every dropout probability of its config at least "
             f"{TRAIN_DROPOUT}, in training mode. The captured function is a user's step: "
             "`loss = model(input_ids=ids, labels=ids).loss; loss.backward(); return loss`. Each step "
             "runs from zeroed gradients and `torch.manual_seed(0)`, so dropout draws the same masks, "
             "and the loss and every parameter's gradient must be bit-equal to eager's, on the "
             "capturing call and on a cache hit. `loss.backward()` is an eager step in both "
             "(Dynamo: \"Unsupported Tensor.backward() call\"); a step is one graph when its "
             "forward and loss are. " + commits_line(rows), "",
             "| | count |", "|---|---:|",
             f"| model types in the causal-LM table | {len(rows)} |",
             f"| built and stepped eagerly | {len(built)} |",
             f"| dynscope: one graph a step | {len(graphs['dynscope'])} |",
             f"| Dynamo (eager backend): one graph a step | {len(graphs['dynamo'])} |",
             f"| dynscope: as few graphs as Dynamo or fewer | {len(fewer)} |",
             f"| dynscope: loss or a gradient not bit-equal to eager's | {named(wrong['dynscope'])} |",
             f"| Dynamo: loss or a gradient not bit-equal to eager's | {named(wrong['dynamo'])} |",
             f"| eager differs from itself (not compared) | {named(random_eager)} |",
             *(f"| {name}: raised where eager ran | {raised_cell([r for r in built if 'error' in (r.get(s) or {})], s)} |"
               for s, name in (("dynscope", "dynscope"), ("dynamo", "Dynamo"))),
             f"| one graph in both: dynscope's time a step at or below Dynamo's | "
             f"{sum(1 for x in ratios if x <= 1.0)} of {len(ratios)} |",
             f"| median time-a-step ratio dynscope / Dynamo (one graph in both) | "
             f"{statistics.median(ratios):.2f} |" if ratios else "| median ratio | - |",
             ""]
    return (lines + arch_table(built, "us a step")
            + ["", "Not built or not stepped in training mode:", ""] + failures_table(failed))


def arch_table(built: list, per: str) -> list:
    """One row per architecture that ran, each system's measures side by
    side; per names the time column ("us per call", "us a step")."""
    return ([f"| type | class | dynscope graphs / breaks | equal | capture ms | {per} "
             f"| Dynamo graphs / breaks | equal | capture ms | {per} | eager us | ratio to Dynamo "
             "| dynscope's first break |",
             "|---|---|---|---|---:|---:|---|---|---:|---:|---:|---:|---|"]
            + [row_line(r) for r in sorted(built, key=lambda r: r["type"])])


def failures_table(failed: list) -> list:
    """The architectures not built or not run, each with its stage and reason."""
    return (["| type | stage | reason |", "|---|---|---|"]
            + [f"| {r['type']} | {r.get('stage', '?')} | {r['error'].replace('|', chr(92) + '|')[:160]} |"
               for r in sorted(failed, key=lambda r: r["type"])])


def write_doc(rows: list, path: str, command: str, train_rows: list = ()) -> None:
    import torch
    import transformers
    built = [r for r in rows if "error" not in r]
    failed = [r for r in rows if "error" in r]
    ds1 = [r for r in built if one_graph(r, "dynscope")]
    dy1 = [r for r in built if one_graph(r, "dynamo")]
    def unequal(r, system, compiled_too):
        s = r.get(system) or {}
        return (s.get("equal") is False and r.get("eager_repeats") is not False
                and (not compiled_too or s.get("equal_compiled") is not True))
    random_eager = [r for r in built if r.get("eager_repeats") is False]
    wrong = [r for r in built if unequal(r, "dynscope", True)]
    dy_wrong = [r for r in built if unequal(r, "dynamo", True)]
    compile_path = [r for r in built if unequal(r, "dynscope", False) and not unequal(r, "dynscope", True)]
    raised = {system: [r for r in built if "error" in (r.get(system) or {})]
              for system in ("dynscope", "dynamo")}
    both = [r for r in built if "us" in (r.get("dynscope") or {}) and "us" in (r.get("dynamo") or {})
            and one_graph(r, "dynscope") and one_graph(r, "dynamo")]
    ratios = [r["dynscope"]["us"] / r["dynamo"]["us"] for r in both if r["dynamo"]["us"] > 0]
    at_or_below = sum(1 for x in ratios if x <= 1.0)
    lines = ["# Every transformers architecture: dynscope and TorchDynamo side by side", "",
             f"Made by `{command}` on {datetime.date.today().isoformat()} (CPython "
             f"{platform.python_version()}, torch {torch.__version__}, transformers "
             f"{transformers.__version__}, {os.cpu_count()} cores). Each architecture of "
             "transformers' base-model table, built tiny from its default config (2 layers, width "
             "64, random weights, offline), called with `torch.no_grad()` on inputs made from its "
             "`main_input_name`. Per-call times: eager, dynscope and Dynamo timed in the same "
             "rounds, each called once per round in turn, the median of each (a load that comes and "
             "goes falls on all three alike); see `scripts/hf_sweep.py` for how. " + commits_line(rows), "",
             "## Totals", "",
             "| | count |", "|---|---:|",
             f"| model types in the table | {len(rows)} |",
             f"| built and run eagerly | {len(built)} |",
             f"| dynscope: one graph, no break | {len(ds1)} |",
             f"| Dynamo (eager backend): one graph, no break | {len(dy1)} |",
             f"| dynscope: outputs not equal to eager's (nor to eager's run as compiled) | "
             f"{len(wrong)}{': ' + ', '.join(r['type'] for r in wrong) if wrong else ''} |",
             f"| Dynamo: outputs not equal to eager's (nor to eager's run as compiled) | "
             f"{len(dy_wrong)}{': ' + ', '.join(r['type'] for r in dy_wrong) if dy_wrong else ''} |",
             f"| eager differs from itself (random in forward: not compared) | "
             f"{len(random_eager)}{': ' + ', '.join(r['type'] for r in random_eager) if random_eager else ''} |",
             f"| dynscope: equal only to eager's run as compiled (`is_compiling()` True: "
             f"transformers' own other path, as under Dynamo) | "
             f"{len(compile_path)}{': ' + ', '.join(r['type'] for r in compile_path) if compile_path else ''} |",
             *(f"| {name}: raised where eager ran | {raised_cell(raised[system], system)} |"
               for system, name in (("dynscope", "dynscope"), ("dynamo", "Dynamo"))),
             f"| one graph in both: dynscope's per-call time at or below Dynamo's | "
             f"{at_or_below} of {len(ratios)} |",
             f"| median per-call ratio dynscope / Dynamo (one graph in both) | "
             f"{statistics.median(ratios):.2f} |" if ratios else "| median ratio | - |",
             ""]
    # break types that cost the most models
    cost = collections.Counter()
    for r in built:
        ds = r.get("dynscope") or {}
        if not one_graph(r, "dynscope"):
            for t in (ds.get("types") or {}):
                cost[t] += 1
    lines += ["## Break types that cost the most models", "",
              "Models that are not one graph under dynscope, by the registry type of their breaks "
              "and skipped frames (docs/breaks.md).", "",
              "| type | models |", "|---|---:|"]
    lines += [f"| {t} | {n} |" for t, n in cost.most_common(15)] or ["| (none) | 0 |"]
    lines += ["", "## Each architecture", ""] + arch_table(built, "us per call")
    lines += ["", "## Not built or not run", ""] + failures_table(failed)
    lines += train_section(list(train_rows))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", help="comma-separated model types (default: every one)")
    ap.add_argument("--sample", action="store_true", help="the fixed sample of tests/test_sweep.py")
    ap.add_argument("--train", action="store_true",
                    help="the training pass: each causal-LM head, dropout on, a step with "
                         "loss.backward() (results in --train-results)")
    ap.add_argument("--fresh", action="store_true", help="forget the earlier results (of this pass)")
    ap.add_argument("--reps", type=int, default=15,
                    help="rounds of timing (each calls eager, dynscope and Dynamo once, in turn)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per model")
    ap.add_argument("--batch", type=int, default=BATCH, help="models per process")
    ap.add_argument("--results", default=RESULTS, help="the JSON-lines file of inference results")
    ap.add_argument("--train-results", default=TRAIN_RESULTS,
                    help="the JSON-lines file of training results")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "sweep.md"),
                    help="the report, made from both files")
    ap.add_argument("--systems", default="dynscope,dynamo", help="which to measure (dynscope,dynamo)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        batch_worker(args.worker.split(","), args.reps, args.timeout, tuple(args.systems.split(",")),
                     args.train)
        return 0
    if args.train:                   # this pass's file is the one resumed and written
        args.results, args.train_results = args.train_results, args.results
    if args.fresh and os.path.exists(args.results):
        os.remove(args.results)
    types = (list(SAMPLE) if args.sample else args.types.split(",") if args.types
             else all_types(args.train))
    done = load(args.results)
    todo = [t for t in types if t not in done]
    print(f"hf_sweep: {'training pass, ' if args.train else ''}{len(types)} model types, "
          f"{len(types) - len(todo)} done before, {len(todo)} to run", flush=True)
    run_batches(todo, args)
    if args.train:
        args.results, args.train_results = args.train_results, args.results
    inference, training = load(args.results), load(args.train_results)
    pick = (lambda rows: [rows[t] for t in types if t in rows]) if args.types or args.sample \
        else (lambda rows: [rows[t] for t in sorted(rows)])
    command = "make sweep" if not (args.types or args.sample) else \
        "python scripts/hf_sweep.py " + ("--sample" if args.sample else f"--types {args.types}")
    write_doc(pick(inference), args.out, command, pick(training))
    print(f"hf_sweep: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
