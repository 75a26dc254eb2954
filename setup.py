"""Build drawopt and its Cython kernels (cext/*.pyx -> drawopt._name).

``DRAWOPT_BOUNDSCHECK=1`` at build time turns bounds checking back on for a
debug build.
"""

import glob
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("DRAWOPT_BOUNDSCHECK", "") not in ("", "0")
extensions = [
    Extension(
        "drawopt." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O2"],
    )
    for path in sorted(glob.glob("cext/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": debug,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": debug,
        },
    ),
)
