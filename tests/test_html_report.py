"""python -m dynscope report --html DIR FILE: the demo's recording rendered to
a static site and checked in a real headless Chromium -- no console error or
request from any page, the frame tree with the database's functions and
statuses, every relative link resolving, and a screenshot that is an image.

One Chromium serves every page: it is driven over the DevTools protocol on a
pipe (--remote-debugging-pipe: fd 3 in, fd 4 out, one JSON message per
NUL-terminated line), which needs nothing but the standard library.  The
tests that need no browser (links, bad input, older schemas, escaping of the
files) run without it.
"""
import base64
import collections
import html.parser
import json
import os
import select
import shutil
import sqlite3
import struct
import subprocess
import sys
import time
import urllib.parse
import zlib

import pytest

import _programs
from dynscope import _C
from dynscope.html_report import break_hint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# A second run in the same file, for what the demo lacks: a skipped frame
# (a break inside try), a reset (epoch 1), several runs in one file.
EXTRA = '''
import numpy as np
import dynscope


def leaf(x):
    return x * 3


@dynscope.optimize("eager")
def guarded(x):
    try:
        y = leaf(x)
        print(end="")
    except KeyError:
        y = None
    return y


@dynscope.optimize("eager")
def tolist(x):
    y = x * 2
    v = y.sum().item()
    return y + v


for i in range(3):
    guarded(np.ones(3))
    tolist(np.ones(3))
dynscope.reset()
tolist(np.ones(4))
'''


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("DYNSCOPE_DB", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def report_html(db, out):
    return run("-m", "dynscope", "report", "--html", str(out), str(db))


def query(db, sql, *params):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    db = d / "demo.db"
    p = run("-m", "dynscope", "run", "--db", str(db), "scripts/demo_workload.py")
    assert p.returncode == 0, p.stderr
    (d / "extra.py").write_text(EXTRA)
    p = run("-m", "dynscope", "run", "--db", str(db), str(d / "extra.py"))
    assert p.returncode == 0, p.stderr
    return db


@pytest.fixture(scope="module")
def site(recording):
    out = recording.parent / "site"
    p = report_html(recording, out)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "" and "index.html" in p.stdout
    return out


# ---------------------------------------------------------------------------
# Reading the pages

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Outline(html.parser.HTMLParser):
    """Per element with an id: its text, and the badges of its <summary>;
    every href and src; every id."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack = []       # (tag, id or None, class)
        self.text = {}
        self.badges = {}
        self.links = []
        self.failed_rows = {}  # id -> rows marked failed inside it
        self.feed(text)
        self.close()

    def _open_ids(self):
        return [i for _, i, _ in self.stack if i]

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("href", "src"):
            if name in a:
                self.links.append((tag, name, a[name]))
        if tag in VOID:
            return
        if tag == "tr" and "failed" in (a.get("class") or "").split():
            for i in self._open_ids():
                self.failed_rows[i] = self.failed_rows.get(i, 0) + 1
        self.stack.append((tag, a.get("id"), a.get("class") or ""))
        if a.get("id"):
            self.text.setdefault(a["id"], "")
            self.badges.setdefault(a["id"], [])

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        for i in self._open_ids():
            self.text[i] += data
        tags = [t for t, _, _ in self.stack]
        if self.stack and "badge" in self.stack[-1][2].split() and "summary" in tags:
            # the badge belongs to the element whose summary holds it
            owner = [i for t, i, _ in self.stack[:tags.index("summary")] if i]
            if owner:
                self.badges[owner[-1]].append(data)


def page(site, name):
    return Outline((site / name).read_text(encoding="utf-8"))


def registry_hint(kind, reason, filename):
    """The hint of the break's type in the break-type registry's C table
    (event/break_types.c), not the report's own lookup.  The demo breaks in
    the user's own file, where the report adds nothing to it."""
    type_id, _name, cls, hint = _C.break_type_of(kind, reason, filename)
    assert cls != "library code", (type_id, filename)
    return hint


def squash(text):
    return " ".join(text.split())


# ---------------------------------------------------------------------------
# One Chromium for every page

class Chromium:
    """A headless Chromium driven over the DevTools protocol on a pipe."""

    def __init__(self, profile):
        cmd_r, self._w = os.pipe()
        self._r, res_w = os.pipe()

        def fds():   # the browser reads fd 3 and writes fd 4
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # without the sanitizer preload of `make asan`: under it Chromium
        # never answered (issue 46)
        self.proc = _programs.popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self._events = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=True)

    def _recv(self, deadline):
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer within 30 s")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its pipe")
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def send(self, method, params=None, session=False):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        while True:
            m = self._recv(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self._events.append(m)

    def _wait(self, method):
        deadline = time.monotonic() + 30
        while True:
            for m in self._events:
                if m.get("method") == method:
                    return
            self._events.append(self._recv(deadline))

    def load(self, path):
        """Open a file; its DOM as Chromium serializes it, and every console
        message, uncaught exception, log error and non-file request."""
        self._events = []
        nav = self.send("Page.navigate", {"url": path.as_uri()}, session=True)
        problems = [f"navigation: {nav['errorText']}"] if nav.get("errorText") else []
        self._wait("Page.loadEventFired")
        dom = self.evaluate("document.documentElement.outerHTML")
        for m in self._events:
            p, method = m.get("params", {}), m.get("method")
            if method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                problems.append(f"exception: {d.get('exception', {}).get('description') or d['text']}")
            elif method == "Runtime.consoleAPICalled":
                problems.append(f"console.{p['type']}: {[a.get('value') for a in p['args']]}")
            elif method == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                problems.append(f"log {p['entry']['level']}: {p['entry']['text']}")
            elif method == "Network.requestWillBeSent":
                scheme = urllib.parse.urlsplit(p["request"]["url"]).scheme
                if scheme not in ("file", "data", "about"):
                    problems.append(f"request: {p['request']['url']}")
        return dom, problems

    def evaluate(self, expression):
        return self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                         session=True)["result"].get("value")

    def screenshot(self, path, width, height):
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False},
                  session=True)
        self.load(path)
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        return base64.b64decode(data)

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except (OSError, EOFError, TimeoutError, RuntimeError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH: scripts/install-deps.sh installs Debian's chromium, "
                    "the headless browser these tests drive")
    b = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def loaded(site, browser):
    """Every page of the site as Chromium saw it: {name: (dom, problems)}."""
    return {p.name: browser.load(p) for p in sorted(site.glob("*.html"))}


