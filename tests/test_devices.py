"""One engine for every device count: 4 simulated CPU devices equal 1."""

from pathlib import Path

from run_script import run_script, xla_flags_without

SCRIPT = Path(__file__).parent / "scripts" / "four_devices.py"


def test_four_cpu_devices_train_the_single_device_model():
    # a device count forced in XLA_FLAGS would override the one asked for; the
    # suite's other flags (LLVM at -O0, conftest.py) stay
    flags = xla_flags_without("--xla_force_host_platform_device_count")
    result = run_script(SCRIPT, {"JAXBOOST_CPU_DEVICES": "4", "XLA_FLAGS": flags})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    names = [line.split(":")[0] for line in lines]
    assert names == [
        "squared_error",
        "logloss",
        "quantile",
        "logloss_line_search",
        "multiclass",
        "subsampled",
        "min_child_samples",
        "quantised",
        "monotone",
        "interaction",
        "lossguide",
        "redescending",
        "groups",
        "groups_joint_newton",
        "offsets",
        "continued",
        "categorical",
        "categorical_multiclass",
    ]
    assert all(line.endswith("same splits True, raw scores within 1e-5: True") for line in lines)


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
