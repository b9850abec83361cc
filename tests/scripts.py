"""Runs the project's scripts the way a user does: a Python process of their own with the
flags of the shell.

`run_script` and `run_on_logical_cpus` fork that process from a Python that has already
imported TensorFlow and Keras (tests/preloaded_python.py, one a test worker), which saves each
run the ~5 s of CPU of that import; their environment is the user's, but for what TensorFlow
reads at import. What happens before and during that import (the scripts' start-up noise
filter, the import's lines) is tested on fresh processes: `script_command` with subprocess, as
test_runtime_quiet.py, the README's commands and every test that kills a run do.
"""
import json
import locale
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile

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


# What a command's environment may set otherwise than the preloaded Python's: read after
# TensorFlow's import (the cluster, temporary files, XLA's flags), or set by pytest for each test.
_READ_AFTER_IMPORT = {"TF_CONFIG", "TMPDIR", "TF_XLA_FLAGS", "XLA_FLAGS", "PYTHONPATH",
                      "PYTEST_CURRENT_TEST"}


class _PreloadedPython:
    """tests/preloaded_python.py, started on first use with the `script_env()` of then."""

    def __init__(self):
        self.process = None
        self.before = self.after = None  # its environment before and after the import
        self.received = b""

    def can_run(self, env):
        """Whether a fresh process with `env` would import TensorFlow as the preloaded one did:
        the same values, or the ones the import itself set (TF2_BEHAVIOR, h5py's plugin
        path: a test worker that imported TensorFlow passes them on), but for what is read
        after it."""
        if self.process is None:
            self.before = script_env()
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "preloaded_python.py")], env=self.before,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self.after = self._reply(None)["env"]
        keys = (set(env) | set(self.before)) - _READ_AFTER_IMPORT
        return all(env.get(key) in (self.before.get(key), self.after.get(key)) for key in keys)

    def run(self, command, env, timeout):
        """`subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)`
        for a command `[sys.executable, ...]`, forked from the preloaded Python."""
        with tempfile.TemporaryDirectory() as directory:
            outputs = [os.path.join(directory, name) for name in ("stdout", "stderr")]
            self.process.stdin.write(json.dumps({
                "argv": command[1:], "env": env, "cwd": os.getcwd(), "stdout": outputs[0],
                "stderr": outputs[1]}).encode() + b"\n")
            self.process.stdin.flush()
            pid = self._reply(None)["pid"]
            try:
                status = self._reply(timeout)["status"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._reply(None)
                raise subprocess.TimeoutExpired(command, timeout)
            encoding = locale.getpreferredencoding(False)
            stdout, stderr = (open(path, encoding=encoding).read() for path in outputs)
        return subprocess.CompletedProcess(command, os.waitstatus_to_exitcode(status), stdout,
                                           stderr)

    def _reply(self, timeout):
        """The next reply, read from the pipe itself (a buffered reader could hold it where
        `select` does not see it)."""
        while b"\n" not in self.received:
            if not select.select([self.process.stdout], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired("preloaded_python.py", timeout)
            data = os.read(self.process.stdout.fileno(), 65536)
            if not data:
                raise RuntimeError(f"tests/preloaded_python.py ended ({self.process.wait()})")
            self.received += data
        line, self.received = self.received.split(b"\n", 1)
        return json.loads(line)


_PRELOADED = _PreloadedPython()


def _run(command, env):
    """`subprocess.run` of `command` with `env`, captured as text, forked from the preloaded
    Python where `env` allows."""
    if _PRELOADED.can_run(env):
        return _PRELOADED.run(command, env, timeout=600)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def run_script(name, *args, check=True, **env):
    """Runs `python <ROOT>/<name> args...`; returns the CompletedProcess (text output)."""
    process = _run(script_command(name, *args), script_env(**env))
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
    process = _run(logical_cpus_command(name, devices, *args), script_env(PYTHONPATH=str(ROOT)))
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
