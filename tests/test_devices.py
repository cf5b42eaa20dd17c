"""One engine for every device count: 4 simulated CPU devices equal 1."""

from pathlib import Path

from run_script import run_script

SCRIPT = Path(__file__).parent / "scripts" / "four_devices.py"


def test_four_cpu_devices_train_the_single_device_model():
    # XLA_FLAGS cleared: a device count forced there would override the one asked for
    result = run_script(SCRIPT, {"JAXBOOST_CPU_DEVICES": "4", "XLA_FLAGS": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    names = [line.split(":")[0] for line in lines]
    assert names == [
        "squared_error",
        "logloss",
        "quantile",
        "multiclass",
        "subsampled",
        "quantised",
    ]
    assert all(line.endswith("same splits True, raw scores within 1e-5: True") for line in lines)
