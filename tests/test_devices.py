"""One engine for every device count: 4 simulated CPU devices equal 1."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "four_devices.py"


def test_four_cpu_devices_train_the_single_device_model():
    environment = {**os.environ, "JAXBOOST_CPU_DEVICES": "4"}
    environment.pop("XLA_FLAGS", None)
    result = subprocess.run(
        [sys.executable, str(SCRIPT)],
        check=False,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("same splits True, raw scores within 1e-5: True") == 5
