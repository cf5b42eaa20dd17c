"""Building the native kernels' library: a first build says so, once."""

import logging
import re
from pathlib import Path

from jaxboost.kernels import native_library

DEVICES_GUIDE = Path(__file__).resolve().parents[1] / "docs" / "devices.md"


def test_a_first_build_says_so_and_a_built_library_is_used_quietly(tmp_path, monkeypatch, caplog):
    def fake_build(compiler, include, objects, library):  # the compiler's tens of seconds, skipped
        with open(library, "wb") as file:
            file.write(b"\x7fELF built")

    monkeypatch.setenv("JAXBOOST_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native_library, "_compiler", lambda: "c++")
    monkeypatch.setattr(native_library, "_compile_and_link", fake_build)
    caplog.set_level(logging.WARNING, logger=native_library.__name__)
    library = native_library.build_library()
    assert library.parent == tmp_path and library.read_bytes() == b"\x7fELF built"
    (record,) = caplog.records
    assert "building the native CPU kernels" in record.getMessage()
    assert str(tmp_path) in record.getMessage()
    # the guide gives the build the time the message gives it
    (duration,) = re.findall(r"\([^()]*\)$", record.getMessage())
    assert duration in " ".join(DEVICES_GUIDE.read_text(encoding="utf-8").split())
    caplog.clear()
    assert native_library.build_library() == library  # as a later process finds it
    assert caplog.records == []