# ---------------------------------------------------------------------------
# In the browser

def test_every_page_loads_without_console_errors_or_requests(site, recording, loaded):
    rows = [r for (r,) in query(recording, "SELECT compile_row FROM compiles")]
    assert set(loaded) == {"index.html"} | {f"compile-{r}.html" for r in rows}
    assert {name: problems for name, (_, problems) in loaded.items() if problems} == {}


def test_the_detection_catches_an_injected_error(site, browser, tmp_path):
    bad = tmp_path / "index.html"
    text = (site / "index.html").read_text(encoding="utf-8")
    bad.write_text(text.replace("</body>", "<script>console.error('injected'); no_such_function();"
                                           "</script></body>"), encoding="utf-8")
    _, problems = browser.load(bad)
    assert any("injected" in p for p in problems), problems
    assert any("no_such_function" in p for p in problems), problems
    # and the page after it is clean again: the problems are per page
    _, problems = browser.load(site / "index.html")
    assert problems == []


def test_the_dom_has_the_frame_tree_with_the_databases_statuses(recording, loaded):
    dom, _ = loaded["index.html"]
    o = Outline(dom)
    codes = query(recording, "SELECT run_id, code_id, name FROM code_objects")
    assert codes
    for run_id, code_id, name in codes:
        def has(sql, *extra):
            return bool(query(recording, sql, run_id, code_id, *extra))
        frames = query(recording, "SELECT epoch, frame_id FROM frames WHERE run_id = ? AND code_id = ?",
                       run_id, code_id)
        want = set()
        if has("SELECT 1 FROM compiles WHERE run_id = ? AND code_id = ? AND outcome = 'ok'"):
            want.add("ok")
        if has("SELECT 1 FROM graph_breaks WHERE run_id = ? AND code_id = ?"):
            want.add("break")
        if has("SELECT 1 FROM frame_skips WHERE run_id = ? AND code_id = ?"):
            want.add("skipped")
        if has("SELECT 1 FROM cache_limits WHERE run_id = ? AND code_id = ?"):
            want.add("cache limit")
        if has("SELECT 1 FROM compiles WHERE run_id = ? AND code_id = ? AND outcome = 'error'"):
            want.add("error")
        if has("SELECT 1 FROM compiles WHERE run_id = ? AND code_id = ? AND outcome IS NULL"):
            want.add("compiling")
        node = f"code-{run_id}-{code_id}"
        assert squash(o.text[node]).startswith(name), (node, o.text[node][:80])
        assert set(o.badges[node]) == want, (name, o.badges[node])
        for epoch, frame_id in frames:
            fid = f"frame-{run_id}-{code_id}-{epoch}-{frame_id}"
            assert fid in o.text, fid
            compiles = query(recording, "SELECT compile_id FROM compiles WHERE run_id = ? AND"
                                        " code_id = ? AND epoch = ? AND frame_id = ?",
                             run_id, code_id, epoch, frame_id)
            for (compile_id,) in compiles:
                assert compile_id in o.text[fid]
            if has("SELECT 1 FROM cache_limits WHERE run_id = ? AND code_id = ? AND epoch = ?"
                   " AND frame_id = ?", epoch, frame_id):
                assert "cache limit" in o.badges[fid]
    # the demo has each status: smooth's cache limit, forward's branch break; the extra run a skip
    statuses = {b for badges in o.badges.values() for b in badges}
    assert {"ok", "break", "skipped", "cache limit"} <= statuses
    # the page's own script is the only one: no text from the database became one
    assert dom.count("<script") == 1


