"""The scripts' runs forked from the preloaded Python (tests/scripts.py) are what fresh Python
processes are: argv, sys.path, __main__, environment, working directory, temporary folder,
output and exit status."""
import json
import signal
import subprocess
import sys

import pytest

import scripts

PROBE = r"""
import json, os, sys, tempfile
import __main__
print(json.dumps({
    "argv": sys.argv, "path": sys.path[:2], "name": __name__,
    "file": __main__.__dict__.get("__file__"), "cwd": os.getcwd(), "tmp": tempfile.gettempdir(),
    "cluster": os.environ.get("TF_CONFIG"),
    "stdin": sys.stdin.read(), "tensorflow": "tensorflow" in sys.modules}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def _both(command, env):
    """The command run fresh and forked from the preloaded Python."""
    fresh = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60,
                           stdin=subprocess.DEVNULL)
    assert scripts._PRELOADED.can_run(env)
    return fresh, scripts._PRELOADED.run(command, env, timeout=60)


@pytest.mark.parametrize("status", [0, 3])
def test_a_script_and_a_command_run_as_in_a_fresh_process(tmp_path, monkeypatch, status):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tmp").mkdir()
    env = scripts.script_env(TMPDIR=str(tmp_path / "tmp"), TF_CONFIG="{}",
                             PYTHONPATH=str(tmp_path / "lib"))
    for command in ([sys.executable, str(script), str(status), "--flag=a b"],
                    [sys.executable, "-c", PROBE, str(status), "x"]):
        fresh, forked = _both(command, env)
        assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr) == (
            status, "to stderr\n")
        fresh_values, forked_values = json.loads(fresh.stdout), json.loads(forked.stdout)
        # The one difference: the preloaded Python has imported TensorFlow.
        assert (fresh_values.pop("tensorflow"), forked_values.pop("tensorflow")) == (False, True)
        assert forked_values == fresh_values
        assert fresh_values["path"][1] == str(tmp_path / "lib")


def test_an_uncaught_error_and_a_signal_end_it_as_they_end_python():
    for code, ending in (("raise ValueError('bad input')", "ValueError: bad input\n"),
                         (f"import os; os.kill(os.getpid(), {int(signal.SIGKILL)})", "")):
        fresh, forked = _both([sys.executable, "-c", code], scripts.script_env())
        assert forked.returncode == fresh.returncode != 0
        assert forked.stderr.endswith(ending) and fresh.stderr.endswith(ending)


def test_an_environment_tensorflow_reads_at_import_gets_a_fresh_process():
    assert scripts._PRELOADED.can_run(scripts.script_env(TF_CONFIG="{}"))
    assert not scripts._PRELOADED.can_run(dict(scripts.script_env(), TF_CPP_MIN_LOG_LEVEL="0"))
    assert not scripts._PRELOADED.can_run(scripts.script_env(TF_ENABLE_ONEDNN_OPTS="0"))


def test_a_run_past_its_timeout_is_killed():
    with pytest.raises(subprocess.TimeoutExpired):
        scripts._PRELOADED.run([sys.executable, "-c", "import time; time.sleep(60)"],
                               scripts.script_env(), timeout=1)
    assert scripts._PRELOADED.run([sys.executable, "-c", "print(1)"], scripts.script_env(),
                                  timeout=60).stdout == "1\n"
