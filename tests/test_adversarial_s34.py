"""A user's attacks on what landed with the one-way data path (frames with
category and string columns, evaluation sets, continued fits) and the
lifted losses (a custom JVP rule reading a global, a group loss's declared
row_derivatives): each test states what the user expects and failed
before its fix."""

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import jaxboost as jb


def _frame(n: int = 60):
    """A frame of a number, a pandas category column and a string column."""
    rng = np.random.default_rng(0)
    shop = rng.choice(["a", "b", "c"], n)
    frame = pd.DataFrame(
        {
            "num": rng.normal(size=n).astype(np.float32),
            "shop": pd.Categorical(shop),
            "col": rng.choice(["x", "y"], n),
        }
    )
    y = (frame["num"].to_numpy() + 2.0 * (shop == "b")).astype(np.float32)
    return frame, y


_SETTINGS = {"n_estimators": 2, "max_depth": 2}


def test_an_evaluation_frame_with_the_columns_in_another_order_is_named_so():
    # predict says "the columns seen in fit, in another order"; the
    # evaluation set said "categorical_features: column 'num' holds 0.33,
    # not a category code", blaming a setting the user never passed
    frame, y = _frame()
    reordered = frame[["col", "shop", "num"]]
    with pytest.raises(ValueError, match=r"eval_set\[0\] X: the columns seen in fit, in another"):
        jb.Booster(**_SETTINGS).fit(frame, y, eval_set=[(reordered, y)])
    ranker = jb.Ranker(**_SETTINGS)
    with pytest.raises(ValueError, match=r"eval_set\[0\] X: the columns seen in fit, in another"):
        ranker.fit(frame, y, group=[30, 30], eval_set=[(reordered, y)], eval_group=[[30, 30]])


def test_a_continued_fit_on_the_columns_in_another_order_names_init_model_columns():
    # the error said "init_model's categorical columns are ['num', 'col']":
    # columns the model never held as categories (this X's names at the
    # model's positions), and advised categorical_features=['num', 'col']
    frame, y = _frame()
    first = jb.Booster(**_SETTINGS).fit(frame, y)
    reordered = frame[["shop", "num", "col"]]
    with pytest.raises(ValueError, match=r"init_model: fitted on the columns") as raised:
        jb.Booster(**_SETTINGS).fit(reordered, y, init_model=first)
    assert "['num', 'col']" not in str(raised.value)


# the derivative's scale of `_scaled_square`, read from this global at each fit
_RULE_SCALE = [1.0]


@jax.custom_jvp
def _scaled_square(residual):
    return 0.5 * residual**2


# defjvps: JAX wraps the lambda in a rule of its own, written in JAX's files
_scaled_square.defjvps(lambda tangent, value, residual: _RULE_SCALE[0] * residual * tangent)


def test_a_defjvps_rule_reading_a_global_fits_its_new_value():
    # the wrapper's file is JAX's, so the rule was taken for JAX's own (which
    # reads no user state) and the loss lifted: the second fit reused the
    # first fit's program, the derivative's scale of 1 compiled into it
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=120)).astype(np.float32)
    settings = {
        **_SETTINGS,
        "leaf_method": "newton",
        "armijo": False,
        "reg_lambda": 1.0,
        "base_score": 0.0,
        "learning_rate": 0.5,
    }

    def fitted(loss):
        return np.asarray(jb.Booster(loss=loss, **settings).fit(X, y).predict_raw(X))

    _RULE_SCALE[0] = 1.0
    first = fitted(lambda target, f: _scaled_square(f - target))
    _RULE_SCALE[0] = 3.0
    second = fitted(lambda target, f: _scaled_square(f - target))
    # the same gradient (3 r) and hessian (3) from a plain loss: the reference
    reference = fitted(lambda target, f: 1.5 * (f - target) ** 2)
    assert np.abs(reference - first).max() > 1e-3  # (the scale shows in the model)
    np.testing.assert_allclose(second, reference, rtol=1e-6, atol=1e-6)


def _squared_group(y, f, mask):
    return jnp.sum(jnp.where(mask, 0.5 * (f - y) ** 2, 0.0))


@pytest.mark.parametrize(
    "row_derivatives, got",
    [
        (
            lambda y, f, mask: (jnp.sum(f - y), jnp.float32(1.0)),
            r"\('float32\[\]', 'float32\[\]'\)",
        ),
        (lambda y, f, mask: jnp.where(mask, f - y, 0.0), r"float32\[8\]"),
        (lambda y, f, mask: (jnp.zeros(3), jnp.ones(3)), r"\('float32\[3\]', 'float32\[3\]'\)"),
    ],
)
def test_row_derivatives_of_other_shapes_are_refused_naming_them(row_derivatives, got):
    # a pair of scalars, one array, or arrays of another length crashed in
    # JAX's indexing or broadcasting ("Too many indices: array is
    # 0-dimensional", "Incompatible shapes for broadcasting") deep in fit
    loss = jb.losses.declare(_squared_group, per="group", row_derivatives=row_derivatives)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2)).astype(np.float32)
    y = np.round(X[:, 0] + 1).astype(np.float32)
    message = rf"row_derivatives\(y, f, mask\) .* must return \(grad, hess\).*got {got}"
    with pytest.raises(ValueError, match=message):
        jb.Booster(loss=loss, **_SETTINGS).fit(X, y, group=[10, 10, 10])


def test_an_evaluation_frame_with_codes_for_labels_names_the_evaluation_set():
    # the error blamed the training X: "X: column 'shop' held category
    # labels in fit (...); pass it as one", while X was right
    frame, y = _frame()
    coded = frame.assign(shop=frame["shop"].cat.codes)
    with pytest.raises(ValueError, match=r"^eval_set\[0\] X: column 'shop' held category labels"):
        jb.Booster(**_SETTINGS).fit(frame, y, eval_set=[(coded, y)])
    digits = frame.assign(shop=frame["shop"].cat.codes.astype(str))  # labels of another kind
    numbered = frame.assign(shop=pd.Categorical(frame["shop"].cat.codes))
    with pytest.raises(ValueError, match=r"^eval_set\[0\] X: column 'shop' held category labels"):
        jb.Booster(**_SETTINGS).fit(numbered, y, eval_set=[(digits, y)])
