"""The initial score: a jitted minimisation that lands on the closed forms."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_leaves import inverted_cdf_quantile

import jaxboost  # noqa: F401  (configures devices before JAX starts)
from jaxboost import losses
from jaxboost.engine.init_score import initial_score
from jaxboost.kernels.leaf_sums import LEAF_KERNELS

LEAF = LEAF_KERNELS["reference"]


def _score(loss, y, weight=None, n_outputs=1):
    weight = np.ones(len(y), np.float32) if weight is None else weight
    # jitted, as in training: op by op, each search compiled some 20 to 100
    # small programs
    search = jax.jit(initial_score, static_argnums=(0, 3))
    return np.asarray(search(loss, jnp.asarray(y), jnp.asarray(weight), n_outputs))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_log_loss_starts_at_the_log_odds_of_the_mean(rng):
    y = (rng.uniform(size=501) < 0.3).astype(np.float32)
    mean = y.mean()
    np.testing.assert_allclose(
        _score(losses.binary_logloss, y), [np.log(mean / (1 - mean))], rtol=1e-5
    )


def test_squared_error_starts_at_the_weighted_mean(rng):
    y = rng.normal(3.0, 2.0, 500).astype(np.float32)
    weight = rng.uniform(0.1, 3.0, 500).astype(np.float32)
    np.testing.assert_allclose(
        _score(losses.squared_error, y, weight), [np.average(y, weights=weight)], rtol=1e-5
    )


def test_absolute_error_starts_at_the_median(rng):
    y = rng.standard_cauchy(501).astype(np.float32)
    np.testing.assert_allclose(
        _score(losses.absolute_error, y), [np.median(y)], rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("alpha", [0.1, 0.9])
def test_quantile_starts_at_the_weighted_quantile(rng, alpha):
    y = rng.exponential(5.0, 400).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, 400).astype(np.float32)
    expected = inverted_cdf_quantile(y, weight, alpha)
    np.testing.assert_allclose(_score(losses.quantile(alpha), y, weight), [expected], rtol=1e-6)


def test_poisson_starts_at_the_log_of_the_mean(rng):
    y = rng.poisson(4.0, 300).astype(np.float32)
    np.testing.assert_allclose(_score(losses.poisson, y), [np.log(y.mean())], rtol=1e-5)


def test_softmax_starts_at_the_class_frequencies(rng):
    y = rng.choice(4, size=600, p=[0.1, 0.2, 0.3, 0.4]).astype(np.float32)
    score = _score(losses.softmax_cross_entropy, y, n_outputs=4)
    probabilities = np.exp(score - score.max()) / np.exp(score - score.max()).sum()
    np.testing.assert_allclose(probabilities, np.bincount(y.astype(int)) / 600, atol=1e-5)


def test_gaussian_nll_starts_at_the_mean_and_log_std(rng):
    y = rng.normal(2.0, 3.0, 1000).astype(np.float32)
    score = _score(losses.gaussian_nll, y, n_outputs=2)
    np.testing.assert_allclose(score, [y.mean(), np.log(y.std())], rtol=1e-4, atol=1e-4)


def test_large_targets_with_a_saturating_loss(rng):
    """log-cosh's curvature vanishes far from the data: the bracket must still grow."""
    y = rng.normal(1e4, 10.0, 301).astype(np.float32)

    def log_cosh(y, f):
        return jnp.logaddexp(f - y, y - f) - jnp.log(2.0)

    score = _score(log_cosh, y)
    assert abs(score[0] - np.median(y)) < 10.0


def tukey_biweight(y, f, c=1.5):
    r = jnp.minimum(jnp.abs(f - y) / c, 1.0)
    return c**2 / 6 * (1 - (1 - r**2) ** 3)


