"""The break-type registry (event/break_types.c, docs/breaks.md): every reason
the engine can give has a type with an id, a class and a doc entry; the
class of a break inside installed code is "library code"; explain's report
starts with a summary grouped by type and site that fits a screen.

The corpus: tests/data/many_breaks.py, a loop whose steps break at the same
few sites, some of them inside tests/data/corpus_lib/dynscope_corpus_lib,
which the module fixture installs into the venv's site-packages (as pip
would) for the duration of these tests."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

from dynscope import _C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
CLASSES = {"your code", "library code", "engine limit", "fundamental"}
KINDS = {"STOP_BRANCH": "data_dependent_branch", "STOP_ESCAPE": "data_escape"}


def engine_formats():
    """(kind, format) of every tracer_unsupported/tracer_break call in the
    engine's sources: the reasons a graph break or skip can have."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "engine", "*", "*.c"))):
        src = open(path).read()
        for m in re.finditer(r'tracer_(?:unsupported|break)\(\s*[a-z>-]+\s*,\s*([A-Za-z_]+)\s*,'
                             r'\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', src):
            fmt = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)))
            out.append((KINDS.get(m.group(1), "call"), fmt, os.path.basename(path)))
    return out


def sample(fmt):
    """A reason the format could produce: every conversion filled in."""
    return re.sub(r"%(?:z|l)?([dsSUR])", lambda m: "1" if m.group(1) == "d" else "Thing", fmt)


def test_the_table_is_well_formed():
    types = _C.break_types()
    ids = [t["id"] for t in types]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert all(re.fullmatch(r"DS\d{4}", i) for i in ids)
    assert len({t["name"] for t in types}) == len(types)
    for t in types:
        assert t["class"] in CLASSES - {"library code"}, t   # library code is a site's, not a type's
        assert t["explanation"].strip() and t["hint"].strip() and t["example"].strip(), t


def test_every_reason_the_engine_can_give_has_a_type():
    formats = engine_formats()
    assert len(formats) > 250        # the walk found the engine's stops
    untyped = [(f, fmt) for kind, fmt, f in formats
               if _C.break_type_of(kind, sample(fmt))[0] == "DS0099"]
    assert untyped == []
    # the frame-skip reasons that do not come through a tracer stop
    skips = {"generator or coroutine": "DS0028", "coroutine or async generator": "DS0028",
             "module or class body": "DS0029",
             "reads reference counts (sys.getrefcount), which capture would change": "DS0030",
             "file is in config.skip_prefixes (/opt/x/)": "DS0031",
             "ValueError: bad raised while tracing: x": "DS0012",
             "backend 'my_backend' raised NotImplementedError: no lowering": "DS0033",
             "backend 'my_backend' returned None, expected a callable": "DS0033",
             "code inside a try/with block": "DS0014"}
    assert {r: _C.break_type_of(None, r)[0] for r in skips} == skips


@pytest.mark.parametrize("kind, reason, want", [
    ("call", "call to builtin print", ("DS0001", "your code")),
    ("data_dependent_branch", "branch on a tensor value `if x.sum() > 0:`", ("DS0003", "fundamental")),
    ("data_escape", "data escape: .item() on a tensor value", ("DS0004", "your code")),
    ("data_escape", "data escape: f-string of a dynamic number value", ("DS0006", "your code")),
    ("call", "np.add with out= (writes into an array the program can see)", ("DS0007", "your code")),
    ("unsupported", "unsupported bytecode FOO at offset 4", ("DS0021", "engine limit")),
    ("call", "call to a Linear with hooks (nn.Module.__call__ runs them)", ("DS0010", "engine limit")),
])
def test_reasons_map_to_their_type_and_class(kind, reason, want):
    bt, _name, cls, hint = _C.break_type_of(kind, reason, "/home/me/model.py")
    assert (bt, cls) == want and hint


def test_a_site_in_installed_code_is_library_code():
    purelib = sysconfig.get_paths()["purelib"]
    stdlib = sysconfig.get_paths()["stdlib"]
    for f in (os.path.join(purelib, "transformers", "modeling_utils.py"),
              os.path.join(stdlib, "logging", "__init__.py")):
        assert _C.break_type_of("call", "call to builtin print", f)[2] == "library code"
        # an engine limit stays the engine's, wherever it is
        assert _C.break_type_of("call", "unsupported bytecode X at offset 2", f)[2] == "engine limit"
    assert _C.break_type_of("call", "call to builtin print", "/home/me/x.py")[2] == "your code"


