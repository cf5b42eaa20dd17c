"""The persistent compilation cache: a second process compiles nothing big."""

import re
from pathlib import Path

from run_script import run_script

SCRIPT = Path(__file__).parent / "scripts" / "cached_fit.py"


def _compile_seconds(cache_dir: Path) -> float:
    result = run_script(SCRIPT, {"JAXBOOST_COMPILATION_CACHE": str(cache_dir)}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return float(re.search(r"compile seconds ([0-9.]+)", result.stdout).group(1))


def test_a_second_process_loads_the_programs_from_the_cache(tmp_path):
    first = _compile_seconds(tmp_path)
    assert any(tmp_path.iterdir()), "the first process wrote nothing to the cache"
    second = _compile_seconds(tmp_path)
    assert second < 0.25 * first, (first, second)