def test_the_tree_buttons_open_close_and_filter(site, browser):
    _, problems = browser.load(site / "index.html")
    assert problems == []
    count = "document.querySelectorAll('details.code').length"
    opened = "document.querySelectorAll('details.code[open]').length"
    shown = "[...document.querySelectorAll('details.code')].filter(d => d.style.display != 'none').length"
    n = browser.evaluate(count)
    assert n > 0 and browser.evaluate(opened) == 0
    browser.evaluate("document.getElementById('expand-all').click()")
    assert browser.evaluate(opened) == n
    browser.evaluate("document.getElementById('collapse-all').click()")
    assert browser.evaluate(opened) == 0
    browser.evaluate("var f = document.getElementById('tree-filter'); f.value = 'smoo';"
                     " f.dispatchEvent(new Event('input'))")
    assert browser.evaluate(shown) == 1


def test_the_compile_time_table_holds_every_compile_and_sorts_on_a_click(site, recording, browser):
    _, problems = browser.load(site / "index.html")
    assert problems == []
    cells = ("[...document.querySelectorAll('#compile-time tbody tr')].map(r => "
             "[r.cells[2].textContent, ...[...r.querySelectorAll('[data-v]')].map(c => +c.dataset.v), "
             "+r.cells[11].textContent])")
    want = [(f"[{cid}]", *vals) for cid, *vals in query(
        recording, "SELECT compile_id, duration_ns, trace_ns, guards_ns, graph_ns, backend_ns, plan_ns,"
                   " events_ns, attempts FROM compiles ORDER BY duration_ns DESC")]
    assert [tuple(r) for r in browser.evaluate(cells)] == want and len(want) >= 3
    for r in want:              # the phases add up to the total
        assert sum(r[2:7]) == r[1]
    # a click on "guards" sorts by it, largest first; a second click reverses
    browser.evaluate("document.querySelectorAll('#compile-time th')[6].click()")
    got = [r[3] for r in browser.evaluate(cells)]
    assert got == sorted((r[3] for r in want), reverse=True)
    browser.evaluate("document.querySelectorAll('#compile-time th')[6].click()")
    assert [r[3] for r in browser.evaluate(cells)] == sorted(r[3] for r in want)


