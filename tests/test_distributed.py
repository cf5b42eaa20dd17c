"""Many processes (hosts) train the model one process trains.

Runs ``examples/distributed_training.py``: two processes on loopback, each with
its own 60% / 40% of the rows, gloo collectives.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from run_script import run_script

import jaxboost as jb
from jaxboost.engine.binning import DEFAULT_SAMPLE_SIZE

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "distributed_training.py"


def _example_module():
    spec = importlib.util.spec_from_file_location("distributed_training", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_processes_train_the_single_process_model(tmp_path):
    result = run_script(EXAMPLE, args=("--output", str(tmp_path)), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "same splits True, raw scores within 1e-5 of their largest: True" in result.stdout
    # each worker's line, without gloo's log lines: those stay in its log
    first_lines = [line[:30] for line in result.stdout.splitlines()[:2]]
    assert first_lines == ["process 0: 3600 of 6000 rows, ", "process 1: 2400 of 6000 rows, "]
    assert "[Gloo]" not in result.stdout + result.stderr
    assert "process 1: 2400 of 6000 rows" in (tmp_path / "worker1.log").read_text()

    example = _example_module()
    first, second = (jb.load(tmp_path / f"model_process{i}.json") for i in (0, 1))
    for field in first.forest_._fields:
        np.testing.assert_array_equal(
            getattr(first.forest_, field), getattr(second.forest_, field), err_msg=field
        )
    X, y = example.all_rows()
    single = example.make_model().fit(X, y)
    np.testing.assert_array_equal(first.forest_.feature, single.forest_.feature)
    np.testing.assert_array_equal(first.forest_.threshold_bin, single.forest_.threshold_bin)
    np.testing.assert_allclose(first.predict_raw(X), single.predict_raw(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(first.bin_edges_, single.bin_edges_)


CHECKS = Path(__file__).resolve().parent / "scripts" / "distributed_checks.py"


def _two_processes(case: str, *args: str, timeout: int = 120) -> list[dict]:
    result = run_script(
        CHECKS, args=("--case", case, "--timeout", str(timeout), *args), timeout=timeout + 180
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# the cases that end "ok" on both processes, run in turn by one pair of
# workers: each pair costs some 15 s to start, initialise and join
_OK_CASES = (
    "gather-64bit",
    "constant-each",
    "watched-on-0",
    "above-sample",
    "categories",
    "groups",
    "custom-groups",
)


@pytest.fixture(scope="module")
def ok_cases(tmp_path_factory) -> tuple[dict[str, list[dict]], Path]:
    """``(results, output)``: each of ``_OK_CASES``' two workers' exit code
    and last line, and the folder of each case's models (``output / case``)."""
    output = tmp_path_factory.mktemp("distributed")
    return _two_processes(",".join(_OK_CASES), "--output", str(output), timeout=360), output


