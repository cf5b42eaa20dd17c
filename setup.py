"""Builds the native CPU kernels when jaxboost is installed (the rest of the
package is declared in pyproject.toml).

The kernels are one shared library loaded through ctypes, not a Python
extension; it is declared as an extension so that wheels are tagged for
their platform and editable installs build it into the source tree.  A build
that cannot be done (no C++ compiler, no jaxlib headers, or
``JAXBOOST_NATIVE=0``) leaves it out without failing the install: jaxboost
then builds it at first use, as it does when the installed jaxlib changes
(jaxboost/kernels/native_library.py).
"""

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PACKAGE = "jaxboost.kernels.native"


def _native_build():
    """jaxboost/kernels/native_build.py, run alone: jaxboost's package cannot
    be imported in the build environment."""
    path = ROOT / "jaxboost" / "kernels" / "native_build.py"
    spec = importlib.util.spec_from_file_location("jaxboost_native_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildNativeKernels(build_ext):
    """Compiles the kernels into the package's ``native/`` folder: in the
    source tree for an editable install, else in the build's copy."""

    def run(self) -> None:
        self._built = []
        if os.environ.get("JAXBOOST_NATIVE", "").strip() in ("0", "false", "off"):
            return
        if self.inplace:
            package_dir = self.get_finalized_command("build_py").get_package_dir(PACKAGE)
            directory = ROOT / package_dir
        else:
            directory = Path(self.build_lib, *PACKAGE.split("."))
        native_build = _native_build()
        try:
            library = native_build.build_for_install(directory)
        except (native_build.NativeKernelUnavailable, OSError) as error:
            print(
                f"jaxboost: the native CPU kernels were not built at install ({error}); "
                "jaxboost will build them at first use, or use its XLA kernels",
                file=sys.stderr,
            )
            return
        self._built = [str(library), str(native_build.fingerprint_path(library))]

    def get_outputs(self) -> list[str]:
        return list(getattr(self, "_built", []))

    def get_output_mapping(self) -> dict[str, str]:
        return {}


setup(
    ext_modules=[Extension(f"{PACKAGE}.kernels", sources=[])],
    cmdclass={"build_ext": BuildNativeKernels},
)
