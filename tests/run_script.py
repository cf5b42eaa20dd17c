"""Run a Python script in a fresh process (its own JAX device count, cache)."""

import os
import subprocess
import sys
from pathlib import Path


def run_script(
    script: Path,
    environment: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: int = 600,
    args: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """``python script *args`` with ``environment`` added to this process's,
    output captured.  The script keeps its programs in the test run's XLA
    cache (conftest.py) unless ``environment`` chooses a cache."""
    environment = environment or {}
    if not {"JAXBOOST_COMPILATION_CACHE", "JAXBOOST_CACHE_DIR"} & set(environment):
        run_cache = os.environ.get("JAXBOOST_TEST_RUN_XLA_CACHE")
        environment = (
            {"JAXBOOST_COMPILATION_CACHE": run_cache, **environment} if run_cache else environment
        )
    return subprocess.run(
        [sys.executable, str(script), *args],
        check=False,
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def xla_flags_without(*names: str) -> str:
    """This process's ``XLA_FLAGS`` less the flags called ``names`` (e.g.
    ``--xla_force_host_platform_device_count``), for a script's environment."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    return " ".join(flag for flag in flags if flag.split("=")[0] not in names)


def four_device_cases(part: int) -> list[str]:
    """The names of the cases part ``part`` (1 or 2) of scripts/four_devices.py
    ran on 4 CPU devices, after checking each gave 1 device's splits and scores."""
    # a device count forced in XLA_FLAGS would override the one asked for; the
    # suite's other flags (LLVM at -O0, conftest.py) stay
    flags = xla_flags_without("--xla_force_host_platform_device_count")
    environment = {"JAXBOOST_CPU_DEVICES": "4", "XLA_FLAGS": flags}
    result = run_script(
        Path(__file__).parent / "scripts" / "four_devices.py", environment, args=(str(part),)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert all(line.endswith("same splits True, raw scores within 1e-5: True") for line in lines)
    return [line.split(":")[0] for line in lines]
