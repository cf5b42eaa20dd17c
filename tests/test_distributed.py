"""Many processes (hosts) train the model one process trains.

Runs ``examples/distributed_training.py``: two processes on loopback, each with
its own 60% / 40% of the rows, gloo collectives.
"""

import importlib.util
from pathlib import Path

import numpy as np
from run_script import run_script

import jaxboost as jb

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "distributed_training.py"


def _example_module():
    spec = importlib.util.spec_from_file_location("distributed_training", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_processes_train_the_single_process_model(tmp_path):
    result = run_script(EXAMPLE, args=("--output", str(tmp_path)), timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "same splits True, raw scores within 1e-5: True" in result.stdout

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
