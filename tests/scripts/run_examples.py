"""Run example scripts one after another in this process, as ``python
example.py`` would (``__name__ == "__main__"``, ``sys.argv`` its path), and
write each one's output and outcome as JSON to the path given first:
``{name: {"ok": bool, "stdout": str, "error": str}}``.

One process for all of them: each fresh process spends about 5 s of CPU on
importing JAX, scikit-learn and jaxboost before the example's first line.
"""

import contextlib
import io
import json
import runpy
import sys
import traceback
from pathlib import Path


def run(path: Path) -> dict:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [str(path)]
    ok, error = True, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as stop:
            ok = stop.code in (None, 0)
            error = f"SystemExit({stop.code!r})"
        except Exception:  # noqa: BLE001  (an example's failure, whatever it is, is reported)
            ok, error = False, traceback.format_exc()
    return {"ok": ok, "stdout": out.getvalue(), "error": error + err.getvalue()[-4000:]}


def main() -> None:
    target, *paths = sys.argv[1:]
    results = {}
    for path in map(Path, paths):
        results[path.name] = run(path)
        Path(target).write_text(json.dumps(results))  # kept if a later example hangs


if __name__ == "__main__":
    main()
