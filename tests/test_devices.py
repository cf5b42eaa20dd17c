"""One engine for every device count: 4 simulated CPU devices equal 1."""

from run_script import four_device_cases


def test_four_cpu_devices_train_the_single_device_model():
    assert four_device_cases(1) == [
        "squared_error",
        "logloss",
        "quantile",
        "logloss_line_search",
        "multiclass",
        "subsampled",
        "min_child_samples",
        "quantised",
        "monotone",
        "monotone_intermediate",
        "interaction",
    ]


def test_a_one_device_fit_traces_no_collectives(monkeypatch):
    # on one device every psum would still run as an all-reduce that copies
    # its operand; the programs sum over no axis there
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    import jaxboost as jb

    traced = []
    for name in ("psum", "pmax", "psum_scatter", "all_gather"):
        original = getattr(lax, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            traced.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(lax, name, spy)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=300).astype(np.float32)

    def fresh_loss(y, f):  # a new function: nothing cached, the programs are traced
        return jnp.square(y - f)

    settings = {"loss": fresh_loss, "n_estimators": 2, "max_depth": 2}
    jb.Booster(devices=jax.devices()[:1], **settings).fit(X, y)
    assert traced == []
    if len(jax.devices()) > 1:  # the spy sees the collectives of a sharded fit
        jb.Booster(devices=jax.devices()[:2], **settings).fit(X, y)
        assert "psum" in traced
