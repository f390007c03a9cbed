"""A thin shim: CMake builds the SWIG extension, setuptools packages it.

`pip install .` and `cmake --build` use the same CMakeLists.txt; nothing about
the build is described here except where the two files land in the wheel.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        # --fresh: each pip build runs in a new isolated environment (new paths
        # to cmake, ninja and swig), so a cache left by an earlier one is stale.
        cfg = ["cmake", "--fresh", "-S", HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
               "-DS3X_BUILD_PYTHON=ON", "-DS3X_BUILD_TESTS=OFF", "-DS3X_BUILD_CLI=OFF",
               f"-DPython3_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            cfg += ["-G", "Ninja"]
        subprocess.check_call(cfg)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "s3xfer_python"])
        pkg = os.path.join(build_dir, "python", "s3xfer")
        dest = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        os.makedirs(dest, exist_ok=True)
        for f in glob.glob(os.path.join(pkg, "*_core*")):
            shutil.copy2(f, dest)


setup(ext_modules=[CMakeExtension("s3xfer.__core")], cmdclass={"build_ext": CMakeBuild})