def test_a_redescending_loss_far_from_zero_starts_among_its_targets(rng):
    """From 0, every residual lies where Tukey's loss is flat (zero slope):
    the search alone would stop there and the trees would learn nothing."""
    y = rng.normal(50.0, 0.5, 400).astype(np.float32)
    y[:40] += rng.normal(0.0, 30.0, 40).astype(np.float32)  # outliers
    score = _score(tukey_biweight, y)
    assert abs(score[0] - 50.0) < 0.2, score


def test_the_median_start_keeps_the_lower_of_two_minima(rng):
    """Two clusters, a third of the weight near 0: the search from 0 finds that
    cluster's local minimum; the one around the median is lower."""
    y = np.concatenate([rng.normal(0.0, 0.3, 100), rng.normal(10.0, 0.3, 200)]).astype(np.float32)
    score = _score(tukey_biweight, y)
    assert abs(score[0] - 10.0) < 0.2, score
    # with the weight turned around, the cluster at 0 is the lower minimum
    weight = np.where(y < 5, 3.0, 1.0).astype(np.float32)
    assert abs(_score(tukey_biweight, y, weight)[0]) < 0.2


def test_a_loss_undefined_at_zero_starts_from_the_median(rng):
    """Poisson deviance with an identity link is infinite at f = 0."""
    y = rng.poisson(20.0, 300).astype(np.float32)

    def poisson_identity(y, f):
        return f - y * jnp.log(f)

    np.testing.assert_allclose(_score(poisson_identity, y), [y.mean()], rtol=1e-4)


def test_rough_median_is_within_its_resolution_of_the_weighted_median(rng):
    from jaxboost.engine.init_score import _rough_median

    y = rng.standard_cauchy(1001).astype(np.float32)
    weight = rng.uniform(0.2, 2.0, 1001).astype(np.float32)
    weight[::10] = 0.0  # padding rows count for nothing, wherever their targets lie
    y[::10] = 1e6
    rough_median = jax.jit(_rough_median, static_argnums=(2, 3))  # (op by op: 30 programs)
    median = float(np.asarray(rough_median(jnp.asarray(y), jnp.asarray(weight), None, LEAF))[0])
    kept = weight > 0
    resolution = (y[kept].max() - y[kept].min()) / 2**16
    assert abs(median - inverted_cdf_quantile(y[kept], weight[kept], 0.5)) <= resolution


def test_catalogue_losses_declare_whether_they_are_convex():
    convex = [losses.squared_error, losses.binary_logloss, losses.poisson, losses.quantile(0.3)]
    assert all(loss.convex for loss in convex)
    assert not losses.focal(2.0).convex
    assert not losses.declare(name="mine", link="identity")(lambda y, f: (y - f) ** 2).convex


def test_a_given_base_score_is_the_initial_score():
    import jaxboost as jb

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] + 5.0).astype(np.float32)
    found = jb.Booster(n_estimators=4, max_depth=2).fit(X, y)
    # the minimiser's own F0, given: the same model to the bit
    given = jb.Booster(n_estimators=4, max_depth=2, base_score=float(found.base_score_[0]))
    given.fit(X, y)
    np.testing.assert_array_equal(given.predict(X), found.predict(X))
    np.testing.assert_array_equal(given.train_loss_, found.train_loss_)
    # another F0: the first training loss is the loss there
    zero = jb.Booster(n_estimators=4, max_depth=2, base_score=0).fit(X, y)
    assert zero.base_score_.tolist() == [0.0]
    np.testing.assert_allclose(zero.train_loss_[0], np.mean(0.5 * y**2), rtol=1e-6)
    classes = np.digitize(X[:, 0], [-0.5, 0.5]).astype(np.float32)
    three = jb.Booster(
        loss="softmax_cross_entropy", n_estimators=2, max_depth=2, base_score=[1.0, 0.0, -1.0]
    )
    assert three.fit(X, classes).base_score_.tolist() == [1.0, 0.0, -1.0]
    loaded = jb.load(_saved(three))
    assert loaded.base_score == [1.0, 0.0, -1.0]
    np.testing.assert_array_equal(loaded.predict(X), three.predict(X))