def _checks_module():
    spec = importlib.util.spec_from_file_location("distributed_checks", CHECKS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_64bit_values_cross_processes_bit_for_bit(ok_cases):
    # process_allgather alone cuts them to 32 bits: 2**40 arrives as 0
    for worker in ok_cases[0]["gather-64bit"]:
        assert worker["code"] == 0 and worker["last"].startswith("ok "), worker
        exchanged = json.loads(worker["last"][3:])
        assert exchanged["uint64"] == [2**40, 2**64 - 1, 2**40 + 1, 2**64 - 2]
        assert exchanged["int64"] == [[-(2**40)], [-(2**40) - 1]]
        assert exchanged["float64"] == [(1 / 3).hex(), (1 / 3 + 1).hex()]
        assert exchanged["first"] == [2**33, (0.1).hex()]
        assert exchanged["dtypes"] == ["int64", "float64"]


def test_two_processes_above_the_edge_sample_train_the_single_process_model(ok_cases):
    # 2 x 110,000 rows: the edges come from a 200,000-row sample chosen by
    # global row number, the same rows as in one process, so the same model
    checks = _checks_module()
    assert checks.ABOVE_SAMPLE_ROWS > DEFAULT_SAMPLE_SIZE
    for worker in ok_cases[0]["above-sample"]:
        assert worker["code"] == 0 and worker["last"].startswith("ok "), worker
    distributed = jb.load(ok_cases[1] / "above-sample" / "model_process0.json")
    X, y = checks.all_rows()
    single = checks.make_model().fit(X, y)
    np.testing.assert_array_equal(distributed.bin_edges_, single.bin_edges_)
    np.testing.assert_array_equal(distributed.forest_.feature, single.forest_.feature)
    np.testing.assert_array_equal(distributed.forest_.threshold_bin, single.forest_.threshold_bin)
    # float32 histograms summed in another order: scores equal to rounding
    np.testing.assert_allclose(
        distributed.predict_raw(X), single.predict_raw(X), rtol=1e-5, atol=1e-5
    )


def test_bad_rows_in_one_process_stop_every_process_with_the_reason():
    # without the exchange, process 0 would wait in the next collective until
    # jax.distributed times out
    first, second = _two_processes("nan-target")
    assert second["code"] == 3 and second["last"].startswith("error ValueError: y:")
    assert first["code"] == 3, first
    assert "process 1: ValueError: y:" in first["last"]


def test_features_constant_within_each_process_but_not_across_them_train(ok_cases):
    first, second = ok_cases[0]["constant-each"]
    assert first["code"] == 0 and second["code"] == 0, (first, second)
    assert first["last"] == second["last"]  # the same model: the same training loss


def test_features_constant_everywhere_are_rejected_on_every_process():
    for worker in _two_processes("constant-all"):
        assert worker["code"] == 3, worker
        assert "every feature is constant" in worker["last"]


def test_a_process_that_leaves_mid_fit_stops_the_other_with_the_reason():
    # without the check: Gloo's "Connection reset by peer" from deep in JAX
    first, second = _two_processes("peer-leaves")
    assert second["code"] == -9, second  # killed after round 2
    assert first["code"] == 3, first
    assert first["last"].startswith("error RuntimeError: fit: process 0 lost process 1 in a")
    # Gloo's own cause, carried in the message (its words vary with timing:
    # "Connection reset by peer", "Connection closed by peer", ...)
    assert "(UNKNOWN: Gloo" in first["last"]
    assert "cannot continue" in first["last"] and "Restart all processes" in first["last"]


def test_an_evaluation_set_on_process_0_alone_trains(ok_cases):
    # the processes must run the same programs: one round per program on all
    # (they aborted in Gloo, "collective mismatch", when only process 0 watched)
    first, second = ok_cases[0]["watched-on-0"]
    assert first["code"] == 0 and second["code"] == 0, (first, second)
    assert first["last"] == second["last"]


def test_two_processes_agree_the_category_tables_and_train_the_single_process_model(ok_cases):
    # each process sees some categories only, listed in its own order: the
    # tables are the union, in process 0's order, so every process codes alike
    for worker in ok_cases[0]["categories"]:
        assert worker["code"] == 0 and worker["last"].startswith("ok "), worker
    models = ok_cases[1] / "categories"
    first, second = (jb.load(models / f"model_process{i}.json") for i in (0, 1))
    checks = _checks_module()
    X, y = checks.category_rows()
    single = checks.make_model().fit(X, y)
    for model in (first, second):
        (table,) = model.categories_
        assert table.values.tolist() == list("abcdefghijkl")
        np.testing.assert_array_equal(table.codes, single.categories_[0].codes)
        for field in ("feature", "threshold_bin", "category_left"):
            np.testing.assert_array_equal(
                getattr(model.forest_, field), getattr(single.forest_, field), err_msg=field
            )
        np.testing.assert_allclose(
            model.predict_raw(X), single.predict_raw(X), rtol=1e-5, atol=1e-5
        )
    assert single.forest_.category_left.any()


def test_processes_with_other_categorical_columns_stop_with_the_reason():
    for worker in _two_processes("categories-differ"):
        assert worker["code"] == 3, worker
        message = "categorical_features: the processes have other categorical columns"
        assert message in worker["last"], worker


@pytest.mark.parametrize("case", ["groups", "custom-groups"])
def test_two_processes_of_whole_queries_train_the_single_process_ranking_model(ok_cases, case):
    # each process places its own queries on its devices, in shapes agreed
    # between them; rows numbered process by process, as one process's; a
    # user's group loss is traced at every process's group widths (process
    # 1's programs run the width-4 groups only process 0 holds)
    for worker in ok_cases[0][case]:
        assert worker["code"] == 0 and worker["last"].startswith("ok "), worker
    checks = _checks_module()
    X, relevance, qid = checks.query_rows()
    single = checks.make_model(case).fit(X, relevance, qid=qid)
    models = ok_cases[1] / case
    for model in (jb.load(models / f"model_process{i}.json") for i in (0, 1)):
        np.testing.assert_array_equal(model.bin_edges_, single.bin_edges_)
        for field in ("feature", "threshold_bin"):
            np.testing.assert_array_equal(
                getattr(model.forest_, field), getattr(single.forest_, field), err_msg=field
            )
        np.testing.assert_allclose(
            model.predict_raw(X), single.predict_raw(X), rtol=1e-5, atol=1e-5
        )


def test_a_group_loss_without_groups_is_refused_on_every_process():
    # all rows one group would span the processes (Cox without strata)
    for worker in _two_processes("groups-absent"):
        assert worker["code"] == 3, worker
        assert "group, qid: with several processes the group loss" in worker["last"]
