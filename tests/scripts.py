"""Runs the project's scripts the way a user does: a fresh Python process from the shell."""
import os
import subprocess
import sys

from conftest import ROOT


def script_command(name, *args):
    return [sys.executable, str(ROOT / name), *map(str, args)]


def script_env(**extra):
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **extra)


def dead_pid():
    """The id of a process that has exited: what a killed run's temporary names carry."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def run_script(name, *args, check=True, **env):
    """Runs `python <ROOT>/<name> args...`; returns the CompletedProcess (text output)."""
    process = subprocess.run(script_command(name, *args), capture_output=True, text=True,
                             env=script_env(**env), timeout=600)
    if check and process.returncode != 0:
        raise AssertionError(f"{name} failed ({process.returncode}):\n{process.stderr[-3000:]}")
    return process


_ON_LOGICAL_CPUS = """
import runpy, sys
import tensorflow as tf
devices = int(sys.argv[1])
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
from modeling import heads
heads.HEAD_DROPOUT_PROB = 0.0  # replicas draw their own dropout masks
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_on_logical_cpus(name, devices, *args):
    """Runs a script with the CPU split into `devices` logical devices (for MirroredStrategy)
    and the heads' dropout off (`heads.HEAD_DROPOUT_PROB`), so runs on 1 and N devices
    compare."""
    process = subprocess.run(
        [sys.executable, "-c", _ON_LOGICAL_CPUS, str(devices), str(ROOT / name),
         *map(str, args)],
        capture_output=True, text=True, env=script_env(PYTHONPATH=str(ROOT)), timeout=600)
    if process.returncode != 0:
        raise AssertionError(f"{name} failed ({process.returncode}):\n{process.stderr[-3000:]}")
    return process