def _saved(model):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "model.json"
    model.save(path)
    return path


@pytest.mark.parametrize(
    ("base_score", "message"),
    [
        (float("nan"), r"got nan"),
        ("high", r"got 'high'"),
        ([[1.0]], r"got \[\[1.0\]\]"),
        ([0.0, 1.0], r"one per output \(1 here\), got \[0.0, 1.0\]"),
    ],
)
def test_a_bad_base_score_is_refused(base_score, message):
    import jaxboost as jb

    X = np.arange(20, dtype=np.float32).reshape(10, 2)
    with pytest.raises(ValueError, match="base_score: expected a finite number or one per output"):
        jb.Booster(n_estimators=2, base_score=base_score).fit(X, X[:, 0])
    with pytest.raises(ValueError, match=message):
        jb.Booster(n_estimators=2, base_score=base_score).fit(X, X[:, 0])


# locations and scales of the targets for the two-output searches: every pair
# but a scale of 1e-3 at 1e6, which float32 targets cannot hold (their spacing
# there is 0.0625)
_LOCATIONS_AND_SCALES = [
    (location, scale)
    for location in (0.0, 150.0, 1e6)
    for scale in (1e-3, 1.0, 1e4)
    if scale >= 1e-5 * location
]


def student_t_nll(y, f, nu=4.0):
    """A user's Student-t negative log-likelihood, ``f = (location, log scale)``."""
    z = (y - f[..., 0]) * jnp.exp(-f[..., 1])
    return f[..., 1] + 0.5 * (nu + 1) * jnp.log1p(z * z / nu)


def _student_t_minimiser(y, weight):
    """``(location, log scale)`` minimising the weighted mean
    :func:`student_t_nll` of ``y``, in float64 by scipy from the median and
    the log of the MAD."""
    from scipy import optimize

    y = np.asarray(y, np.float64)
    center, spread = np.median(y), np.median(np.abs(y - np.median(y)))

    def mean_loss(p):  # in units of the MAD about the median: well conditioned
        z = (y - center - p[0] * spread) * np.exp(-p[1]) / spread
        return np.average(p[1] + 2.5 * np.log1p(z * z / 4.0), weights=weight)

    found = optimize.minimize(mean_loss, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10})
    return np.array([center + found.x[0] * spread, found.x[1] + np.log(spread)])


@functools.cache
def _two_output_search(loss):
    return jax.jit(lambda y, weight: initial_score(loss, y, weight, 2))


def _assert_near_minimiser(score, expected, scale, location):
    """``score (2,)`` within 1e-3 of ``scale`` (and the float32 rounding of
    ``location``) of ``expected (2,)``'s location, within 1e-3 of its log scale."""
    resolution = 1e-3 * scale + 4 * np.spacing(np.float32(abs(location)))
    assert abs(score[0] - expected[0]) <= resolution, (score, expected)
    assert abs(score[1] - expected[1]) <= 1e-3, (score, expected)


@pytest.mark.parametrize(("location", "scale"), _LOCATIONS_AND_SCALES)
def test_gaussian_nll_starts_at_the_mean_and_log_std_at_any_location_and_scale(location, scale):
    """Searched from 0 by Newton steps alone, the mean stayed near 0 for
    targets far from it (the log std absorbed their spread)."""
    rng = np.random.default_rng(7)
    y = (location + scale * rng.normal(size=500)).astype(np.float32)
    score = np.asarray(_two_output_search(losses.gaussian_nll)(y, np.ones(500, np.float32)))
    y64 = y.astype(np.float64)
    _assert_near_minimiser(score, [y64.mean(), np.log(y64.std())], scale, location)


