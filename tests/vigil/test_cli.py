"""The `vigil` console script: help lists every command, bad configuration stops start-up."""

import os
import subprocess
import sys

import pytest

from vigil.cli.main import COMMANDS


def run_vigil(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vigil.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def test_help_lists_every_command():
    result = run_vigil("--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert command in result.stdout


def test_every_command_handler_exists():
    import importlib

    for command, target in COMMANDS.items():
        module_name, func_name = target.split(":")
        module = importlib.import_module(module_name)
        assert callable(getattr(module, func_name)), command


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("VIGIL_DATABASE_URL", "not a url::"),
        ("VIGIL_SAMPLE_RATE", "-0.5"),
        ("VIGIL_DEVICE", "tpu"),
    ],
)
def test_bad_configuration_names_the_variable(variable, value, tmp_path):
    result = run_vigil("db", "upgrade", env={variable: value, "VIGIL_JOURNAL_DIR": str(tmp_path)})
    assert result.returncode == 2
    assert variable in result.stderr
