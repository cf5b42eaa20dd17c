"""A fit on a Dask cluster's partitions is the single-process fit of its rows.

A `LocalCluster` of 2 worker processes (1 thread each) on 127.0.0.1; the
test places each partition on a chosen worker (uneven sizes, a worker
holding non-adjacent partitions), so the rows' order across the training
processes, worker by worker, is known.  A fit on new workers or settings
starts a training process per worker (docs/dask.md; later fits on the same
ones reuse them): few fits, few rows and rounds.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from run_script import run_script

import jaxboost as jb

distributed = pytest.importorskip(
    "distributed", reason="dask[distributed] is not installed (the dask extra)"
)
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
jbd = pytest.importorskip("jaxboost.dask")

pytestmark = pytest.mark.dask


@pytest.fixture(scope="module")
def client():
    # the training processes use the test run's compilation cache (conftest.py)
    cache = os.environ.get("JAXBOOST_TEST_RUN_XLA_CACHE")
    env = {"JAXBOOST_COMPILATION_CACHE": cache} if cache else {}
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            env=env,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _workers(client) -> list[str]:
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


def _placed(client, pieces: list[list], owners: list[str]) -> list:
    """Per column of ``pieces`` (each a list of one row block per partition,
    numpy or pandas), the dask collection whose partition ``i`` sits on
    worker ``owners[i]``."""
    collections = []
    for blocks in pieces:
        futures = [client.scatter(b, workers=[w]) for b, w in zip(blocks, owners)]
        if hasattr(blocks[0], "iloc"):
            collections.append(dd.from_delayed(futures, meta=blocks[0].iloc[:0]))
        else:
            parts = [
                da.from_delayed(f, shape=b.shape, dtype=b.dtype) for f, b in zip(futures, blocks)
            ]
            collections.append(da.concatenate(parts))
    return collections


def _same_model(model, single, X, init_score=None) -> None:
    for field in ("feature", "threshold_bin"):
        np.testing.assert_array_equal(
            getattr(model.forest_, field), getattr(single.forest_, field), err_msg=field
        )
    np.testing.assert_array_equal(model.bin_edges_, single.bin_edges_)
    np.testing.assert_allclose(
        model.predict_raw(X, init_score=init_score),
        single.predict_raw(X, init_score=init_score),
        rtol=1e-5,
        atol=1e-5,
    )


def _regression_rows(n_rows: int = 900, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 4)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n_rows)).astype(np.float32)
    return X, y


BOUNDS = (0, 150, 600, 900)  # partitions of 150, 450 and 300 rows


def _cut(values: np.ndarray) -> list[np.ndarray]:
    return [values[a:b] for a, b in itertools.pairwise(BOUNDS)]


def test_squared_error_on_uneven_partitions_is_the_single_process_model(client):
    X, y = _regression_rows()
    first, second = _workers(client)
    dX, dy = _placed(client, [_cut(X), _cut(y)], [first, first, second])
    settings = {"n_estimators": 4, "max_depth": 3}
    model = jbd.DaskBooster(**settings).fit(dX, dy)  # the current client
    single = jb.Booster(**settings).fit(X, y)
    local = model.to_local()
    assert type(local) is jb.Booster and model.n_estimators_ == 4
    _same_model(local, single, X)
    lazy = model.predict(dX)
    assert isinstance(lazy, da.Array) and lazy.shape == (900,)
    np.testing.assert_array_equal(lazy.compute(), local.predict(X))


def test_log_loss_with_a_worker_holding_two_apart_partitions(client):
    # partitions 0 and 2 on the first worker: its process trains on both, so
    # the rows are numbered 0, 2, 1 by partition; subsampling and the edge
    # sample follow that order, which the single-process fit gets
    X, y = _regression_rows(seed=1)
    labels = (y > 0).astype(np.int64)
    first, second = _workers(client)
    dX, dy = _placed(client, [_cut(X), _cut(labels)], [first, second, first])
    order = np.r_[0:150, 600:900, 150:600]
    settings = {"n_estimators": 4, "max_depth": 3, "subsample": 0.7}
    model = jbd.DaskClassifier(client=client, **settings).fit(dX, dy)
    single = jb.Classifier(**settings).fit(X[order], labels[order])
    local = model.to_local()
    np.testing.assert_array_equal(local.classes_, [0, 1])
    _same_model(local.booster_, single.booster_, X)
    lazy = model.predict_proba(dX)
    assert lazy.shape == (900, 2)
    np.testing.assert_allclose(lazy.compute(), local.predict_proba(X), rtol=1e-6)


def _query_rows():
    """40 queries of 3 to 17 rows: features, relevance 0 to 3, query ids."""
    rng = np.random.default_rng(6)
    sizes = rng.integers(3, 18, 40)
    qid = np.repeat(np.arange(40), sizes)
    X = rng.normal(size=(qid.size, 3)).astype(np.float32)
    relevance = np.clip(np.round(X[:, 0] + 0.5 * rng.normal(size=qid.size) + 1), 0, 3)
    return X, relevance.astype(np.float32), qid


def _kept_process_ids(client) -> dict[str, list[int]]:
    """Per worker, the process ids of its kept training processes."""

    def kept() -> list[int]:
        from jaxboost.dask import kept_processes

        return sorted(process.process.pid for process in kept_processes._KEPT.values())

    return client.run(kept)


def test_a_second_fit_on_the_same_workers_runs_in_the_kept_processes(client):
    X, y = _regression_rows(seed=3)
    first, second = _workers(client)
    dX, dy = _placed(client, [_cut(X), _cut(y)], [second, first, first])
    settings = {"n_estimators": 3, "max_depth": 2}
    jbd.fit(client, dX, dy, model=jb.Booster(**settings))
    kept = _kept_process_ids(client)
    assert sorted(kept) == sorted([first, second])
    assert all(len(ids) == 1 for ids in kept.values()), kept
    model = jbd.fit(client, dX, dy, model=jb.Booster(learning_rate=0.5, **settings))
    assert _kept_process_ids(client) == kept  # no process started
    order = np.r_[150:900, 0:150]  # process 0: the second worker's partition
    _same_model(model, jb.Booster(learning_rate=0.5, **settings).fit(X[order], y[order]), X)

    def end_kept_process():
        from jaxboost.dask import kept_processes

        for process in kept_processes._KEPT.values():
            process.process.kill()
            process.process.wait()

    client.run(end_kept_process, workers=[first])
    model = jbd.fit(client, dX, dy, model=jb.Booster(**settings))  # new processes on both
    started = _kept_process_ids(client)
    assert all(len(started[w]) == 1 and started[w] != kept[w] for w in kept), (kept, started)
    _same_model(model, jb.Booster(**settings).fit(X[order], y[order]), X)


def test_lambdarank_on_whole_queries_per_worker_is_the_single_process_model(client):
    X, relevance, qid = _query_rows()
    single = jb.Ranker(n_estimators=3, max_depth=2).fit(X, relevance, qid=qid)
    first, second = _workers(client)
    # queries 0-9 | 10-22 on the first worker, 23-39 on the second (whole queries)
    cuts = [0, int(np.searchsorted(qid, 10)), int(np.searchsorted(qid, 23)), qid.size]
    pieces = [[part[a:b] for a, b in itertools.pairwise(cuts)] for part in (X, relevance, qid)]
    dX, dy, dqid = _placed(client, pieces, [first, first, second])
    model = jbd.DaskRanker(client=client, n_estimators=3, max_depth=2).fit(dX, dy, qid=dqid)
    _same_model(model.to_local().booster_, single.booster_, X)
    # all on the first worker: the second, without partitions, takes no part
    dX, dy, dqid = _placed(client, pieces, [first, first, first])
    model = jbd.DaskRanker(client=client, n_estimators=3, max_depth=2).fit(dX, dy, qid=dqid)
    _same_model(model.to_local().booster_, single.booster_, X)


def test_a_query_split_between_workers_is_refused_before_starting(client):
    X, relevance, qid = _query_rows()
    first, second = _workers(client)
    cut = int(np.searchsorted(qid, 20)) + 1  # query 20's first row on the first worker
    pieces = [[part[:cut], part[cut:]] for part in (X, relevance, qid)]
    dX, dy, dqid = _placed(client, pieces, [first, second])
    with pytest.raises(ValueError, match="qid: query 20 has rows on workers tcp://"):
        jbd.DaskRanker(client=client).fit(dX, dy, qid=dqid)
    with pytest.raises(ValueError, match="qid: a group loss over 2 workers needs"):
        jbd.DaskBooster(client=client, loss=jb.losses.lambdarank()).fit(dX, dy)


def _frame(n_rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    shops = np.array(list("abcdef"), dtype=object)[rng.integers(0, 6, n_rows)]
    frame = pd.DataFrame({"shop": pd.Categorical(shops, categories=list("abcdef"))})
    frame["a"] = rng.normal(size=n_rows).astype(np.float32)
    frame["b"] = rng.normal(size=n_rows).astype(np.float32)
    effect = frame["shop"].isin(["b", "e"]).to_numpy() * 2.0
    frame["y"] = (effect + frame["a"] + 0.3 * rng.normal(size=n_rows)).astype(np.float32)
    frame["weight"] = rng.uniform(0.5, 2.0, n_rows).astype(np.float32)
    frame["offset"] = (0.5 * frame["b"]).astype(np.float32)
    return frame


def test_a_custom_loss_on_a_dataframe_with_categories_weights_offsets_and_an_eval_set(client):
    frame, held_out = _frame(900, 2), _frame(200, 3)
    first, second = _workers(client)
    (dframe,) = _placed(client, [_cut(frame)], [first, first, second])
    (dheld,) = _placed(client, [[held_out[:120], held_out[120:]]], [second, first])
    columns = ["shop", "a", "b"]
    # a lambda travels by value (cloudpickle); a function of this module would
    # travel by name, and the training processes cannot import the tests
    pseudo_huber = lambda y, f: jnp.sqrt(1.0 + (f - y) ** 2) - 1.0
    settings = {"loss": pseudo_huber, "n_estimators": 4, "max_depth": 3}
    model = jbd.DaskRegressor(client=client, **settings).fit(
        dframe[columns],
        dframe["y"],
        dframe["weight"],
        init_score=dframe["offset"],
        eval_set=[(dheld[columns], dheld["y"])],
        eval_init_score=[dheld["offset"]],
    )
    single = jb.Regressor(**settings).fit(
        frame[columns],
        frame["y"],
        frame["weight"],
        init_score=frame["offset"],
        eval_set=[(held_out[columns], held_out["y"])],
        eval_init_score=[held_out["offset"]],
    )
    local = model.to_local()
    assert type(local) is jb.Regressor
    assert local.categories_[0].values.tolist() == list("abcdef")
    assert local.booster_.forest_.category_left.any()
    _same_model(local.booster_, single.booster_, frame[columns], frame["offset"])
    (name,) = single.evals_result_
    np.testing.assert_allclose(
        local.evals_result_[name]["loss"], single.evals_result_[name]["loss"], rtol=1e-5
    )
    lazy = model.predict(dframe[columns], init_score=None)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), local.predict(frame[columns]), rtol=1e-6)


def test_a_gamma_distribution_is_the_single_process_model(client):
    X, y = _regression_rows(seed=4)
    amounts = np.exp(0.5 * X[:, 0] + 0.1 * y).astype(np.float32)
    first, second = _workers(client)
    dX, dy = _placed(client, [_cut(X), _cut(amounts)], [second, first, first])
    settings = {"loss": jb.losses.distribution("gamma"), "n_estimators": 3, "max_depth": 2}
    model = jbd.fit(client, dX, dy, model=jb.Booster(**settings))
    single = jb.Booster(**settings).fit(X, amounts)
    assert model.n_outputs_ == 2
    _same_model(model, single, X)
    lazy = jbd.predict(model, dX, "predict_raw")
    assert lazy.shape == (900, 2)
    np.testing.assert_array_equal(lazy.compute(), model.predict_raw(X))


def test_bad_rows_on_one_worker_raise_the_local_fit_s_error_on_the_client(client):
    X, y = _regression_rows(seed=7)
    y[700] = np.nan  # in the second worker's partition
    first, second = _workers(client)
    dX, dy = _placed(client, [_cut(X), _cut(y)], [first, first, second])
    with pytest.raises(ValueError, match=r"y: .*\[ValueError in process [01] on worker tcp://"):
        jbd.fit(client, dX, dy, model=jb.Booster(n_estimators=2, max_depth=2))


def test_a_worker_that_dies_mid_fit_stops_the_fit_with_the_reason(client):
    X, y = _regression_rows(seed=5)
    first, second = _workers(client)
    dX, dy = _placed(client, [_cut(X), _cut(y)], [first, first, second])

    def end_worker_of_process_1(env):
        import signal

        import jax

        if env.iteration == 1 and jax.process_index() == 1:
            os.kill(os.getppid(), signal.SIGKILL)  # the Dask worker running this process

    with pytest.raises(RuntimeError, match="worker tcp://.* left the cluster during the fit"):
        jbd.fit(
            client,
            dX,
            dy,
            model=jb.Booster(n_estimators=30, max_depth=2),
            callbacks=[end_worker_of_process_1],
        )


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dask_training.py"


def test_the_example_fits_on_its_cluster_the_single_process_model():
    result = run_script(EXAMPLE, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "Regressor of 30 rounds; lazy prediction of 6000 rows" in result.stdout
    assert "same splits True, raw scores within 1e-5 of their largest: True" in result.stdout


def test_the_estimators_search_the_loss_s_parameters_as_the_local_ones():
    """``loss__<name>`` in get_params/set_params (GridSearchCV's), into
    ``loss_params``; clone keeps it; an unknown name is refused."""
    from sklearn.base import clone

    model = jbd.DaskRegressor(loss="quantile", loss_params={"alpha": 0.9}, n_estimators=5)
    assert model.get_params()["loss__alpha"] == 0.9
    model.set_params(loss__alpha=0.3, n_estimators=7)
    assert model.get_params(deep=False)["loss_params"] == {"alpha": 0.3}
    assert clone(model).get_params()["loss__alpha"] == 0.3
    assert clone(model).get_params()["n_estimators"] == 7
    with pytest.raises(ValueError, match="nonsense"):
        model.set_params(nonsense=1)
