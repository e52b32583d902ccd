"""Build the Cython extension; all metadata lives in pyproject.toml.

Switches: KAFKATX_DEBUG=1 (line tracing, -O0 -g, annotated HTML), KAFKATX_SANITIZE=1 (ASan + UBSan).
"""

import glob
import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("KAFKATX_DEBUG") == "1"
sanitize = os.environ.get("KAFKATX_SANITIZE") == "1"

if sys.platform == "win32":
    cflags = ["/O2"]
    ldflags = []
else:
    cflags = ["-O0" if debug else "-O3", "-g" if debug else "-g0", "-fsigned-char", "-Wall", "-Wno-unused-function",
              "-Wno-unreachable-code", "-fno-strict-aliasing"]
    ldflags = []
    if sanitize:
        cflags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
        ldflags += ["-fsanitize=address,undefined"]

macros = [("CYTHON_TRACE_NOGIL", "1")] if debug else []
# dlopen and pthread keys (_c/syslib.h) live in libc from glibc 2.34 on, in libdl/libpthread before
libraries = ["dl", "pthread"] if sys.platform.startswith("linux") else []

extensions = [
    Extension(
        "kafkatx._codec",
        sources=["src/kafkatx/_codec.pyx", "src/kafkatx/_c/crc32c.c"],
        include_dirs=["src/kafkatx/_c"],
        depends=sorted(glob.glob("src/kafkatx/_c/*.h")),  # rebuild when a C header changes
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=libraries,
        define_macros=macros,
    ),
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        annotate=debug,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "embedsignature": True,
            "linetrace": debug,
        },
    ),
)
