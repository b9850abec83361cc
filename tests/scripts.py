"""Runs the project's scripts the way a user does: a fresh Python process from the shell."""
import os
import subprocess
import sys

from conftest import ROOT


def script_command(name, *args):
    return [sys.executable, str(ROOT / name), *map(str, args)]


def script_env(**extra):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **extra)


def run_script(name, *args, check=True, **env):
    """Runs `python <ROOT>/<name> args...`; returns the CompletedProcess (text output)."""
    process = subprocess.run(script_command(name, *args), capture_output=True, text=True,
                             env=script_env(**env), timeout=600)
    if check and process.returncode != 0:
        raise AssertionError(f"{name} failed ({process.returncode}):\n{process.stderr[-3000:]}")
    return process
