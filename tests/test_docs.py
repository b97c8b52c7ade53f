"""README and docs/ say what the code does (issue 45).

Each kind of claim has a checker that returns the disagreements it finds
(an empty list when docs and code agree), and each checker runs twice: on
the real tree, and on inputs with drift planted in them, to show it catches
that drift.

- schema: the version docs/sql.md and README name, and every table, view and
  column of a database the recorder writes, against docs/sql.md;
- API: `dynscope.__all__` against README and docs/api.md; every
  `dynscope.x.y` named in README or docs/ exists; docs/api.md's signatures
  and attribute tables against the real objects;
- CLI: `python -m dynscope`'s commands and options (its --help) against
  README, docs/cli.md and every command line the docs show; dyntop's options
  (its parser, its --help) and keys (the code that handles them, the help
  screen's list) against docs/dyntop.md and docs/dyntop.1;
- switches: every DYNSCOPE_* variable a source reads (C, Python, shell,
  tests included) against the one table of docs/config.md;
- README's "What dynscope does not do yet": each item still holds, shown by a
  small program per item.
"""
from __future__ import annotations

import ast
import copy
import functools
import inspect
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

import _programs
import dynscope

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
DYNTOP = os.path.join(ROOT, "build", "dyntop")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as fh:
        return fh.read()


def doc_texts():
    """{relative path: text} of README.md, docs/*.md and the man page."""
    texts = {"README.md": read("README.md"), "docs/dyntop.1": read("docs", "dyntop.1")}
    for name in sorted(os.listdir(DOCS)):
        if name.endswith(".md"):
            texts[f"docs/{name}"] = read("docs", name)
    return texts