@pytest.mark.parametrize(("location", "scale"), _LOCATIONS_AND_SCALES)
def test_a_student_t_loss_starts_at_its_minimiser_at_any_location_and_scale(location, scale):
    """A redescending location: flat and concave at 0 for targets far from it."""
    rng = np.random.default_rng(8)
    y = (location + scale * rng.standard_t(4.0, size=500)).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, 500).astype(np.float32)
    weight[::7] = 0.0  # rows of weight 0 count for nothing
    score = np.asarray(_two_output_search(student_t_nll)(y, weight))
    kept = weight > 0
    expected = _student_t_minimiser(y[kept], weight[kept])
    _assert_near_minimiser(score, expected, scale, location)


def test_gaussian_nll_on_diabetes_starts_at_the_mean_and_log_std():
    """Raw diabetes targets (mean 152): the search from 0 stopped at a mean of
    0.03, and 300 rounds left the predicted means at 38 on average."""
    import jaxboost as jb

    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_diabetes(return_X_y=True)
    X, y = X.astype(np.float32), y.astype(np.float32)
    train, test = np.arange(len(y)) % 4 != 0, np.arange(len(y)) % 4 == 0
    model = jb.Booster(loss=losses.gaussian_nll, n_estimators=100, max_depth=3)
    model.fit(X[train], y[train])
    y64 = y[train].astype(np.float64)
    np.testing.assert_allclose(model.base_score_, [y64.mean(), np.log(y64.std())], rtol=1e-4)
    rmse = np.sqrt(np.mean(np.square(model.predict(X[test])[:, 0] - y[test])))
    constant_rmse = np.sqrt(np.mean(np.square(y64.mean() - y[test])))
    assert rmse < constant_rmse, (rmse, constant_rmse)


def test_a_search_that_stops_before_converging_warns_naming_the_loss():
    """Constant targets: the Gaussian's log scale falls without bound (a
    user's loss: the catalogue's distributions refuse such targets)."""
    import jaxboost as jb

    gaussian = losses.declare(
        lambda y, f: losses.gaussian_nll(y, f),
        name="my_gaussian",
        link="mean_scale",
        n_outputs=2,
        smooth=True,
        init=losses.gaussian_nll.init,
    )
    X = np.random.default_rng(3).normal(size=(200, 2)).astype(np.float32)
    y = np.full(200, 5.0, np.float32)
    match = "loss 'my_gaussian': the search for the initial score stopped before it converged"
    with pytest.warns(UserWarning, match=match):
        model = jb.Booster(loss=gaussian, n_estimators=1, max_depth=1).fit(X, y)
    assert model.base_score_[0] == 5.0


def test_the_vector_search_over_two_shards_is_the_one_device_search():
    """Its sums (the median's histogram among them) run over every shard."""
    from jaxboost.engine.training_programs import init_score_program
    from jaxboost.runtime.devices import make_mesh
    from jaxboost.runtime.distributed import global_rows

    if len(jax.devices()) < 2:
        pytest.skip("needs two devices")
    rng = np.random.default_rng(9)
    y = (1e6 + 1e4 * rng.standard_t(4.0, size=1000)).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, 1000).astype(np.float32)
    found = []
    for n_devices in (1, 2):
        mesh = make_mesh(jax.devices()[:n_devices])
        program = init_score_program(student_t_nll, 2, mesh)
        found.append(program(global_rows(mesh, y), global_rows(mesh, weight)))
    (one, one_loss, one_converged), (two, two_loss, two_converged) = found
    assert one_converged and two_converged
    np.testing.assert_allclose(two, one, rtol=1e-6)
    np.testing.assert_allclose(two_loss, one_loss, rtol=1e-6)


_NO_EVENT = np.zeros(64, np.float32)
_ONE_EVENT = np.where(np.arange(64) == 5, 3.0, 0.0).astype(np.float32)
_WEIGHTS_OFF_THE_EVENT = np.where(np.arange(64) == 5, 0.0, 1.0).astype(np.float32)


