"""Build for `pip install .` and wheels: the engine extension dynscope._C, the
dyntop TUI (dynscope/dyntop, run by the `dyntop` command) and, where the
lttng-ust headers are installed, the LTTng provider dynscope/libdynscope-tp.so.

What each part is built from and linked with comes from build.conf, which the
Makefile reads too; the Makefile stays the developer build (-Werror, ASan,
tests).  Metadata lives in pyproject.toml.
"""

import glob
import os
import shutil
import subprocess

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def build_conf(key):
    """The values of `key:` in build.conf (globs expanded for *_sources)."""
    with open(os.path.join(HERE, "build.conf")) as f:
        for line in f:
            if line.startswith(key + ":"):
                words = line.split(":", 1)[1].split()
                if key.endswith("_sources"):
                    return [p for w in words for p in sorted(glob.glob(w))]
                return words
    raise KeyError(f"build.conf has no {key}")


def pkg_config(*args):
    """pkg-config's words, or None when it or the package is missing."""
    if shutil.which("pkg-config") is None:
        return None
    r = subprocess.run(["pkg-config", *args], capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else None


class BuildAll(build_ext):
    """The extension, then dyntop and the LTTng provider into the package."""

    def run(self):
        super().run()
        pkg_dir = os.path.join(self.build_lib, "dynscope")
        if self.inplace:
            pkg_dir = os.path.join(HERE, "dynscope")
        os.makedirs(pkg_dir, exist_ok=True)
        self.build_dyntop(pkg_dir)
        self.build_provider(pkg_dir)

    def build_dyntop(self, pkg_dir):
        cflags = pkg_config("--cflags", "ncursesw") or []
        libs = pkg_config("--libs", "ncursesw")
        libraries = [w[2:] for w in libs if w.startswith("-l")] if libs else []
        libraries += [l for l in build_conf("dyntop_libraries")
                      if l not in libraries and (libs is None or l not in ("ncursesw", "tinfo"))]
        objs = self.compiler.compile(
            build_conf("dyntop_sources"), output_dir=os.path.join(self.build_temp, "dyntop"),
            extra_preargs=["-std=c11", "-D_DEFAULT_SOURCE", "-D_XOPEN_SOURCE=600", *cflags])
        self.compiler.link_executable(objs, "dyntop", output_dir=pkg_dir, libraries=libraries)

    def build_provider(self, pkg_dir):
        cflags = pkg_config("--cflags", "lttng-ust") or []
        try:
            objs = self.compiler.compile(
                build_conf("tp_sources"), output_dir=os.path.join(self.build_temp, "tp"),
                include_dirs=["trace"], extra_preargs=["-std=c11", "-fPIC", *cflags])
        except Exception as exc:  # noqa: BLE001 -- no lttng-ust headers: tracing is a no-op
            print(f"dynscope: not building the LTTng provider ({exc}); tracepoints are no-ops")
            return
        libs = pkg_config("--libs", "lttng-ust")
        libraries = [w[2:] for w in libs if w.startswith("-l")] if libs else build_conf("tp_libraries")
        self.compiler.link_shared_object(objs, os.path.join(pkg_dir, "libdynscope-tp.so"),
                                         libraries=libraries)


ext = Extension(
    "dynscope._C",
    sources=build_conf("ext_sources"),
    depends=sorted(glob.glob("engine/*.h") + glob.glob("engine/*/*.h") + glob.glob("binding/*.h") + glob.glob("event/*.h") + glob.glob("explain/*.h") + glob.glob("store/*.h")
                   + glob.glob("trace/*.h")),
    include_dirs=[numpy.get_include()],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"],
    libraries=build_conf("ext_libraries"),
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildAll})
