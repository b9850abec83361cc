"""Runs the project's scripts the way a user does: a fresh Python process from the shell."""
import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import DATA, REFS, ROOT


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


def logical_cpus_command(name, devices, *args):
    """The command running a script with the CPU split into `devices` logical devices (for
    MirroredStrategy) and the heads' dropout off (`heads.HEAD_DROPOUT_PROB`), so that runs on
    1 and N devices compare."""
    return [sys.executable, "-c", _ON_LOGICAL_CPUS, str(devices), str(ROOT / name),
            *map(str, args)]


def run_on_logical_cpus(name, devices, *args):
    """Runs `logical_cpus_command`; returns the CompletedProcess (text output)."""
    process = subprocess.run(logical_cpus_command(name, devices, *args), capture_output=True,
                             text=True, env=script_env(PYTHONPATH=str(ROOT)), timeout=600)
    if process.returncode != 0:
        raise AssertionError(f"{name} failed ({process.returncode}):\n{process.stderr[-3000:]}")
    return process


def free_ports(count):
    """`count` localhost ports free a moment ago, for a cluster's workers."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_workers(commands, temp_dir):
    """Runs each command as a worker of one cluster on localhost (`TF_CONFIG`), with its
    temporary files in `temp_dir`; returns each one's (exit status, stderr)."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(len(commands))]}
    workers = [subprocess.Popen(
        command, env=script_env(PYTHONPATH=str(ROOT), TMPDIR=str(temp_dir), TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for index, command in enumerate(commands)]
    errors = [worker.communicate(timeout=600)[1] for worker in workers]
    return [(worker.returncode, stderr) for worker, stderr in zip(workers, errors)]


def wikipedia_text(directory, extract_file):
    """`extract_file` of ../shared/data/enwiki_2015_extract (e.g. "AA/wiki_01") converted by
    wikiextractor_to_text.py into `directory` (as wiki_01.txt), as the scripts read it; the test skips, saying
    why, when ../shared is absent.

    Returns:
      The converted file's text: one sentence a line, a blank line between articles.
    """
    for path in (DATA / "enwiki_2015_extract", REFS):
        if not path.exists():
            pytest.skip(f"{path} is absent: the real data lives in ../shared beside the project")
    output = directory / f"{os.path.basename(extract_file)}.txt"
    run_script("wikiextractor_to_text.py",
               f"--input_file={DATA / 'enwiki_2015_extract' / extract_file}",
               f"--output_file={output}")
    return output.read_text(encoding="utf-8")
