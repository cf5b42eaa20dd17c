"""The examples run, one after another in one fresh process (as ``python
example.py``: see scripts/run_examples.py), and print their results."""

import json
from pathlib import Path

import pytest
from run_script import run_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RUNNER = Path(__file__).resolve().parent / "scripts" / "run_examples.py"

# each example and a phrase its output must contain
EXPECTED = {
    "quickstart.py": "test MAE",
    "quantile_intervals.py": "80% interval coverage",
    "distributional.py": "held-out Gaussian negative log-likelihood",
    "distribution_families.py": "held-out censored NLL",
    "focal_imbalanced.py": "average precision",
    "tweedie_counts.py": "balances sum w (y - mu) / sqrt(mu), not the total",
    "asymmetric_loss.py": "business cost",
    "optax_refit.py": "L-BFGS refit",
    "early_stopping.py": "best_iteration_",
    "explain.py": "features by mean |SHAP value| on held-out rows",
    "robust_outliers.py": "Tukey's biweight (c 150)   test MAE",
    "ranking_listnet.py": "ListNet (yours)         test NDCG@5",
    "survival.py": "held-out c-index",
    "poisson_exposure.py": "mean Poisson deviance of the claim counts of held-out cells",
}
# examples a dedicated test runs and checks further
RUN_BY_OTHER_TESTS = {
    "distributed_training.py": "test_distributed.py",
    "dask_training.py": "test_dask.py",
}


def test_every_example_is_listed():
    listed = set(EXPECTED) | set(RUN_BY_OTHER_TESTS)
    assert {path.name for path in EXAMPLES.glob("*.py")} == listed


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Every listed example's outcome and output (scripts/run_examples.py)."""
    results = tmp_path_factory.mktemp("examples") / "results.json"
    paths = [str(EXAMPLES / name) for name in sorted(EXPECTED)]
    done = run_script(RUNNER, cwd=EXAMPLES.parent, timeout=1500, args=(str(results), *paths))
    assert results.exists(), done.stdout[-2000:] + done.stderr[-4000:]
    return {"process": done, **json.loads(results.read_text())}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(runs, name):
    assert name in runs, "the runner stopped before this example: " + runs["process"].stderr[-4000:]
    result = runs[name]
    assert result["ok"], result["stdout"][-2000:] + result["error"]
    assert EXPECTED[name] in result["stdout"]


def test_the_runner_reports_an_example_that_fails(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_examples", RUNNER)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    monkeypatch.setattr("sys.argv", list(__import__("sys").argv))  # the runner sets it
    good, bad, stops = (tmp_path / name for name in ("good.py", "bad.py", "stops.py"))
    good.write_text("if __name__ == '__main__':\n    print('fitted')\n")
    bad.write_text("print('half')\nraise RuntimeError('broken example')\n")
    stops.write_text("import sys\nsys.exit(3)\n")
    assert runner.run(good) == {"ok": True, "stdout": "fitted\n", "error": ""}
    failed = runner.run(bad)
    assert not failed["ok"] and failed["stdout"] == "half\n"
    assert "RuntimeError: broken example" in failed["error"]
    assert not runner.run(stops)["ok"]