def test_the_screenshot_of_the_index_is_an_image(site, browser):
    png = browser.screenshot(site / "index.html", 1280, 900)
    (site.parent / "index.png").write_bytes(png)
    width, height, colours = png_summary(png, rows=320)
    assert (width, height) == (1280, 900)
    # header, tables and badges: far more than a blank page's one or two colours
    assert len(colours) > 50
    assert colours.most_common(1)[0][1] < 0.9 * sum(colours.values())


def png_summary(png, rows):
    """The size of a PNG and a Counter of the pixels of its first rows
    (8-bit RGB or RGBA, non-interlaced: what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = ihdr
    assert depth == 8 and colour in (2, 6) and interlace == 0, ihdr
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompressobj().decompress(idat, (stride + 1) * rows)
    prev = bytearray(stride)
    colours = collections.Counter()
    for y in range(rows):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif f == 4:
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return width, height, colours


# ---------------------------------------------------------------------------
# The files

def test_every_relative_link_resolves(site):
    assert_links_resolve(site)


def assert_links_resolve(site):
    pages = {p.name: page(site, p.name) for p in site.glob("*.html")}
    checked = 0
    for name, o in pages.items():
        for tag, attr, url in o.links:
            parts = urllib.parse.urlsplit(url)
            assert not parts.scheme and not parts.netloc and not parts.path.startswith("/"), (name, url)
            assert attr == "href", f"{name}: <{tag} src={url!r}>: the pages load nothing"
            target = parts.path or name
            assert target in pages, (name, url)
            if parts.fragment:
                assert parts.fragment in pages[target].text, (name, url)
            checked += 1
    assert checked > 100


def test_the_index_sections_hold_the_databases_rows(site, recording):
    o = page(site, "index.html")
    failures = squash(o.text["failures"])
    for (reason,) in query(recording, "SELECT reason FROM compiles WHERE frame_compile_id > 0"):
        assert squash(reason) in failures
    for (reason,) in query(recording, "SELECT reason FROM cache_limits"):
        assert reason in failures
    assert "epoch 1 begins" in failures
    skips = query(recording, "SELECT reason FROM frame_skips")
    assert skips and all(reason in failures for (reason,) in skips)
    breaks = squash(o.text["breaks"])
    sites = query(recording, "SELECT kind, reason, filename, lineno FROM break_sites")
    assert sites
    for kind, reason, filename, lineno in sites:
        assert reason in breaks and f"{filename}:{lineno}" in breaks
        assert registry_hint(kind, reason, filename) in breaks
        (stack,) = query(recording, "SELECT user_stack FROM graph_breaks WHERE kind = ? AND"
                                    " reason = ? AND filename = ? AND lineno = ?",
                         kind, reason, filename, lineno)[0]
        assert squash(json.loads(stack)[-1][3]) in breaks
    entries = o.text["entries"]
    for compile_id, hits in query(recording, "SELECT compile_id, hits FROM cache_entries"):
        assert compile_id in entries and str(hits) in entries
    # the timeline links every compile, and marks the cache limit and the reset
    index = (site / "index.html").read_text(encoding="utf-8")
    svg = index[index.index('<svg class="timeline"'):index.rindex("</svg>")]
    for (row,) in query(recording, "SELECT compile_row FROM compiles"):
        assert f'href="compile-{row}.html"' in svg
    assert "cache limit at" in svg and "reset: epoch 1" in svg


def test_a_compile_page_has_graphs_guards_and_break(site, recording):
    # forward's first compile: a graph, a break on the tensor branch, guards
    (row,) = query(recording, "SELECT c.compile_row FROM compiles c JOIN code_objects USING"
                              " (run_id, code_id) WHERE name = 'forward' AND compile_id = '0/0'"
                              " AND run_id = 1")[0]
    o = page(site, f"compile-{row}.html")
    (ops, code), = query(recording, "SELECT ops, code FROM graphs WHERE compile_row = ?", row)
    for op in ops.split(","):
        assert op in o.text["graphs"]
    assert code.splitlines()[0] in o.text["graphs"]
    kind, reason, lineno = query(recording, "SELECT kind, reason, lineno FROM graph_breaks"
                                            " WHERE compile_row = ?", row)[0]
    ended = squash(o.text["ended"])
    assert reason in ended and f"demo_workload.py:{lineno}" in ended
    # the branch on y.sum(): the registry's DS0003, written out here
    assert kind == "data_dependent_branch"
    assert ("hint: Select with np.where / torch.where or a mask, so both sides are computed in "
            "the graph; or move the branch out of the captured function.") in ended
    assert registry_hint(kind, reason, "demo_workload.py") in ended
    cols = {r[1] for r in query(recording, "PRAGMA table_info(guards)")}
    guards = query(recording, "SELECT g.expr, " + ("g.filename, g.lineno" if "filename" in cols else
                                                    "NULL, NULL")
                   + " FROM guards g JOIN cache_entries e USING (run_id, code_id, epoch, compile_id)"
                     " WHERE e.compile_row = ? ORDER BY idx", row)
    assert guards
    text = o.text["guards"]
    for expr, filename, lineno in guards:
        assert expr in text   # <code relu> and <module 'numpy'> too: escaped, shown as text
        if filename:
            assert f"{filename}:{lineno}" in text
    if "filename" in cols:
        assert "engine" in text   # the backend guard: the engine's own
    raw = (site / f"compile-{row}.html").read_text(encoding="utf-8")
    assert "&lt;code relu&gt;" in raw and "<code relu>" not in raw


def test_a_recompile_page_shows_the_reason_and_the_nearest_entry(site, recording):
    recompiles = query(recording, "SELECT compile_row, reason FROM compiles WHERE frame_compile_id > 0")
    assert recompiles
    for row, reason in recompiles:
        o = page(site, f"compile-{row}.html")
        assert squash(reason) in squash(o.text["recompile"])
    has_diffs = query(recording, "SELECT 1 FROM sqlite_master WHERE name = 'recompile_diffs'")
    if not has_diffs:
        version = query(recording, "PRAGMA user_version")[0][0]
        assert "has no recompile_diffs table" in page(site, f"compile-{row}.html").text["nearest"]
        pytest.skip(f"the engine records schema v{version}: recompile_diffs comes with v4")
    diffs = query(recording, "SELECT compile_row, entry_compile_id, failing, idx, expr, observed"
                             " FROM recompile_diffs ORDER BY compile_row, idx")
    assert diffs
    by_row = {}
    for r in diffs:
        by_row.setdefault(r[0], []).append(r)
    for row, rows in by_row.items():
        o = page(site, f"compile-{row}.html")
        nearest = o.text["nearest"]
        entry, failing = rows[0][1], rows[0][2]
        assert f"Entry [{entry}] was the nearest" in squash(nearest)
        assert f"{failing} of its guards failed" in nearest
        for _, _, _, idx, expr, observed in rows:
            assert expr in nearest and observed in nearest
        assert o.failed_rows.get("nearest") == len({r[3] for r in rows if r[3] is not None})
        # the entry is a link to its own compile's page
        (entry_row,) = query(recording, "SELECT e.compile_row FROM cache_entries e JOIN compiles c"
                                        " ON c.compile_row = ? AND e.run_id = c.run_id AND"
                                        " e.code_id = c.code_id AND e.epoch = c.epoch"
                                        " WHERE e.compile_id = ?", row, entry)[0]
        assert ("a", "href", f"compile-{entry_row}.html") in o.links
        assert "The cost of the miss: this compile took" in squash(nearest)


def downgrade(src, dst, version):
    """A copy of a recorded file as an older schema wrote it: v3 lacks v4's
    columns and recompile_diffs; v2 also v3's views."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("DROP TABLE IF EXISTS recompile_diffs")
    for table, cols in (("guards", ("filename", "lineno", "user_stack")),
                        ("guard_failures", ("filename", "lineno")),
                        ("compiles", ("hatches", "trace_ns", "guards_ns", "graph_ns", "backend_ns",
                                      "plan_ns", "events_ns", "attempts", "call_path"))):
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        for col in cols:
            if col in have:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    if version == 2:
        for view in ("run_summary", "break_sites", "cache_limit_hits"):
            con.execute(f"DROP VIEW {view}")
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_file_renders_untouched(recording, tmp_path, version):
    old = tmp_path / f"v{version}.db"
    downgrade(recording, old, version)
    before = old.read_bytes()
    out = tmp_path / "site"
    p = report_html(old, out)
    assert p.returncode == 0, p.stderr
    assert old.read_bytes() == before
    assert f"schema v{version}" in (out / "index.html").read_text(encoding="utf-8")
    o = page(out, "index.html")
    for (name,) in query(old, "SELECT name FROM code_objects"):
        assert name in o.text["frames"]
    (row,) = query(old, "SELECT min(compile_row) FROM compiles WHERE frame_compile_id > 0")[0]
    o = page(out, f"compile-{row}.html")
    assert "has no recompile_diffs table" in o.text["nearest"]
    # where the guards came from is unknown, not the engine's
    assert "does not say where guards came from" in o.text["guards"] and "engine" not in o.text["guards"]
    assert_links_resolve(out)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "this recording has no compile phases (schema v5 added them)" in index


