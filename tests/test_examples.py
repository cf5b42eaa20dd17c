"""The examples run from a fresh process and print their results."""

from pathlib import Path

import pytest
from run_script import run_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# each example and a phrase its output must contain
EXPECTED = {
    "quickstart.py": "test MAE",
    "quantile_intervals.py": "80% interval coverage",
    "distributional.py": "held-out Gaussian negative log-likelihood",
    "distribution_families.py": "held-out censored NLL",
    "focal_imbalanced.py": "average precision",
    "tweedie_counts.py": "mean Poisson deviance",
    "asymmetric_loss.py": "business cost",
    "optax_refit.py": "L-BFGS refit",
    "early_stopping.py": "best_iteration_",
    "robust_outliers.py": "Tukey's biweight (c 150)   test MAE",
    "ranking_listnet.py": "ListNet (yours)         test NDCG@5",
    "survival.py": "held-out c-index",
    "poisson_exposure.py": "mean Poisson deviance of the claim counts",
}
# examples a dedicated test runs and checks further
RUN_BY_OTHER_TESTS = {"distributed_training.py": "test_distributed.py"}


def test_every_example_is_listed():
    listed = set(EXPECTED) | set(RUN_BY_OTHER_TESTS)
    assert {path.name for path in EXAMPLES.glob("*.py")} == listed


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name):
    result = run_script(EXAMPLES / name, cwd=EXAMPLES.parent, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert EXPECTED[name] in result.stdout