@pytest.mark.parametrize(
    ("loss", "y", "weight", "message"),
    [
        ("poisson", _NO_EVENT, None, r"y: every target is 0 \(on every row\): the loss 'poisson'"),
        ("tweedie", _NO_EVENT, None, r"every target is 0 .* 'tweedie' .* predict 0"),
        ("binary_logloss", _NO_EVENT, None, r"every target is 0 .* probability of 0"),
        ("binary_logloss", _NO_EVENT + 1, None, r"every target is 1 .* a label of 0"),
        ("focal", _NO_EVENT + 1, None, r"every target is 1 .* 'focal'"),
        ("softmax_cross_entropy", _NO_EVENT + 2, None, r"every label is 2 .* two classes"),
        ("poisson", _ONE_EVENT, _WEIGHTS_OFF_THE_EVENT, r"on the rows of positive weight"),
        ("distribution:poisson", _NO_EVENT, None, r"every target is 0 .* a target above 0"),
        ("distribution:zero_inflated_poisson", _NO_EVENT, None, r"every target is 0"),
    ],
)
def test_targets_whose_loss_has_no_finite_minimiser_are_refused_naming_y(loss, y, weight, message):
    # the minimiser is an infinite raw score: a Poisson fit of zero counts
    # started at 0 and predicted 0.37, a log loss of one class 0.18, and a
    # Tweedie fit blamed float32 (LightGBM: "sum of labels is zero")
    import jaxboost as jb

    if loss.startswith("distribution:"):
        pytest.importorskip("numpyro")
    X = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    with pytest.raises(ValueError, match=message):
        jb.Booster(loss=loss, n_estimators=2, max_depth=2).fit(X, y, sample_weight=weight)


@pytest.mark.parametrize(
    ("loss", "column", "message"),
    [
        ("poisson", _NO_EVENT, r"y\[:, 1\]: every target is 0 .* 'poisson'"),
        ("binary_logloss", _NO_EVENT + 1, r"y\[:, 1\]: every target is 1 .* 'binary_logloss'"),
    ],
)
def test_a_target_column_whose_loss_has_no_finite_minimiser_is_refused_naming_it(
    loss, column, message
):
    # a Regressor sums the loss over y's columns: an all-zero Poisson column
    # fitted an initial score of -26 (set by the search), with a warning
    # blaming reg_lambda
    import jaxboost as jb

    X = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    Y = np.column_stack([_ONE_EVENT.clip(0, 1), column])
    with pytest.raises(ValueError, match=message):
        jb.Regressor(loss=loss, n_estimators=2, max_depth=2).fit(X, Y)


@pytest.mark.parametrize(("loss", "link"), [("poisson", np.log), ("binary_logloss", None)])
def test_a_single_event_starts_at_the_closed_form_minimiser(loss, link):
    # a fold with one event trains: its initial score is log(mean) or the log-odds
    import jaxboost as jb

    X = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    y = np.minimum(_ONE_EVENT, 1.0 if link is None else 3.0)
    mean = float(np.mean(y))
    expected = np.log(mean) if link is not None else np.log(mean / (1 - mean))
    model = jb.Booster(loss=loss, n_estimators=2, max_depth=2).fit(X, y)
    np.testing.assert_allclose(model.base_score_, [expected], rtol=1e-4)
    assert np.all(np.isfinite(model.predict(X)))