def test_text_from_the_database_is_escaped(recording, tmp_path):
    db = tmp_path / "hostile.db"
    shutil.copyfile(recording, db)
    con = sqlite3.connect(db)
    con.execute("UPDATE code_objects SET name = name || '<script>alert(1)</script>&amp;'")
    con.execute("UPDATE compiles SET reason = reason || ' <img src=x onerror=alert(2)>'"
                " WHERE reason IS NOT NULL")
    con.commit()
    con.close()
    out = tmp_path / "site"
    assert report_html(db, out).returncode == 0
    for p in out.glob("*.html"):
        text = p.read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<img" not in text, p.name
        assert text.count("<script") <= 1
    text = (out / "index.html").read_text(encoding="utf-8")
    assert "forward&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;" in text
    assert "forward<script>alert(1)</script>&amp;" in page(out, "index.html").text["frames"]


def test_rows_of_a_live_run_or_lost_events_render(recording, tmp_path):
    """Rows the recorder leaves partial: a run without ended_at, an attempt
    still compiling, one whose start event was lost (no frame, no start
    time), a skip and a cache limit with no entry point."""
    db = tmp_path / "partial.db"
    shutil.copyfile(recording, db)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET ended_at = NULL WHERE run_id = 2")
    con.execute("INSERT INTO compiles (run_id, code_id, epoch, compile_id, frame_id, started_at)"
                " SELECT run_id, code_id, 0, '90/0', 90, started_at FROM compiles WHERE compile_row = 1")
    # three functions of run 1 (code ids are the process's: whatever the hook saw first)
    codes = [c for (c,) in con.execute("SELECT code_id FROM code_objects WHERE run_id = 1"
                                       " ORDER BY code_id LIMIT 3")]
    con.execute("INSERT INTO compiles (run_id, code_id, epoch, compile_id, outcome, duration_ns)"
                " VALUES (1, ?, 0, '91/0', 'error', 5)", (codes[0],))
    con.execute("INSERT INTO frame_skips (run_id, code_id, epoch, reason, at) VALUES (1, ?, 0, 'x', 1)",
                (codes[1],))
    con.execute("INSERT INTO cache_limits (run_id, code_id, epoch, reason, at) VALUES (1, ?, 0, 'y', 1)",
                (codes[2],))
    con.commit()
    con.close()
    out = tmp_path / "site"
    p = report_html(db, out)
    assert p.returncode == 0, p.stderr
    assert_links_resolve(out)
    o = page(out, "index.html")
    assert "live" in o.text["runs"] and "still compiling" in o.text["failures"]
    assert {"error", "compiling"} <= {b for badges in o.badges.values() for b in badges}


