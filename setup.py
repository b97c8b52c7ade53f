"""Build of the engine extension dynscope._C for `pip install .`.

Mirrors the Makefile's `all` target (same sources, C standard, visibility and
libraries); the Makefile remains the developer build and adds -Werror, the
ASan variant and the tests.  Metadata lives in pyproject.toml.
"""

import glob

import numpy
from setuptools import Extension, setup

ext = Extension(
    "dynscope._C",
    # trace/trace.c: the engine's side of LTTng (dlopen of the provider,
    # which the Makefile builds apart as build/libdynscope-tp.so).
    sources=sorted(glob.glob("engine/*.c") + glob.glob("explain/*.c")) + ["trace/trace.c"],
    depends=sorted(glob.glob("engine/*.h") + glob.glob("explain/*.h")) + ["trace/trace.h"],
    include_dirs=[numpy.get_include()],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"],
    libraries=["m", "pthread", "dl"],
)

setup(ext_modules=[ext])
