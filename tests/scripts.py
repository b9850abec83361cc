"""Runs the project's scripts the way a user does: a fresh Python process from the shell."""
import os
import subprocess
import sys

from conftest import ROOT


def run_script(name, *args, check=True):
    """Runs `python <ROOT>/<name> args...`; returns the CompletedProcess (text output)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    process = subprocess.run([sys.executable, str(ROOT / name), *map(str, args)],
                             capture_output=True, text=True, env=env, timeout=600)
    if check and process.returncode != 0:
        raise AssertionError(f"{name} failed ({process.returncode}):\n{process.stderr[-3000:]}")
    return process