def test_docs_breaks_md_is_generated_from_the_table():
    p = subprocess.run([sys.executable, "-m", "dynscope", "breaks", "--markdown"], cwd=ROOT,
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    with open(os.path.join(ROOT, "docs", "breaks.md")) as fh:
        assert fh.read() == p.stdout, "docs/breaks.md is stale: python -m dynscope breaks --markdown"
    for t in _C.break_types():     # every id has its section with explanation and hint
        section = p.stdout.split(f"\n## {t['id']}\n", 1)[1].split("\n## ", 1)[0]
        assert t["explanation"] in section and t["hint"] in section


# ---------------------------------------------------------------------------
# The corpus: explain's summary.

@pytest.fixture(scope="module")
def corpus_lib():
    """dynscope_corpus_lib installed into the venv's site-packages."""
    dest = os.path.join(sysconfig.get_paths()["purelib"], "dynscope_corpus_lib")
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(os.path.join(HERE, "data", "corpus_lib", "dynscope_corpus_lib"), dest)
    yield dest
    shutil.rmtree(dest, ignore_errors=True)


EXPLAIN = """
import sys
import numpy as np
import dynscope
sys.path.insert(0, {data!r})
import many_breaks
out = dynscope.explain(many_breaks.f)(np.arange(5.0))
print(out)
print("SUMMARY", [(g.break_type, g.break_class, g.count, g.function) for g in out.break_summary])
"""


@pytest.fixture(scope="module")
def corpus_report(corpus_lib):
    p = subprocess.run([sys.executable, "-W", "ignore", "-c",
                        EXPLAIN.format(data=os.path.join(HERE, "data"))],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    text, summary = p.stdout.rsplit("SUMMARY ", 1)
    return text, eval(summary)


def normalized(text, corpus_lib):
    text = text.replace(os.path.dirname(corpus_lib) + os.sep, "<site-packages>/")
    text = text.replace(os.path.join(HERE, "data") + os.sep, "<tests/data>/")
    text = summary_groups_sorted(text)
    return re.sub(r"\d+\.\d ms", "<t> ms", text)


def group_costs(text):
    """The summary's groups' measured costs in ns, in the order shown."""
    head = text.split("\nGraph breaks, each (folded by site)", 1)[0]
    scale = {"µs": 1e3, "ms": 1e6}
    return [float(n) * scale[u] for n, u in re.findall(r"cost: (\d+\.\d) (µs|ms) outside", head)]


def summary_groups_sorted(text):
    """The summary's groups come costliest first, and what each costs varies
    from run to run: the golden file has them sorted by their text, costs
    aside."""
    text = re.sub(r"cost: \d+\.\d (?:µs|ms) outside graphs \(\d+% of", "cost: <t> outside graphs (<n>% of",
                  text)
    start = text.find("\nGraph breaks: ")
    if start < 0:
        return text
    start = text.index("\n", start + 1) + 1
    end = text.index("\n\n", start)
    blocks = re.split(r"\n(?=  x\d)", text[start:end])
    return text[:start] + "\n".join(sorted(blocks)) + text[end:]


# Why these counts.  explain counts a break each time a translation meets it,
# not each time the code runs: a cache hit runs the compiled plan (its eager
# steps included) without translating, and a frame at the cache limit
# (config.cache_size_limit, LIMIT entries) runs eagerly, untranslated.  In
# many_breaks.f (its loop over range(12) unrolled, step inlined):
# - _log's print: met by f's first translation (in step(x, 0)), by step's own
#   frame [1/0] and normalize's own frame [2/0] (the calls that broke run as
#   frames of their own, translated too), then by each entry of f's resume
#   frame after that call -- keyed on how much of the loop is left (a guard on
#   the range iterator's length), so one entry per remaining step, until f
#   reaches the cache limit: 3 + LIMIT.
# - step's print (when i % 3 == 0): step's resume frame after normalize needs
#   i's value (the branch), so it has one entry per i until the cache limit:
#   i = 0 .. LIMIT - 1.  The prints of those translations are at i = 0, 3, 6;
#   i = 9 runs at the cache limit, eagerly, and is not counted.
# - CFG.k (Config.__getattribute__): in the same entries of step, for the i
#   whose translation does not stop first at the print (i % 3 != 0), and
#   once in the resume frame after the print at i = 0 (later prints resume in
#   it as cache hits).
# - scaled's float(): in step's resume frame after CFG.k for i = 0 and i = 1
#   (after that one recompile i is dynamic, a graph input: one entry serves
#   every later i), and in scaled's own frame once: 3.
# "2 cache limits hit": step's and f's (the report's own section says so).
def expected_summary(limit):
    log_prints = 3 + limit
    step_prints = len([i for i in range(limit) if i % 3 == 0])
    getattribute = 1 + len([i for i in range(limit) if i % 3 != 0])
    return [("DS0001", "library code", log_prints, "_log"),
            ("DS0009", "engine limit", getattribute, "Config.__getattribute__"),
            ("DS0001", "your code", step_prints, "step"),
            ("DS0004", "library code", 3, "scaled")]


def test_the_summary_groups_breaks_by_type_and_site_with_their_class(corpus_report):
    text, summary = corpus_report
    import dynscope
    limit = dynscope.config.cache_size_limit           # the subprocess's, the default
    assert limit == 8
    # costliest first: which that is varies with the machine, the groups do not
    assert sorted(summary) == sorted(expected_summary(limit))
    assert sorted((n, c) for _, c, n, _ in summary) == [(3, "library code"), (3, "your code"),
                                                        (6, "engine limit"), (11, "library code")]
    costs = group_costs(text)
    assert len(costs) == 4 and costs == sorted(costs, reverse=True), costs
    assert "2 cache limits hit" in text
    limits = text.split("\nCache limits hit\n", 1)[1].split("\n\n", 1)[0]
    assert [ln.split(":")[0].strip() for ln in limits.splitlines()] == ["step", "f"]


def test_the_report_starts_with_a_summary_that_fits_a_screen(corpus_report, corpus_lib):
    text, _summary = corpus_report
    head = text.split("\nGraph breaks, each (folded by site)", 1)[0]
    assert len(head.splitlines()) < 60
    assert ("Graph breaks: 23 breaks at 4 sites: 3 in your code, 14 in library code, "
            "6 engine limits, 0 fundamental") in head
    # library code gets a hint a user can follow: capture around it, not "move the call"
    lib = head.split("DS0001 print [library code]", 1)[1].split("\n  x", 1)[0]
    assert "dynscope_corpus_lib/__init__.py:8 in _log" in lib
    assert "installed code (dynscope_corpus_lib/__init__.py)" in lib and "cannot edit" in lib
    # the list that follows folds each site: 4 items for 23 breaks
    each = text.split("\nGraph breaks, each (folded by site)\n", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^  (\d+)\. ", each, re.M) == ["1", "2", "3", "4"]
    assert "x11" in each.splitlines()[0]
    # golden: the summary and the folded list (3.11's bytecode: later versions
    # may compile the loop's resume frames differently; the checks above hold)
    if sys.version_info >= (3, 12):
        return
    got = normalized(text.split("\nFrames not captured by rule", 1)[0], corpus_lib) + "\n"
    golden = os.path.join(HERE, "golden", "explain_many_breaks.txt")
    if os.environ.get("DYNSCOPE_UPDATE_GOLDEN"):
        with open(golden, "w") as fh:
            fh.write(got)
    with open(golden) as fh:
        assert got == fh.read()


ENGINE_LIMIT_IN_LIBRARY = """
import numpy as np
import dynscope
import dynscope_corpus_lib as lib
def f(x):
    return lib.engine_limited(x) + 1
out = dynscope.explain(f)(np.arange(3.0))
g = out.break_summary[0]
print(g.break_type, g.break_class, g.filename.endswith("dynscope_corpus_lib/__init__.py"))
print(g.hint)
"""


def test_an_engine_limit_in_installed_code_stays_ours_and_says_what_to_do(corpus_lib):
    # the class stays the engine's debt, and the hint does not tell the user
    # to change code in a package they cannot edit
    p = subprocess.run([sys.executable, "-c", ENGINE_LIMIT_IN_LIBRARY], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    first, hint = p.stdout.splitlines()[:2]
    assert first == "DS0009 engine limit True"
    assert "its debt, not yours" in hint and "installed code (dynscope_corpus_lib/__init__.py)" in hint
    assert "Move the call out" not in hint