def make_bad_input(case, path, recording):
    if case == "text":
        path.write_text("not a database\n" * 10)
    elif case == "foreign":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE notes (body TEXT)")
        con.commit()
        con.close()
    elif case == "corrupt":   # the header stays (a dynscope file), the pages are garbage
        data = recording.read_bytes()
        path.write_bytes(data[:4096] + b"\xa5" * (len(data) - 4096))
    elif case == "directory":
        path.mkdir()


@pytest.mark.parametrize("case", ["missing", "text", "foreign", "corrupt", "directory"])
def test_bad_input_is_one_line_and_status_2(recording, tmp_path, case):
    db = tmp_path / "in.db"
    make_bad_input(case, db, recording)
    p = report_html(db, tmp_path / "site")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("dynscope report: "), p.stderr


@pytest.mark.parametrize("case", ["file", "under a file"])
def test_an_unwritable_dir_is_one_line_and_status_2(recording, tmp_path, case):
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a directory\n")
    out = blocker if case == "file" else blocker / "site"
    p = report_html(recording, out)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.splitlines()) == 1 and f"cannot write {out}" in p.stderr, p.stderr


def test_without_the_option_the_report_is_text(recording):
    p = run("-m", "dynscope", "report", str(recording))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"dynscope report: {recording}\n")
    assert "Top recompiling functions" in p.stdout and "<html" not in p.stdout


