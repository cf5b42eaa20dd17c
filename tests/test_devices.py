"""One engine for every device count: 4 simulated CPU devices equal 1."""

from pathlib import Path

from run_script import run_script

SCRIPT = Path(__file__).parent / "scripts" / "four_devices.py"


def test_four_cpu_devices_train_the_single_device_model():
    # XLA_FLAGS cleared: a device count forced there would override the one asked for
    result = run_script(SCRIPT, {"JAXBOOST_CPU_DEVICES": "4", "XLA_FLAGS": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("same splits True, raw scores within 1e-5: True") == 5
