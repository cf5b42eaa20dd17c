"""A user's attacks on what landed with issues 51 and 52 (native
categorical search, LambdaRank by comparison, cached catalogue lifts, the
fused program without its stuck-leaf search, leaf-wise node tables with
``max_depth``): each test states what the user expects and failed before
its fix."""

import numpy as np

import jaxboost as jb


def test_lossguide_with_a_small_max_depth_and_no_max_leaves_grows_within_the_depth():
    # a LightGBM user's grow_policy="lossguide", max_depth=2 (num_leaves left
    # at its default) was refused: "max_leaves: 31 leaves do not fit in trees
    # of max_depth=2", naming a value the user never set; LightGBM grows
    # within the depth, and 2^max_depth leaves are the depth-wise trees
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=120)).astype(np.float32)
    settings = {"n_estimators": 3, "max_depth": 2, "min_child_samples": 0}
    leafwise = jb.Booster(grow_policy="lossguide", **settings).fit(X, y)
    depthwise = jb.Booster(**settings).fit(X, y)
    np.testing.assert_allclose(leafwise.predict_raw(X), depthwise.predict_raw(X), rtol=1e-6)
    assert np.asarray(leafwise.apply(X)).max() <= 3