def test_the_catalogue_quantile_starts_at_its_closed_form_the_searchs_number(monkeypatch):
    """quantile(alpha) takes the weighted alpha-quantile without the host
    search's program (some 20 calls per fit); a user's pinball loss (the same
    minimiser, written otherwise) still searches, and lands on the same score
    and loss, ties among the targets included."""
    import jaxboost as jb
    from jaxboost.frontends.training import initial_score_search

    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = np.round(rng.exponential(5.0, 200)).astype(np.float32)  # many ties
    weight = rng.uniform(0.5, 2.0, 200).astype(np.float32)
    weight[:50] = 1.0
    searched_programs = []
    search = initial_score_search.slope_sums_program

    def counted(*args):
        searched_programs.append(args)
        return search(*args)

    def pinball(alpha):
        def loss(y, f):
            return jnp.maximum(alpha * (y - f), (alpha - 1.0) * (y - f))

        return loss

    monkeypatch.setattr(initial_score_search, "slope_sums_program", counted)
    for alpha, rows in ((0.1, slice(None)), (0.37, slice(None)), (0.5, slice(0, 50))):

        def fit(loss, rows=rows):
            model = jb.Booster(loss=loss, n_estimators=1, max_depth=2)
            return model.fit(X[rows], y[rows], sample_weight=weight[rows])

        searched_programs.clear()
        user = fit(pinball(alpha))
        assert searched_programs, "a user's loss searches"
        user_start, user_loss = user.base_score_.copy(), user.train_loss_[0]
        searched_programs.clear()
        closed = fit(losses.quantile(alpha))
        assert not searched_programs, "the catalogue's quantile searches no program"
        expected = inverted_cdf_quantile(y[rows], weight[rows], alpha)
        np.testing.assert_allclose(closed.base_score_, [expected], rtol=1e-6)
        np.testing.assert_allclose(closed.base_score_, user_start, rtol=1e-6)
        np.testing.assert_allclose(closed.train_loss_[0], user_loss, rtol=1e-5)
    # offsets (fit's init_score): the loss at each row's score plus its offset
    # has no such closed form, so the catalogue's loss searches as a user's does
    offsets = rng.normal(size=200).astype(np.float32)
    searched_programs.clear()
    shifted = jb.Booster(loss=losses.quantile(0.3), n_estimators=1, max_depth=2)
    shifted.fit(X, y, sample_weight=weight, init_score=offsets)
    assert searched_programs
    user = jb.Booster(loss=pinball(0.3), n_estimators=1, max_depth=2)
    user.fit(X, y, sample_weight=weight, init_score=offsets)
    np.testing.assert_allclose(shifted.base_score_, user.base_score_, rtol=1e-6)


def test_the_catalogue_softmax_starts_at_its_closed_form_the_searchs_probabilities(monkeypatch):
    """softmax_cross_entropy takes the log of each class's weight share
    (centred) without the vector search's program (~1 s to compile); a
    user's cross-entropy still searches, and the search lands on the same
    probabilities (its scores differ from the closed form's by a constant)."""
    import jaxboost as jb
    from jaxboost.frontends.training import initial_score_search

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = rng.choice(4, size=300, p=[0.1, 0.2, 0.3, 0.4]).astype(np.float32)
    weight = rng.uniform(0.5, 2.0, 300).astype(np.float32)
    searched_programs = []
    search = initial_score_search.init_score_program

    def counted(*args):
        searched_programs.append(args)
        return search(*args)

    def cross_entropy(y, f):  # the catalogue's loss, written otherwise
        return jax.nn.logsumexp(f) - jnp.sum(jnp.where(jnp.arange(4) == y, f, 0.0))

    monkeypatch.setattr(initial_score_search, "init_score_program", counted)
    model = jb.Booster(loss=losses.softmax_cross_entropy, n_estimators=1, max_depth=2)
    closed = model.fit(X, y, sample_weight=weight)
    assert not searched_programs, "the catalogue's softmax searches no program"
    assert not initial_score_search._is_catalogue_softmax(cross_entropy)
    searched = _score(cross_entropy, y, weight, n_outputs=4)
    share = np.bincount(y.astype(int), weights=weight.astype(np.float64)) / weight.sum()
    np.testing.assert_allclose(jax.nn.softmax(closed.base_score_), share, rtol=1e-5)
    np.testing.assert_allclose(
        jax.nn.softmax(closed.base_score_), jax.nn.softmax(searched), atol=1e-5
    )
    np.testing.assert_allclose(closed.base_score_, searched - searched.mean(), atol=1e-4)
    # the first training loss: the weighted mean cross-entropy there
    log_p = np.log(share)
    expected = -np.sum(weight * log_p[y.astype(int)]) / weight.sum()
    np.testing.assert_allclose(closed.train_loss_[0], expected, rtol=1e-5)