def sections(text, level):
    """{heading: body} of the markdown headings of exactly `level` #s; a body
    runs to the next heading of that level or higher (a `# comment` line of a
    fenced code block is no heading)."""
    out = {}
    heading, body, fenced = None, [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^(#+) (.*)$", line.rstrip("\n"))
        if m and len(m.group(1)) <= level:
            if heading is not None:
                out[heading] = "".join(body)
            heading, body = (m.group(2).strip() if len(m.group(1)) == level else None), []
        elif heading is not None:
            body.append(line)
    if heading is not None:
        out[heading] = "".join(body)
    return out


def table_rows(text):
    """The cells of each markdown table row in `text` (header and separator
    rows included; callers skip what they do not want)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def markdown_code(text):
    """The code of a markdown text: each line of its fenced blocks and each
    inline code span, in order."""
    code = []
    for i, part in enumerate(re.split(r"^```[^\n]*\n", text, flags=re.M)):
        if i % 2:
            code.extend(part.splitlines())
        else:
            code.extend(re.findall(r"`([^`\n]+)`", part))
    return code


def roff_text(text):
    """A man page's text with roff escapes undone (\\- is -, \\e is \\, fonts dropped)."""
    text = re.sub(r"\\f[BIRP]", "", text)
    return text.replace("\\-", "-").replace("\\e", "\\").replace("\\(em", "--")


def added(problems, baseline):
    """What planted drift adds to the problems of the tree as it is.  The
    tests on the real tree require those to be none; comparing with them
    keeps a planting test about its own drift while the tree has some."""
    return [p for p in problems if p not in baseline]


def slug(heading):
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# ---------------------------------------------------------------------------
# Schema: docs/sql.md against a database the recorder writes.

def record_fresh_database(path):
    """A new dynscope database, as the recorder writes it (a process of its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNSCOPE_")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    subprocess.run([sys.executable, "-c",
                    "import sys, dynscope; dynscope.record(sys.argv[1]); dynscope.stop_recording()",
                    str(path)], env=env, cwd=ROOT, check=True, timeout=120)


def schema_of(path):
    """(PRAGMA user_version, {name: (type, [columns])}) of every table and view."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        objects = {}
        for kind, name in con.execute("SELECT type, name FROM sqlite_master WHERE type IN "
                                      "('table', 'view') AND name NOT LIKE 'sqlite_%'"):
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
            objects[name] = (kind, cols)
        return version, objects
    finally:
        con.close()


def sql_doc_objects(doc):
    """{name: (kind, section body)} of docs/sql.md's `### \\`name\\`` sections
    under "## Tables" (kind table) and "## Views" (kind view)."""
    top = sections(doc, 2)
    out = {}
    for heading, kind in (("Tables", "table"), ("Views", "view")):
        body = top.get(heading, "")
        for m in re.finditer(r"^### `(\w+)`[^\n]*\n(.*?)(?=^### |\Z)", body, re.M | re.S):
            out[m.group(1)] = (kind, m.group(2))
    return out


def documented_columns(name, objects, docs):
    """The columns a section names: in backticks anywhere in it, plus every
    column of X where it says "The columns of `X`"."""
    body = docs[name][1]
    cols = set(re.findall(r"`([A-Za-z_]\w*)`", body))
    for other in re.findall(r"[Tt]he columns of `(\w+)`", body):
        if other in objects:
            cols.update(objects[other][1])
    return cols


def check_schema(version, objects, sql_doc, readme):
    problems = []
    m = re.search(r"`PRAGMA user_version` is the schema version\. It is (\d+) today", sql_doc)
    if m is None:
        problems.append("docs/sql.md does not say which schema version is written today")
    elif int(m.group(1)) != version:
        problems.append(f"docs/sql.md says the schema version is {m.group(1)} today; "
                        f"the recorder writes {version}")
    versions = [int(r[0]) for r in table_rows(sections(sql_doc, 2).get("Versions", ""))
                if r[0].isdigit()]
    if not versions or max(versions) != version:
        problems.append(f"docs/sql.md's Versions table ends at {max(versions, default=None)}; "
                        f"the recorder writes {version}")
    m = re.search(r"schema v(\d+)", readme)
    if m is None or int(m.group(1)) != version:
        problems.append(f"README names schema v{m.group(1) if m else '?'}; the recorder writes {version}")
    docs = sql_doc_objects(sql_doc)
    for name, (kind, cols) in sorted(objects.items()):
        if name not in docs:
            problems.append(f"{kind} {name} is in the schema but has no section in docs/sql.md")
            continue
        if docs[name][0] != kind:
            problems.append(f"docs/sql.md documents {name} as a {docs[name][0]}; it is a {kind}")
        missing = [c for c in cols if c not in documented_columns(name, objects, docs)]
        if missing:
            problems.append(f"docs/sql.md's section on {name} does not name its columns {missing}")
    for name, (kind, _) in sorted(docs.items()):
        if name not in objects:
            problems.append(f"docs/sql.md documents the {kind} {name}, which the schema does not create")
    return problems


@pytest.fixture(scope="module")
def fresh_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "fresh.db"
    record_fresh_database(path)
    return path


def test_sql_md_documents_the_schema_the_recorder_writes(fresh_db):
    version, objects = schema_of(fresh_db)
    assert version >= 1 and "runs" in objects and "recompile_history" in objects
    assert check_schema(version, objects, read("docs", "sql.md"), read("README.md")) == []


def test_the_schema_check_catches_a_new_table_column_version_or_a_ghost_section(fresh_db, tmp_path):
    planted = tmp_path / "planted.db"
    shutil.copy(fresh_db, planted)
    con = sqlite3.connect(planted)
    con.executescript("CREATE TABLE planted_table (x INTEGER);"
                      "ALTER TABLE runs ADD COLUMN planted_column TEXT;"
                      "CREATE VIEW planted_view AS SELECT 1 AS y;")
    version, _ = schema_of(fresh_db)
    con.execute(f"PRAGMA user_version = {version + 1}")
    con.commit()
    con.close()
    v, objects = schema_of(planted)
    problems = check_schema(v, objects, read("docs", "sql.md"), read("README.md"))
    joined = "\n".join(problems)
    assert "table planted_table is in the schema" in joined
    assert "view planted_view is in the schema" in joined
    assert "runs does not name its columns ['planted_column']" in joined
    assert f"the recorder writes {version + 1}" in joined
    # the drift issue 45 found: docs/sql.md said 3 while the recorder wrote 4
    _, objects = schema_of(fresh_db)
    doc = re.sub(r"It is \d+ today", f"It is {version - 1} today", read("docs", "sql.md"))
    doc = doc.replace("\n## Views\n", "\n### `ghost_table`: gone\n\n## Views\n", 1)
    problems = check_schema(version, objects, doc, read("README.md"))
    assert (f"docs/sql.md says the schema version is {version - 1} today; "
            f"the recorder writes {version}") in problems
    assert "docs/sql.md documents the table ghost_table, which the schema does not create" in problems


# ---------------------------------------------------------------------------
# Public API: dynscope.__all__, docs/api.md, README, and every dynscope.x named.

FILE_SUFFIXES = {"db", "md", "py", "so", "json", "html", "txt"}   # dynscope.db is a file


def resolve(dotted):
    """The object `dynscope.a.b` names (submodules imported), or raise LookupError."""
    obj, path = dynscope, "dynscope"
    for part in dotted.split(".")[1:]:
        path += "." + part
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = __import__(path, fromlist=["_"])
        except ImportError:
            raise LookupError(path) from None
    return obj


def check_named_objects(texts):
    """Every `dynscope.a.b` a doc names (in code or prose) exists."""
    problems = []
    for where, text in sorted(texts.items()):
        for dotted in sorted(set(re.findall(r"(?<![\w/.-])dynscope(?:\.[A-Za-z_]\w*)+", text))):
            if dotted.split(".")[1] in FILE_SUFFIXES:
                continue
            try:
                resolve(dotted)
            except LookupError:
                problems.append(f"{where} names {dotted}, which does not exist")
    return problems


def api_entries(api_doc):
    """{name: (signature or None, section body)} of docs/api.md's
    `### \\`dynscope.name(...)\\`` headings."""
    out = {}
    for m in re.finditer(r"^### `dynscope\.(\w+)(\([^`]*\))?`[^\n]*\n(.*?)(?=^##|\Z)",
                         api_doc, re.M | re.S):
        out[m.group(1)] = (m.group(2), m.group(3))
    return out


def signature_of_doc(sig):
    """[(name, kind, default)] of a documented signature such as
    "(backend='eager', *, fullgraph=False)"."""
    fn = ast.parse(f"def _{sig}: pass").body[0]
    a = fn.args
    out = []
    plain = a.posonlyargs + a.args
    defaults = [None] * (len(plain) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(plain, defaults):
        kind = "POSITIONAL_ONLY" if arg in a.posonlyargs else "POSITIONAL_OR_KEYWORD"
        out.append((arg.arg, kind, ast.literal_eval(d) if d is not None else inspect.Parameter.empty))
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", inspect.Parameter.empty))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        default = ast.literal_eval(d) if d is not None else inspect.Parameter.empty
        out.append((arg.arg, "KEYWORD_ONLY", default))
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", inspect.Parameter.empty))
    return out


def signature_of_code(obj):
    """[(name, kind, default)] of a callable, or None when Python cannot tell."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [(p.name, p.kind.name, p.default) for p in sig.parameters.values()]


def public_attributes(obj):
    """The attributes a user reads: no _names, not tuple's methods nor
    structseq's sizes (a field named `count` stays)."""
    sizes = {"n_fields", "n_sequence_fields", "n_unnamed_fields"}
    return {a for a in dir(obj) if not a.startswith("_") and a not in sizes
            and getattr(type(obj), a, None) is not getattr(tuple, a, object())}


def attribute_tables(api_doc):
    """{type name: {attribute}} of docs/api.md's "#### Attributes of `T`" tables."""
    out = {}
    for m in re.finditer(r"^#### Attributes of `([\w.]+)`[^\n]*\n(.*?)(?=^#|\Z)", api_doc, re.M | re.S):
        attrs = set()
        for row in table_rows(m.group(2)):
            attrs.update(re.findall(r"`\.(\w+)`", row[0]))
        out[m.group(1)] = attrs
    return out


def check_api(module, all_names, api_doc, readme, instances):
    """`instances`: {type name of an attribute table: a real object of it}."""
    problems = []
    entries = api_entries(api_doc)
    in_readme = set(re.findall(r"(?<![\w.])dynscope\.(\w+)", readme))
    for name in all_names:
        if name not in entries and name not in in_readme:
            problems.append(f"dynscope.{name} is in __all__ but neither README nor docs/api.md documents it")
    for name, (sig, _) in sorted(entries.items()):
        if name not in all_names:
            problems.append(f"docs/api.md calls dynscope.{name} public; it is not in dynscope.__all__")
        if not hasattr(module, name):
            problems.append(f"docs/api.md documents dynscope.{name}, which does not exist")
            continue
        if sig is not None:
            want = signature_of_code(getattr(module, name))
            if want is not None and signature_of_doc(sig) != want:
                problems.append(f"docs/api.md gives dynscope.{name}{sig}; the code's is "
                                f"{inspect.signature(getattr(module, name))}")
    tables = attribute_tables(api_doc)
    for type_name, documented in sorted(tables.items()):
        if type_name not in instances:
            problems.append(f"docs/api.md has attributes of {type_name}, which this test cannot check")
            continue
        real = public_attributes(instances[type_name])
        for a in sorted(documented - real):
            problems.append(f"docs/api.md lists {type_name}.{a}, which does not exist")
        for a in sorted(real - documented):
            problems.append(f"{type_name}.{a} exists but docs/api.md's table of {type_name} omits it")
    for type_name in sorted(set(instances) - set(tables)):
        problems.append(f"docs/api.md has no table of the attributes of {type_name}")
    return problems


def _api_sample(x, n):
    y = x + n
    print("api sample")            # a graph break
    return y * 2


@pytest.fixture
def api_instances():
    out = dynscope.explain(_api_sample)(np.ones(3), 1)
    opt = dynscope.optimize("eager")(_api_sample)
    opt(np.ones(3), 1)
    entry = dynscope.cache_entries(_api_sample)[0]
    assert out.break_reasons and out.break_summary and out.out_guards and entry.guards
    return {
        "ExplainOutput": out,
        "BreakReason": out.break_reasons[0],
        "StackFrame": out.break_reasons[0].user_stack[0],
        "BreakGroup": out.break_summary[0],
        "GuardInfo": out.out_guards[0],
        "CacheEntry": entry,
        "dynscope.config": dynscope.config,
    }


def test_every_public_name_is_documented_and_every_documented_name_exists(api_instances):
    problems = check_api(dynscope, dynscope.__all__, read("docs", "api.md"), read("README.md"),
                         api_instances)
    assert problems == []
    assert check_named_objects(doc_texts()) == []


def test_the_api_check_catches_an_undocumented_name_a_ghost_name_and_a_stale_signature(api_instances):
    class Planted:
        pass
    module = Planted()
    for name in dynscope.__all__:
        setattr(module, name, getattr(dynscope, name))
    module.planted_function = lambda: None
    api_doc = read("docs", "api.md")
    m = re.search(r"^### `dynscope\.record\(([^`]*)\)`", api_doc, re.M)
    assert m, "docs/api.md documents dynscope.record(...)"
    api_doc = api_doc.replace(m.group(0), "### `dynscope.record(path, *, snapshot_interval=1.0)`")
    api_doc += "\n### `dynscope.ghost_function()`\n\nGone.\n"
    api_doc = api_doc.replace("| `.graph_count` |", "| `.graph_count`, `.planted_attr` |")
    instances = dict(api_instances, PlantedType=object())
    problems = check_api(module, dynscope.__all__ + ["planted_function"], api_doc,
                         read("README.md"), instances)
    joined = "\n".join(problems)
    assert "dynscope.planted_function is in __all__ but neither README nor docs/api.md" in joined
    assert "docs/api.md calls dynscope.ghost_function public; it is not in dynscope.__all__" in joined
    assert "docs/api.md documents dynscope.ghost_function, which does not exist" in joined
    assert "docs/api.md gives dynscope.record(path, *, snapshot_interval=1.0)" in joined
    assert "docs/api.md lists ExplainOutput.planted_attr, which does not exist" in joined
    assert "docs/api.md has no table of the attributes of PlantedType" in joined
    # a real attribute left out of a table
    out = api_instances["ExplainOutput"]
    trimmed = re.sub(r"^\| `\.skip_summary` \|.*\n", "", read("docs", "api.md"), flags=re.M)
    assert "ExplainOutput.skip_summary exists but docs/api.md's table of ExplainOutput omits it" in \
        check_api(dynscope, dynscope.__all__, trimmed, read("README.md"), {"ExplainOutput": out})
    # a name no longer there, as docs/events.md's dynscope.events() was
    assert check_named_objects({"x.md": "the log (`dynscope.events()`); `dynscope.db` is a file"}) == [
        "x.md names dynscope.events, which does not exist"]


# ---------------------------------------------------------------------------
# python -m dynscope: its commands and options, README, docs/cli.md and every
# command line the docs show.

def dynscope_help(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               COLUMNS="100")
    p = subprocess.run([sys.executable, "-m", "dynscope", *args, "--help"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (args, p.stderr)
    return p.stdout


def help_commands(top_help):
    """The commands argparse lists under COMMAND."""
    block = top_help.split("COMMAND\n", 2)[-1].split("\noptions:", 1)[0]
    return re.findall(r"^    (\w+)", block, re.M)


def help_options(help_text):
    """{option: takes a value} of a --help text's "options:" list (argparse's
    and dyntop's layout: "  -d, --delay SECS   text")."""
    opts = {}
    body = help_text.split("\noptions:\n", 1)[-1]
    for line in body.splitlines():
        if not line.strip():
            if opts:
                break
            continue
        m = re.match(r"^\s{2,8}(-.*?)(?:\s{2,}|$)", line)
        if not m:
            continue
        for piece in m.group(1).split(", "):
            words = piece.split()
            if words and re.match(r"^--?[A-Za-z]", words[0]):
                opts[words[0]] = len(words) > 1
    return opts


OPTION = re.compile(r"^--?[A-Za-z][\w-]*$")


def invocation_options(cmd, words, takes_value):
    """The options a command line passes to `cmd` (its words after the command).
    For run, the program's own arguments (after the script, `-m MODULE` or
    `--`) are not dynscope's."""
    used = []
    skip = False
    for w in words:
        w = w.strip("[]()|,")
        if skip:
            skip = False
            continue
        name = w.split("=", 1)[0]
        if cmd == "run" and (w == "--" or (w and not w.startswith("-") and w not in ("|", "…", "..."))):
            break
        if not OPTION.match(name):
            continue
        used.append(name)
        if cmd == "run" and name == "-m":
            break
        if "=" not in w and takes_value.get(name):
            skip = True
    return used


def command_lines(texts):
    """(where, command, [words]) of each `python -m dynscope command ...` in the
    code of the markdown texts and in the whole text of the man page."""
    out = []
    for where, text in sorted(texts.items()):
        lines = markdown_code(text) if where.endswith(".md") else roff_text(text).splitlines()
        for line in lines:
            for m in re.finditer(r"python3? -m dynscope ([a-z]\w*)([^\n`#\"';&<>]*)", line):
                out.append((where, m.group(1), m.group(2).split()))
    return out


def cli_doc_options(cli_doc):
    """{command: {option}} of docs/cli.md's `## \\`command\\`` option tables."""
    out = {}
    for heading, body in sections(cli_doc, 2).items():
        m = re.match(r"^`(\w+)`", heading)
        if m:
            opts = set()
            for row in table_rows(body):
                opts.update(re.findall(r"`(--?[A-Za-z][\w-]*)", row[0]))
            out[m.group(1)] = opts
    return out


def docstring_commands(docstring):
    """[(command, [words])] of python -m dynscope's module docstring ("Commands:")."""
    block = docstring.split("Commands:", 1)[-1]
    return [(m.group(1), m.group(2).split()) for m in re.finditer(r"^  (\w+) (.*)$", block, re.M)]


def check_cli(commands, readme, cli_doc, texts, docstring):
    """`commands`: {command: {option: takes a value}} as --help says (top: dyntop's)."""
    problems = []
    documented = cli_doc_options(cli_doc)
    lines = command_lines(texts)
    in_docstring = docstring_commands(docstring)
    for cmd, opts in commands.items():
        if not re.search(rf"python -m dynscope {cmd}\b", readme):
            problems.append(f"README never shows `python -m dynscope {cmd}`")
        if cmd not in documented:
            problems.append(f"docs/cli.md has no section `{cmd}`")
        if cmd not in {c for c, _ in in_docstring}:
            problems.append(f"python -m dynscope's docstring (Commands:) omits {cmd}")
        if cmd == "top":
            continue        # dyntop's options: docs/dyntop.md, checked below
        shown = {o for _, c, words in lines if c == cmd for o in invocation_options(c, words, opts)}
        for opt in sorted(opts):
            if opt not in ("-h", "--help") and opt not in documented.get(cmd, set()) | shown:
                problems.append(f"`python -m dynscope {cmd} {opt}` is in its --help but not in "
                                f"docs/cli.md nor in any command line of README or docs/")
    for cmd in sorted(set(documented) - set(commands)):
        problems.append(f"docs/cli.md documents a command {cmd} that python -m dynscope does not have")
    for cmd, opts in sorted(documented.items()):
        for opt in sorted(opts - set(commands.get(cmd, {}))):
            if cmd in commands:
                problems.append(f"docs/cli.md gives `{cmd} {opt}`, which {cmd} --help does not list")
    shown_lines = lines + [("python -m dynscope's docstring", c, w) for c, w in in_docstring]
    for where, cmd, words in shown_lines:
        if cmd not in commands:
            problems.append(f"{where} shows `python -m dynscope {cmd}`, which is no command")
            continue
        for opt in invocation_options(cmd, words, commands[cmd]):
            if opt not in commands[cmd]:
                problems.append(f"{where} shows `python -m dynscope {cmd} ... {opt}`, "
                                f"which {cmd} --help does not list")
    return problems


def main_docstring():
    return ast.get_docstring(ast.parse(read("dynscope", "__main__.py")))


needs_dyntop = pytest.mark.skipif(not os.access(DYNTOP, os.X_OK),
                                  reason="build/dyntop is not built (make)")


def dyntop_help():
    p = _programs.run([DYNTOP, "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def cli_commands():
    commands = {}
    for cmd in help_commands(dynscope_help()):
        commands[cmd] = help_options(dynscope_help(cmd)) if cmd != "top" else \
            help_options(dyntop_help())
    return commands


@needs_dyntop
def test_every_command_and_option_of_python_m_dynscope_is_documented(cli_commands):
    assert {"run", "sql", "report", "top"} <= set(cli_commands)
    assert {"--db", "--backend", "-m"} <= set(cli_commands["run"])
    problems = check_cli(cli_commands, read("README.md"), read("docs", "cli.md"), doc_texts(),
                         main_docstring())
    assert problems == []


@needs_dyntop
def test_the_cli_check_catches_an_undocumented_option_in_a_copy_of_the_package(cli_commands, tmp_path):
    # a real switch, added to a copy of dynscope/ and read back from its --help
    pkg = tmp_path / "dynscope"
    shutil.copytree(os.path.join(ROOT, "dynscope"), pkg,
                    ignore=shutil.ignore_patterns("__pycache__"))
    src = (pkg / "__main__.py").read_text()
    anchor = 'p.add_argument("--db",'
    assert anchor in src, "dynscope/__main__.py adds run's --db as this test expects"
    (pkg / "__main__.py").write_text(src.replace(
        anchor, 'p.add_argument("--planted-switch", action="store_true")\n    ' + anchor, 1))
    p = subprocess.run([sys.executable, "-m", "dynscope", "run", "--help"], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path)),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    commands = dict(cli_commands, run=help_options(p.stdout))
    baseline = check_cli(cli_commands, read("README.md"), read("docs", "cli.md"), doc_texts(),
                         main_docstring())
    problems = check_cli(commands, read("README.md"), read("docs", "cli.md"), doc_texts(),
                         main_docstring())
    assert added(problems, baseline) == [
        "`python -m dynscope run --planted-switch` is in its --help but not in "
        "docs/cli.md nor in any command line of README or docs/"]
    # docs that show an option or a command that is not there
    texts = dict(doc_texts(), **{"docs/x.md": "`python -m dynscope report --top 3 run.db`\n"
                                              "```\npython -m dynscope frobnicate run.db\n```\n"})
    problems = check_cli(cli_commands, read("README.md"), read("docs", "cli.md"), texts,
                         main_docstring())
    assert added(problems, baseline) == [
        "docs/x.md shows `python -m dynscope report ... --top`, which report --help does not list",
        "docs/x.md shows `python -m dynscope frobnicate`, which is no command"]
    # a command README never shows, and one the docstring forgets
    readme = re.sub(r"python -m dynscope merge\b", "python -m dynscope fold", read("README.md"))
    docstring = re.sub(r"^  merge .*$", "", main_docstring(), flags=re.M)
    problems = check_cli(cli_commands, readme, read("docs", "cli.md"), doc_texts(), docstring)
    assert added(problems, baseline) == ["README never shows `python -m dynscope merge`",
                                         "python -m dynscope's docstring (Commands:) omits merge"]


def test_the_programs_own_arguments_are_not_taken_for_dynscopes():
    takes = {"--db": True, "--backend": True, "-m": True, "--capture-all": False}
    assert invocation_options("run", "--db r.db -- train.py -q".split(), takes) == ["--db"]
    assert invocation_options("run", "--capture-all -m unittest -q t".split(), takes) == \
        ["--capture-all", "-m"]
    assert invocation_options("run", "[--db FILE] [--backend NAME] (script.py | -m module)".split(),
                              takes) == ["--db", "--backend"]
    assert invocation_options("diff", "A.db B.db [--json]".split(), {"--json": False}) == ["--json"]


# ---------------------------------------------------------------------------
# dyntop: its options (parser, --help, manual, man page) and keys (the code
# that handles them, the help screen's list, manual, man page).

def dyntop_parser_options(src, hidden=False):
    """{option: takes a value} that tui/dyntop.c's getopt_long accepts; the
    options marked hidden (a benchmark's) only when `hidden`."""
    opts = {}
    short = re.search(r'getopt_long\(argc, argv, "([^"]*)"', src).group(1)
    for m in re.finditer(r"([A-Za-z])(:?)", short):
        opts["-" + m.group(1)] = bool(m.group(2))
    table = re.search(r"struct option longopts\[\] = \{(.*?)\n\s*\};", src, re.S).group(1)
    for m in re.finditer(r'\{"([\w-]+)", (\w+), NULL, [^}]*\},([^\n]*)', table):
        if hidden or "hidden" not in m.group(3):
            opts["--" + m.group(1)] = m.group(2) == "required_argument"
    return opts


def dyntop_hidden_options(src):
    """{option: takes a value} of the options tui/dyntop.c marks hidden."""
    visible = dyntop_parser_options(src)
    return {k: v for k, v in dyntop_parser_options(src, hidden=True).items() if k not in visible}


def dyntop_lines(texts):
    """(where, [words]) of each dyntop command line in the docs' code (the
    man page's text, where roff marks the code)."""
    out = []
    for where, text in sorted(texts.items()):
        lines = markdown_code(text) if where.endswith(".md") else roff_text(text).splitlines()
        for line in lines:
            for m in re.finditer(r"(?:^|[\s(])(?:build/)?dyntop((?: +[^\s`#\"';&<>]+)*)", line):
                out.append((where, m.group(1).split()))
            for m in re.finditer(r"python3? -m dynscope top([^\n`#\"';&<>]*)", line):
                out.append((where, m.group(1).split()))
    return out


def check_dyntop_options(parser, help_opts, manual, man, texts, hidden=None):
    """`parser`: the options dyntop accepts, but the hidden ones (`hidden`:
    those, which docs may show in a command line but need not document)."""
    problems = []
    hidden = hidden or {}
    for opt in sorted(set(parser) - set(help_opts)):
        problems.append(f"dyntop accepts {opt} but its --help does not list it")
    for opt in sorted(set(help_opts) - set(parser)):
        problems.append(f"dyntop --help lists {opt}, which its parser does not accept")
    md_rows = table_rows(sections(manual, 2).get("Command line", ""))
    md_opts = {o for r in md_rows for o in re.findall(r"`(--?[A-Za-z][\w-]*)", r[0])}
    man_opts_text = roff_text(man.split(".SH OPTIONS", 1)[-1].split("\n.SH ", 1)[0])
    man_opts = set(re.findall(r"^\.(?:BR|BI|B) (--?[A-Za-z][\w-]*)", man_opts_text, re.M))
    man_opts |= set(re.findall(r"^\.BR? --?[\w-]+ \", \" (--?[A-Za-z][\w-]*)", man_opts_text, re.M))
    for opt in sorted(help_opts):
        if opt not in md_opts:
            problems.append(f"dyntop {opt} is not in docs/dyntop.md's Command line table")
        if opt not in man_opts:
            problems.append(f"dyntop {opt} is not in docs/dyntop.1's OPTIONS")
    for opt in sorted(md_opts - set(help_opts)):
        problems.append(f"docs/dyntop.md documents dyntop {opt}, which dyntop --help does not list")
    for opt in sorted(man_opts - set(help_opts)):
        problems.append(f"docs/dyntop.1 documents dyntop {opt}, which dyntop --help does not list")
    for where, words in dyntop_lines(texts):
        skip = False
        for w in words:
            if skip:
                skip = False
                continue
            name = w.strip("[]").split("=", 1)[0]
            if OPTION.match(name):
                if name not in help_opts and name not in hidden:
                    problems.append(f"{where} shows `dyntop ... {name}`, which dyntop does not accept")
                skip = help_opts.get(name, hidden.get(name, False)) and "=" not in w
    return problems


KEY_NAMES = {
    "KEY_ENTER": "Enter", "KEY_ESC": "Esc", "KEY_UP": "Up", "KEY_DOWN": "Down",
    "KEY_LEFT": "Left", "KEY_RIGHT": "Right", "KEY_PPAGE": "PgUp", "KEY_NPAGE": "PgDn",
    "KEY_HOME": "Home", "KEY_END": "End", "KEY_BACKSPACE": "Backspace",
}
CHAR_NAMES = {"\\n": "Enter", "\\r": "Enter", " ": "Space", "\\\\": "\\"}


def handled_keys(sources):
    """The keys dyntop's key handlers (the tui/ files that name ncurses KEY_
    constants) act on, by the names the help screen uses."""
    keys = set()
    for src in sources:
        for m in re.finditer(r"(?:case |ch == )'(\\.|[^'])'", src):
            keys.add(CHAR_NAMES.get(m.group(1), m.group(1)))
        for m in re.finditer(r"\bKEY_F\((\d+)\)", src):
            keys.add("F" + m.group(1))
        for m in re.finditer(r"\bCTRL\('(\w)'\)", src):
            keys.add("Backspace" if m.group(1) == "H" else "Ctrl-" + m.group(1))
        for m in re.finditer(r"\b(KEY_[A-Z]+)\b(?!\()", src):
            if m.group(1) in KEY_NAMES:
                keys.add(KEY_NAMES[m.group(1)])
        if re.search(r"ch == 127\b", src):
            keys.add("Backspace")
    return keys


def key_handler_sources():
    tui = os.path.join(ROOT, "tui")
    out = []
    for name in sorted(os.listdir(tui)):
        if name.endswith(".c") and name not in ("dyntop.c", "help.c"):
            src = read("tui", name)
            if re.search(r"\bKEY_(?:UP|DOWN|ENTER|F\(|RESIZE|HANDLED)", src):
                out.append(src)
    return out


def help_screen_keys(help_src):
    """The keys of tui/help.c's help_keys[] (the help screen's one list)."""
    table = re.search(r"help_keys\[\] = \{(.*?)\n\};", help_src, re.S).group(1)
    keys = set()
    for m in re.finditer(r'^\s*\{"((?:\\.|[^"])*)",', table, re.M):
        keys.update(m.group(1).replace("\\\\", "\\").split())
    return keys


def check_dyntop_keys(handled, help_keys, manual, man, signal_keys):
    problems = []
    for k in sorted(handled - help_keys):
        problems.append(f"dyntop acts on key {k!r}, which its help screen (tui/help.c) does not list")
    for k in sorted(help_keys - handled - signal_keys):
        problems.append(f"dyntop's help screen lists key {k!r}, which no key handler acts on")
    md_keys_text = sections(manual, 2).get("Keys", "")
    md_first = {k for r in table_rows(md_keys_text)[1:] for k in re.findall(r"`([^`]+)`", r[0])}
    md_any = set(re.findall(r"`([^`\s]+)`", md_keys_text))
    man_keys = roff_text(man.split(".SH KEYS", 1)[-1].split("\n.SH ", 1)[0])
    man_first = {k for line in re.findall(r"^\.B (.*)$", man_keys, re.M) for k in line.split()}
    for k in sorted(help_keys):
        if k not in md_any:
            problems.append(f"dyntop key {k!r} is not in docs/dyntop.md's Keys")
        in_text = len(k) > 1 and re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", man_keys)
        if k not in man_first and not in_text:
            problems.append(f"dyntop key {k!r} is not in docs/dyntop.1's KEYS")
    for k in sorted(md_first - help_keys):
        problems.append(f"docs/dyntop.md documents key {k!r}, which the help screen does not list")
    for k in sorted(man_first - help_keys):
        problems.append(f"docs/dyntop.1 documents key {k!r}, which the help screen does not list")
    return problems


def signal_keys(dyntop_src):
    """Keys that act through a signal handler: Ctrl-C is SIGINT."""
    return {"Ctrl-C"} if re.search(r"sigaction\(SIGINT\b", dyntop_src) else set()


@needs_dyntop
def test_dyntops_options_agree_between_parser_help_manual_and_man_page():
    parser = dyntop_parser_options(read("tui", "dyntop.c"))
    assert {"-b", "--batch", "-n", "--cache-limit"} <= set(parser)
    assert "--bench-refresh" not in parser          # hidden: a benchmark's
    problems = check_dyntop_options(parser, help_options(dyntop_help()), read("docs", "dyntop.md"),
                                    read("docs", "dyntop.1"), doc_texts(),
                                    dyntop_hidden_options(read("tui", "dyntop.c")))
    assert problems == []


def test_dyntops_keys_agree_between_handlers_help_screen_manual_and_man_page():
    handled = handled_keys(key_handler_sources())
    assert {"q", "Enter", "Esc", "F6", "Ctrl-L", "Backspace", "Space", "PgDn"} <= handled
    problems = check_dyntop_keys(handled, help_screen_keys(read("tui", "help.c")),
                                 read("docs", "dyntop.md"), read("docs", "dyntop.1"),
                                 signal_keys(read("tui", "dyntop.c")))
    assert problems == []


@needs_dyntop
def test_the_dyntop_checks_catch_a_hidden_option_a_key_off_the_help_screen_and_stale_docs():
    src = read("tui", "dyntop.c")
    planted = src.replace('{"help", no_argument, NULL, \'h\'},',
                          '{"planted", no_argument, NULL, \'P\'},\n        '
                          '{"help", no_argument, NULL, \'h\'},', 1)
    assert planted != src
    hidden = dyntop_hidden_options(src)
    assert set(hidden) == {"--bench-refresh"}
    baseline = check_dyntop_options(dyntop_parser_options(src), help_options(dyntop_help()),
                                    read("docs", "dyntop.md"), read("docs", "dyntop.1"),
                                    doc_texts(), hidden)
    problems = check_dyntop_options(dyntop_parser_options(planted), help_options(dyntop_help()),
                                    read("docs", "dyntop.md"), read("docs", "dyntop.1"), doc_texts(),
                                    hidden)
    assert added(problems, baseline) == ["dyntop accepts --planted but its --help does not list it"]
    help_text = dyntop_help().replace("  -h, --help", "      --planted         planted\n  -h, --help")
    texts = dict(doc_texts(), **{"docs/x.md": "```\ndyntop --sort hits --top 3 run.db\n```\n"})
    problems = check_dyntop_options(dyntop_parser_options(planted), help_options(help_text),
                                    read("docs", "dyntop.md"), read("docs", "dyntop.1"), texts, hidden)
    assert added(problems, baseline) == [
        "dyntop --planted is not in docs/dyntop.md's Command line table",
        "dyntop --planted is not in docs/dyntop.1's OPTIONS",
        "docs/x.md shows `dyntop ... --top`, which dyntop does not accept"]
    # keys: one handled but off the help screen, one listed that nothing handles
    keys_baseline = check_dyntop_keys(handled_keys(key_handler_sources()),
                                      help_screen_keys(read("tui", "help.c")),
                                      read("docs", "dyntop.md"), read("docs", "dyntop.1"),
                                      signal_keys(read("tui", "dyntop.c")))
    sources = key_handler_sources()
    assert any("    case 'v':" in s for s in sources)
    sources = [s.replace("    case 'v':", "    case 'x':\n    case 'v':", 1) for s in sources]
    help_src = read("tui", "help.c").replace(
        '    {"q", ', '    {"X",               "planted", "any"},\n    {"q", ', 1)
    problems = check_dyntop_keys(handled_keys(sources), help_screen_keys(help_src),
                                 read("docs", "dyntop.md"), read("docs", "dyntop.1"),
                                 signal_keys(read("tui", "dyntop.c")))
    assert added(problems, keys_baseline) == [
        "dyntop acts on key 'x', which its help screen (tui/help.c) does not list",
        "dyntop's help screen lists key 'X', which no key handler acts on",
        "dyntop key 'X' is not in docs/dyntop.md's Keys",
        "dyntop key 'X' is not in docs/dyntop.1's KEYS"]


# ---------------------------------------------------------------------------
# DYNSCOPE_* switches: what the sources read, against docs/config.md.
#
# Sources are every C, Python and shell file of the tree (tests/ included:
# a developer sets DYNSCOPE_UPDATE_GOLDEN or DYNSCOPE_FUZZ_EXAMPLES by hand),
# not docs/, build/ or the venvs.  A variable is read where a program looks
# at its value: os.environ.get / os.getenv / os.environ[...] / `in
# os.environ` in Python, getenv("...") (or getenv(MACRO) with #define MACRO
# "...") in C, $VAR / ${VAR...} in shell and make.  Setting one (`VAR=1 cmd`,
# monkeypatch.setenv, `export VAR=1`) and naming one in a comment is not
# reading it.  This file is not scanned: its strings are the drift it plants.

NOT_SWITCHES = {
    # tests/test_python_constructs.py: a variable the test's own captured
    # program reads, to show that an environment read there is guarded
    "DYNSCOPE_TEST_UNSET_FLAG",
}
SKIP_DIRS = {".git", "build", "docs", "__pycache__", ".pytest_cache"}
PY_READ = re.compile(
    r"""(?:environ\.get|getenv|environ\.setdefault)\(\s*['"](DYNSCOPE_\w+)['"]"""
    r"""|environ\[\s*['"](DYNSCOPE_\w+)['"]\s*\](?!\s*=[^=])"""
    r"""|['"](DYNSCOPE_\w+)['"]\s+(?:not\s+)?in\s+os\.environ""")
SH_READ = re.compile(r"\$\{?(DYNSCOPE_\w+)|\$\((DYNSCOPE_\w+)\)")


def source_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith(".venv"))
        for name in sorted(files):
            path = os.path.join(d, name)
            rel = os.path.relpath(path, root)
            if rel != "tests/test_docs.py" and (name.endswith((".py", ".c", ".h", ".sh"))
                                                or name in ("Makefile", "run")):
                yield path, rel


def env_reads(root):
    """{variable: {file that reads it}} over the tree at `root`."""
    reads = {}
    c_files = {}
    for path, rel in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        found = set()
        if rel.endswith(".py"):
            found = {g for m in PY_READ.finditer(text) for g in m.groups() if g}
        elif rel.endswith((".c", ".h")):
            c_files[rel] = text
            found = set(re.findall(r'getenv\(\s*"(DYNSCOPE_\w+)"', text))
        else:
            code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
            found = {g for m in SH_READ.finditer(code) for g in m.groups() if g}
        for var in found:
            reads.setdefault(var, set()).add(rel)
    macros = {m.group(1): m.group(2) for text in c_files.values()
              for m in re.finditer(r'#define\s+(\w+)\s+"(DYNSCOPE_\w+)"', text)}
    for rel, text in c_files.items():
        for m in re.finditer(r"getenv\(\s*(\w+)\s*\)", text):
            if m.group(1) in macros:
                reads.setdefault(macros[m.group(1)], set()).add(rel)
    return reads


def config_rows(doc):
    """{variable: {column: cell}} of docs/config.md's table of variables."""
    rows = table_rows(doc)
    header = [h.lower() for h in rows[0]] if rows else []
    out = {}
    for row in rows[1:]:
        m = re.match(r"^`(DYNSCOPE_\w+)`$", row[0])
        if m and len(row) == len(header):
            out[m.group(1)] = dict(zip(header, row))
    return out


def link_explains(target, var, doc_dir):
    """None when the markdown link target (relative to docs/) exists and the
    file -- or the section its #anchor names -- mentions var; else why not."""
    path, _, anchor = target.partition("#")
    full = os.path.normpath(os.path.join(doc_dir, path)) if path else os.path.join(doc_dir, "config.md")
    if not os.path.isfile(full):
        return f"links to {target}, which does not exist"
    with open(full, encoding="utf-8") as fh:
        text = fh.read()
    if anchor:
        bodies = {slug(h): b for level in range(1, 5) for h, b in sections(text, level).items()}
        if anchor not in bodies:
            return f"links to {target}, which has no such heading"
        text = bodies[anchor]
    elif os.path.basename(full) == "config.md":
        return f"links to {target}: the table itself does not explain it"
    if var not in text:
        return f"links to {target}, which does not mention it"
    return None


def check_switches(reads, doc, doc_dir, log_names):
    problems = []
    rows = config_rows(doc)
    if not rows:
        return ["docs/config.md has no table of DYNSCOPE_* variables"]
    switches = set(reads) - NOT_SWITCHES
    for var in sorted(NOT_SWITCHES - set(reads)):
        problems.append(f"{var} is excluded as no switch, but nothing reads it any more")
    for var in sorted(switches - set(rows)):
        problems.append(f"{var} is read by {', '.join(sorted(reads[var]))} "
                        f"but docs/config.md does not list it")
    for var, row in sorted(rows.items()):
        if var not in switches:
            problems.append(f"docs/config.md lists {var}, which no source reads")
            continue
        for col in ("values", "default"):
            if not row.get(col, "").strip(" -"):
                problems.append(f"docs/config.md gives no {col} for {var}")
        for path in re.findall(r"`([\w./-]+\.\w+|Makefile)`", row.get("read by", "")):
            if path not in reads[var]:
                problems.append(f"docs/config.md says {path} reads {var}; it does not")
        links = re.findall(r"\]\(([^)\s]+)\)", row.get("explained in", ""))
        if not links:
            problems.append(f"docs/config.md links {var} to no doc that explains it")
        for target in links:
            why = link_explains(target, var, doc_dir)
            if why:
                problems.append(f"docs/config.md's {var} {why}")
    logs_row = rows.get("DYNSCOPE_LOGS")
    if logs_row is not None:
        named = set(re.findall(r"`\+?(\w+)`", logs_row.get("values", "")))
        for name in sorted(set(log_names) - named):
            problems.append(f"DYNSCOPE_LOGS takes {name}, which docs/config.md's values omit")
        for name in sorted(named - set(log_names)):
            problems.append(f"docs/config.md's DYNSCOPE_LOGS values name {name}, which it does not take")
    return problems


def test_every_switch_a_source_reads_is_in_docs_config_md_and_no_other():
    from dynscope import logs
    reads = env_reads(ROOT)
    # the scanner sees each kind of read: C (through a macro too), Python, shell, tests
    assert "engine/graph/graph_blocks.c" in reads["DYNSCOPE_CACHE_BYTES"]
    assert "trace/trace.c" in reads["DYNSCOPE_TRACE_PROVIDER"]
    assert "dynscope/recording.py" in reads["DYNSCOPE_DB"]
    assert "scripts/install-deps.sh" in reads["DYNSCOPE_SKIP_APT"]
    assert "tests/test_fuzz.py" in reads["DYNSCOPE_FUZZ_EXAMPLES"]
    assert check_switches(reads, read("docs", "config.md"), DOCS, logs.WORDS) == []


def test_the_switch_check_catches_a_new_switch_in_a_copy_of_the_tree(tmp_path):
    from dynscope import logs
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.o", ".venv*", "build", ".git",
                                    ".pytest_cache")
    shutil.copytree(ROOT, tree, ignore=ignore)
    (tree / "dynscope" / "planted.py").write_text(
        'import os\nX = os.environ.get("DYNSCOPE_PLANTED_PY", "0")\n')
    (tree / "engine" / "planted.c").write_text(
        '#include <stdlib.h>\n#define PLANTED_ENV "DYNSCOPE_PLANTED_C"\n'
        'const char *planted(void) { return getenv(PLANTED_ENV); }\n')
    (tree / "scripts" / "planted.sh").write_text(
        '#!/bin/sh\n# $DYNSCOPE_ONLY_IN_A_COMMENT\nDYNSCOPE_SET_ONLY=1 true\n'
        '[ "${DYNSCOPE_PLANTED_SH:-0}" = 1 ] && echo on\n')
    # and one switch read no more: DYNSCOPE_CACHE_BYTES's getenv removed
    blocks = tree / "engine" / "graph" / "graph_blocks.c"
    src = blocks.read_text()
    assert 'getenv("DYNSCOPE_CACHE_BYTES")' in src
    blocks.write_text(src.replace('getenv("DYNSCOPE_CACHE_BYTES")', "NULL"))
    reads = env_reads(tree)
    assert {"DYNSCOPE_ONLY_IN_A_COMMENT", "DYNSCOPE_SET_ONLY"}.isdisjoint(reads)
    baseline = check_switches(env_reads(ROOT), read("docs", "config.md"), DOCS, logs.WORDS)
    problems = check_switches(reads, read("docs", "config.md"), DOCS, logs.WORDS)
    assert added(problems, baseline) == [
        "DYNSCOPE_PLANTED_C is read by engine/planted.c but docs/config.md does not list it",
        "DYNSCOPE_PLANTED_PY is read by dynscope/planted.py but docs/config.md does not list it",
        "DYNSCOPE_PLANTED_SH is read by scripts/planted.sh but docs/config.md does not list it",
        "docs/config.md lists DYNSCOPE_CACHE_BYTES, which no source reads"]


def test_the_switch_check_catches_a_row_without_default_a_dead_link_and_a_new_log_name():
    from dynscope import logs
    doc = read("docs", "config.md")
    row = next(line for line in doc.splitlines() if line.startswith("| `DYNSCOPE_SIGTERM_FLUSH_MS`"))
    cells = row.strip("|").split("|")
    cells[2] = " "                                          # no default
    cells[4] = " [docs/nowhere.md](nowhere.md), [events](events.md) "
    planted = doc.replace(row, "|" + "|".join(cells) + "|")
    baseline = check_switches(env_reads(ROOT), doc, DOCS, logs.WORDS)
    problems = check_switches(env_reads(ROOT), planted, DOCS, tuple(logs.WORDS) + ("planted",))
    assert added(problems, baseline) == [
        "docs/config.md gives no default for DYNSCOPE_SIGTERM_FLUSH_MS",
        "docs/config.md's DYNSCOPE_SIGTERM_FLUSH_MS links to nowhere.md, which does not exist",
        "docs/config.md's DYNSCOPE_SIGTERM_FLUSH_MS links to events.md, which does not mention it",
        "DYNSCOPE_LOGS takes planted, which docs/config.md's values omit"]


# ---------------------------------------------------------------------------
# README's "What dynscope does not do yet": one section, each item still true.

NOT_YET = "What dynscope does not do yet"


def not_yet_items(readme):
    """[label] of the section's items: bullets that start with a **label.**"""
    body = sections(readme, 2).get(NOT_YET, "")
    return re.findall(r"^- \*\*(.+?)\*\*", body, re.M)


def check_not_yet_section(readme, examples):
    problems = []
    headings = re.findall(r"^## (.+)$", readme, re.M)
    if headings.count(NOT_YET) != 1:
        problems.append(f"README has {headings.count(NOT_YET)} sections \"{NOT_YET}\"; one is wanted")
    for h in headings:
        if h != NOT_YET and re.search(r"limit|not yet|does not do", h, re.I):
            problems.append(f"README's section \"{h}\" reads like a second list of limits")
    outside = re.sub(rf"^## {re.escape(NOT_YET)}\n.*?(?=^## |\Z)", "", readme, flags=re.M | re.S)
    for m in re.finditer(r"[^.\n]*\bnot yet\b[^.\n]*", outside, re.I):
        problems.append(f"README says \"{m.group(0).strip()}\" outside \"{NOT_YET}\"")
    items = not_yet_items(readme)
    body = sections(readme, 2).get(NOT_YET, "")
    if len(items) != len(re.findall(r"^- ", body, re.M)):
        problems.append(f"an item of \"{NOT_YET}\" does not start with a **label.**")
    for label in items:
        if label not in examples:
            problems.append(f"\"{NOT_YET}\" item **{label}** has no example in tests/test_docs.py")
    for label in examples:
        if label not in items:
            problems.append(f"tests/test_docs.py has an example for **{label}**, "
                            f"which README no longer lists")
    return problems


# Each example shows that its item still holds: it fails (an AssertionError
# saying so) once dynscope does the thing -- then move the item out of README's
# section, describe what now works, and drop the example.

def breaks_and_skips(out):
    """The registry names of an ExplainOutput's breaks and frames run without capture."""
    return {g.name for g in out.break_summary} | {g.name for g in out.skip_summary}


def ex_cpython_314(tmp_path):
    fake = tmp_path / "python3.14"
    fake.write_text("#!/bin/sh\necho 3.14\n")
    fake.chmod(0o755)
    p = _programs.run(["make", "-n", "-s", "-C", ROOT, "print-vars", f"PYTHON={fake}"],
                      capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "is CPython 3.14; dynscope supports CPython" in p.stderr, \
        "the Makefile now accepts CPython 3.14"
    m = re.search(r'^requires-python = "([^"]*)"', read("pyproject.toml"), re.M)
    assert m and "<3.14" in m.group(1).replace(" ", ""), "pyproject.toml now allows 3.14"


def _gen_fn(x):
    yield x + 1


def _returns_generator(x):
    return _gen_fn(x * 2)


def ex_generators(tmp_path):
    assert "generator" in breaks_and_skips(dynscope.explain(_returns_generator)(np.ones(3))), \
        "a generator the program gets is now made in the graph"


def _break_in_try(x):
    try:
        y = x + 1
        print("in try")
        y = y * 2
    except ValueError:
        y = x
    return y


def ex_try_with(tmp_path):
    out = dynscope.explain(_break_in_try)(np.ones(3))
    assert "try-block" in breaks_and_skips(out) and out.graph_count == 0, \
        "a graph break inside a try block is now captured"


def _raises(x):
    y = x + 1
    raise ValueError("raised by the captured function")


def ex_exceptions(tmp_path):
    with pytest.raises(ValueError) as info:
        dynscope.explain(_raises)(np.ones(3))
    out = info.value.explain_output
    assert "raises" in breaks_and_skips(out) and out.graph_count == 0, \
        "an exception out of the captured function no longer runs the call uncaptured"


_visible = []


def _append_visible(x):
    _visible.append(x)
    return x + 1


def _add_in_place(x):
    x += 1
    return x * 2


def _set_read_after_write(x, s):
    s.add("k")
    return x * 2 if "k" in s else x


def ex_visible_writes(tmp_path):
    out = dynscope.explain(_append_visible)(np.ones(3))
    assert any("list the program can see" in b.reason for b in out.break_reasons), \
        "a visible list's append is now captured"
    assert "a set read after a write into it" in str(dynscope.explain(_set_read_after_write)(np.ones(3), set())), \
        "reading a set the frame wrote into is now captured"
    assert "write-into-visible-array" in breaks_and_skips(dynscope.explain(_add_in_place)(np.ones(3))), \
        "an in-place op on an array the program holds is now a graph op"


class _CopyHooked:
    def __init__(self, a):
        self.a = a

    def __deepcopy__(self, memo):
        return _CopyHooked(copy.deepcopy(self.a, memo))


def _deep(h, x):
    return copy.deepcopy(h).a * x


def ex_copy_hooks(tmp_path):
    assert "copy" in breaks_and_skips(dynscope.explain(_deep)(_CopyHooked(np.ones(3)), np.ones(3))), \
        "copy.deepcopy of a class with __deepcopy__ is now captured"


_frames = []


def _grab_caller():
    _frames.append(sys._getframe(1))


def _locals_after_step(x):
    y = x + 1
    _grab_caller()             # an eager step (sys._getframe)
    z = y * 2
    return z


def ex_frame_locals(tmp_path):
    _frames.clear()
    _locals_after_step(np.ones(3))
    assert "z" in _frames[-1].f_locals
    opt = dynscope.optimize("eager")(_locals_after_step)
    opt(np.ones(3))
    assert dynscope.cache_entries(_locals_after_step), "the function was not captured"
    assert "y" in _frames[-1].f_locals and "z" not in _frames[-1].f_locals, \
        "a frame object kept past an eager step now sees later locals"
    _frames.clear()


def _break_in_dict_loop(d, x):
    for k, v in d.items():
        x = x + v
        print(k)
        x = x * 2
    return x


def ex_interpreter_loops(tmp_path):
    out = dynscope.explain(_break_in_dict_loop)({"a": np.ones(3), "b": np.ones(3)}, np.ones(3))
    plans = "\n".join(p for _, p in out.plans)
    assert "container-op" in breaks_and_skips(out) and "continue in the interpreter" in plans, \
        "a loop over a dict with a break inside is now captured to its end"


def _reads_refcount(x):
    return x + sys.getrefcount(x)


def ex_getrefcount(tmp_path):
    out = dynscope.explain(_reads_refcount)(np.ones(3))
    assert "reads-refcounts" in breaks_and_skips(out) and out.graph_count == 0, \
        "a frame that names sys.getrefcount is now captured"


@functools.lru_cache
def _lru_scale():
    return 2


def ex_lru_cache(tmp_path):
    out = dynscope.explain(lambda x: x * _lru_scale())(np.ones(3))
    assert any("functools.lru_cache wrapper" in b.reason for b in out.break_reasons), \
        "a call of an lru_cache function is now captured"


def ex_module_hooks(tmp_path):
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda mod, args: None)
    out = dynscope.explain(lambda x: lin(x) * 2)(torch.ones(1, 2))
    assert any("with hooks" in b.reason for b in out.break_reasons), \
        "a module with a forward pre-hook is now captured"


NOT_YET_EXAMPLES = {
    "CPython 3.14.": ex_cpython_314,
    "Generators the program gets.": ex_generators,
    "Graph breaks inside `try` and `with`.": ex_try_with,
    "Exceptions out of the captured function.": ex_exceptions,
    "Some writes the program can see.": ex_visible_writes,
    "Calls of `functools.lru_cache` functions.": ex_lru_cache,
    "Copies with hooks.": ex_copy_hooks,
    "Module hooks other than forward hooks.": ex_module_hooks,
    "Frame objects kept past an eager step.": ex_frame_locals,
    "Loops the interpreter finishes.": ex_interpreter_loops,
    "Frames that read reference counts.": ex_getrefcount,
}


def test_readme_gathers_what_is_not_done_yet_in_one_section():
    assert check_not_yet_section(read("README.md"), NOT_YET_EXAMPLES) == []


@pytest.mark.parametrize("label", sorted(NOT_YET_EXAMPLES))
def test_each_item_of_not_done_yet_still_fails(label, tmp_path):
    NOT_YET_EXAMPLES[label](tmp_path)


def test_the_section_check_catches_a_stray_not_yet_an_item_without_example_and_a_stale_claim():
    readme = read("README.md")
    planted = readme.replace(f"## {NOT_YET}\n", f"## {NOT_YET}\n\n- **Planted limit.** nothing.\n", 1)
    planted = planted.replace("## Two commands\n", "## Two commands\n\nNot yet: `mark_dynamic`.\n", 1)
    planted += "\n## Known limits\n\n- one more\n"
    baseline = check_not_yet_section(readme, NOT_YET_EXAMPLES)
    problems = check_not_yet_section(planted, NOT_YET_EXAMPLES)
    assert added(problems, baseline) == [
        "README's section \"Known limits\" reads like a second list of limits",
        f"README says \"Not yet: `mark_dynamic`\" outside \"{NOT_YET}\"",
        f"\"{NOT_YET}\" item **Planted limit.** has no example in tests/test_docs.py"]
    dropped = dict(NOT_YET_EXAMPLES, **{"Gone.": ex_getrefcount})
    assert added(check_not_yet_section(readme, dropped), baseline) == [
        "tests/test_docs.py has an example for **Gone.**, which README no longer lists"]

    # the claim issue 45 found stale ("Not yet: ... mark_dynamic"), written as
    # an example: it fails, as an example does when its item stops holding
    def ex_mark_dynamic_missing():
        t = np.ones((4, 3))
        try:
            dynscope.mark_dynamic(t, 0)
        except AttributeError:
            return
        raise AssertionError("dynscope.mark_dynamic exists and marks a dimension")

    with pytest.raises(AssertionError, match="mark_dynamic exists"):
        ex_mark_dynamic_missing()