# ---------------------------------------------------------------------------
# The report's hints are explain's: one table (the break-type registry).

HINTED = '''
import numpy as np


def breaks_three_ways(x):
    y = x * 2
    print(end="")                      # a print
    z = y * float(y.sum())             # a value leaves the graph
    if z.sum() > 0:                    # a branch on a tensor value
        return z + 1
    return z - 1
'''


@pytest.mark.parametrize("where", ["your code", "installed code"])
def test_the_reports_hint_for_a_break_is_explains(tmp_path, where):
    """For each break explain reports, the HTML report's hint (break_hint, what
    its pages print) is explain's hint for it: in the user's code the
    registry's own, in installed code the wording explain has for a site the
    user cannot edit."""
    import sysconfig

    import numpy as np

    import dynscope
    base = tmp_path if where == "your code" else sysconfig.get_paths()["purelib"]
    ns = {}
    # compiled under the file name only: nothing is written into site-packages
    exec(compile(HINTED, os.path.join(base, "dynscope_hint_probe.py"), "exec"), ns)
    out = dynscope.explain(ns["breaks_three_ways"])(np.arange(3.0))
    assert len(out.break_reasons) == 3, out
    hints = {(g.reason, g.filename): g.hint for g in out.break_summary}
    for br in out.break_reasons:
        site = br.user_stack[-1].filename
        explains = hints[(br.reason, site)]
        assert break_hint(br.kind, br.reason, site) == explains
        registry = _C.break_type_of(br.kind, br.reason, site)[3]
        if where == "your code":
            assert explains == registry
        else:
            assert explains != registry and registry in explains and "installed code" in explains


def test_files_it_writes_have_no_shared_write_and_no_symlink_is_followed(recording, tmp_path):
    # a umask that would let the group and the world write
    old_umask = os.umask(0)
    try:
        site = tmp_path / "site"
        p = report_html(recording, site)
        assert p.returncode == 0, p.stderr
        modes = {f.name: f.stat().st_mode & 0o777 for f in site.iterdir()}
        assert modes and all(m & 0o022 == 0 for m in modes.values()), modes
        # an existing page that anyone could write loses those bits when rewritten
        (site / "index.html").chmod(0o666)
        assert report_html(recording, site).returncode == 0
        assert (site / "index.html").stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old_umask)
    # a link planted at a page's name: the write fails, the link's target is untouched
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (site / "index.html").unlink()
    (site / "index.html").symlink_to(target)
    p = report_html(recording, site)
    assert p.returncode == 2
    assert "index.html is a symbolic link, which is not followed" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert target.read_text() == "keep me"
