"""Third-party test suites for the conformance runs: libraries written the
way people write Python, each pinned, with its own tests.

    python scripts/suites.py install     pip install each package and its test
                                         dependencies into this venv, and unpack
                                         its own tests from its source
                                         distribution into build/suites/NAME-VERSION
    python scripts/suites.py list        name, version and tests directory of each
    python scripts/suites.py path NAME   the tests directory of one suite

`scripts/install-deps.sh` runs `install` for every venv it makes, so
`make conformance` and `make test` need no network afterwards.  The
package itself is the installed wheel; only its tests (and the pytest
configuration beside them) come from the sdist, so the tests exercise the
code every user runs.  Nothing of these packages is committed here.
"""
from __future__ import annotations

import glob
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES_DIR = os.path.join(ROOT, "build", "suites")

# name -> (version, tests directory inside the sdist, test dependencies,
# other directories of the sdist the tests import).
# sortedcontainers, asked for in issue 34, ships no tests in any sdist on
# PyPI (2.0.5 to 2.4.0): sqlparse (a tokenizer and parser, generators and
# classes throughout) stands in for it.
THIRD_PARTY = {
    "boltons": ("26.2.0", "tests", [], []),
    "more-itertools": ("11.2.1", "tests", [], []),
    "attrs": ("26.1.0", "tests", ["hypothesis", "pympler==1.1", "cloudpickle==3.1.2"], []),
    "toolz": ("1.2.0", "toolz/tests", [], []),
    "cachetools": ("8.0.2", "tests", [], []),
    "tomlkit": ("0.15.2", "tests", ["PyYAML==6.0.3"], []),
    # pytest-cov: the suite's conftest marks tests no_cover, a mark it registers
    "python-dateutil": ("4.0.0", "tests", ["freezegun==1.5.5", "hypothesis", "pytest-cov==7.1.0"], []),
    "packaging": ("26.4", "tests", ["pretend==1.0.9", "tomli_w==1.2.0", "hypothesis"], []),
    # its tests parse with the grammars of its examples/; pyparsing.diagram
    # needs railroad-diagrams and jinja2
    "pyparsing": ("3.3.3", "tests", ["railroad-diagrams==3.0.1", "jinja2==3.1.6"], ["examples"]),
    "sqlparse": ("0.6.1", "tests", [], []),
}
# Files of the sdist's top directory kept beside the tests: the suite's
# pytest configuration (markers, rootdir), never the package's source.
CONFIG_FILES = ("pyproject.toml", "setup.cfg", "tox.ini", "pytest.ini", "conftest.py")


def tests_dir(name: str) -> str:
    version, sub = THIRD_PARTY[name][:2]
    return os.path.join(SUITES_DIR, f"{name}-{version}", sub)


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", *args],
                   check=True)


def install_packages() -> None:
    want = []
    for name, (version, _, deps, _) in THIRD_PARTY.items():
        if installed_version(name) != version:
            want.append(f"{name}=={version}")
        for d in deps:
            dist, _, ver = d.partition("==")
            if installed_version(dist) is None or (ver and installed_version(dist) != ver):
                want.append(d)
    if want:
        print(f"suites: pip install {' '.join(want)}", file=sys.stderr, flush=True)
        pip("install", *want)


def unpack_tests(name: str) -> None:
    version, sub, _, extra = THIRD_PARTY[name]
    dest = os.path.join(SUITES_DIR, f"{name}-{version}")
    if all(os.path.isdir(os.path.join(dest, d)) for d in [sub] + extra):
        return
    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"suites: the tests of {name}=={version} (its sdist) -> {dest}", file=sys.stderr, flush=True)
        pip("download", "--no-deps", "--no-binary", ":all:", "-d", tmp, f"{name}=={version}")
        archives = glob.glob(os.path.join(tmp, "*.tar.gz"))
        if len(archives) != 1:
            raise SystemExit(f"suites: expected one sdist of {name}=={version}, got {os.listdir(tmp)}")
        partial = dest + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        with tarfile.open(archives[0]) as tar:
            members = tar.getmembers()
            top = members[0].name.split("/")[0]
            dirs = tuple(f"{top}/{d}/" for d in [sub] + extra)
            keep = [m for m in members
                    if (m.isfile() or m.isdir())
                    and (m.name.startswith(dirs) or m.name in {f"{top}/{c}" for c in CONFIG_FILES})]
            if not any(m.name.startswith(f"{top}/{sub}/") for m in keep):
                raise SystemExit(f"suites: the sdist of {name}=={version} has no {sub}/")
            for m in keep:
                m.name = m.name[len(top) + 1:]
            tar.extractall(partial, members=keep, filter="data")
        os.rename(partial, dest)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ("install", "list", "path"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "install":
        install_packages()
        for name in THIRD_PARTY:
            unpack_tests(name)
        return 0
    if argv[1] == "list":
        for name, (version, *_) in THIRD_PARTY.items():
            print(f"{name}\t{version}\t{os.path.relpath(tests_dir(name), ROOT)}")
        return 0
    if len(argv) != 3 or argv[2] not in THIRD_PARTY:
        print(f"suites: path NAME, one of {', '.join(THIRD_PARTY)}", file=sys.stderr)
        return 2
    print(tests_dir(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
