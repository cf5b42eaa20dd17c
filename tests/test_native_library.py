"""Finding and building the native kernels' library: the one built at install
is used without the compiler when it fits the installed jaxlib; otherwise a
build at first use says so, once."""

import logging
import re
from pathlib import Path

import pytest

from jaxboost.kernels import native_build, native_library

DEVICES_GUIDE = Path(__file__).resolve().parents[1] / "docs" / "devices.md"


def fake_build(compiler, include, objects, library):  # the compiler's tens of seconds, skipped
    with open(library, "wb") as file:
        file.write(b"\x7fELF built")


def refuse_to_compile():
    raise AssertionError("the compiler was asked for")


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The package's folder of installed libraries, empty, and a fresh cache."""
    folder = tmp_path / "installed"
    folder.mkdir()
    monkeypatch.setattr(native_library, "INSTALLED_DIRECTORY", folder)
    monkeypatch.setenv("JAXBOOST_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_a_first_build_says_so_and_a_built_library_is_used_quietly(
    installed, tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(native_library, "compiler", lambda: "c++")
    monkeypatch.setattr(native_library, "compile_and_link", fake_build)
    caplog.set_level(logging.WARNING, logger=native_library.__name__)
    library = native_library.build_library()
    assert library.parent == tmp_path / "cache" and library.read_bytes() == b"\x7fELF built"
    (record,) = caplog.records
    assert "building the native CPU kernels" in record.getMessage()
    assert str(tmp_path / "cache") in record.getMessage()
    # the guide gives the build the time the message gives it
    (duration,) = re.findall(r"\([^()]*\)$", record.getMessage())
    assert duration in " ".join(DEVICES_GUIDE.read_text(encoding="utf-8").split())
    caplog.clear()
    assert native_library.build_library() == library  # as a later process finds it
    assert caplog.records == []


def test_the_library_built_at_install_is_used_without_the_compiler(
    installed, tmp_path, monkeypatch, caplog
):
    # as setup.py builds it: jaxlib found without importing JAX
    library = native_build.build_for_install(installed, compile_sources=fake_build)
    assert library.parent == installed and native_build.is_intact(library)
    monkeypatch.setattr(native_library, "compiler", refuse_to_compile)
    caplog.set_level(logging.WARNING, logger=native_library.__name__)
    assert native_library.build_library() == library
    assert caplog.records == []
    assert not (tmp_path / "cache").exists()
    # installing again keeps it, and removes what an earlier install left
    stale = installed / native_build.library_name("0.4.1")
    stale.write_bytes(b"old")
    native_build.build_for_install(installed, compile_sources=refuse_to_compile)
    assert sorted(path.name for path in installed.iterdir()) == [
        library.name,
        native_build.fingerprint_path(library).name,
    ]


@pytest.mark.parametrize("installed_as", ["for another jaxlib", "truncated"])
def test_an_installed_library_that_does_not_fit_is_built_again_at_first_use(
    installed, tmp_path, monkeypatch, caplog, installed_as
):
    library = native_build.build_for_install(installed, compile_sources=fake_build)
    if installed_as == "truncated":
        library.write_bytes(library.read_bytes()[:-1])
    else:  # jaxlib upgraded since the install: its key names another library
        other = installed / native_build.library_name("0.4.1")
        library.rename(other)
        native_build.fingerprint_path(library).rename(native_build.fingerprint_path(other))
    monkeypatch.setattr(native_library, "compiler", lambda: "c++")
    monkeypatch.setattr(native_library, "compile_and_link", fake_build)
    caplog.set_level(logging.WARNING, logger=native_library.__name__)
    built = native_library.build_library()
    assert built == tmp_path / "cache" / library.name
    (record,) = caplog.records
    assert "none was built at install for jaxlib" in record.getMessage()
