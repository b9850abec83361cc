"""Tests for modeling/runtime/cpu_kernels.py: the scripts run oneDNN's kernels on any x86 CPU,
where TensorFlow alone turns them on only with AVX-512 VNNI/BF16 or AMX."""
import ast
import os
import platform
import subprocess
import sys

import pytest

from conftest import ROOT
from modeling.runtime import cpu_kernels
from scripts import script_env

X86 = platform.machine().lower() in cpu_kernels.X86
ONEDNN_ON = "oneDNN custom operations are on"
NOT_SCRIPTS = {"setup.py", "shared_flags.py"}
SCRIPTS = sorted(path.name for path in ROOT.glob("*.py") if path.name not in NOT_SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_prefers_onednn_before_tensorflow_loads(script):
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, on import: the call must come before the
    first import of anything but the runtime's own modules (which import no TensorFlow)."""
    for node in ast.parse((ROOT / script).read_text("utf-8")).body:
        if ast.unparse(node) == "cpu_kernels.prefer_onednn()":
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            assert module in ("modeling.runtime", "__future__"), (script, module)
    pytest.fail(f"{script} never calls cpu_kernels.prefer_onednn()")


@pytest.mark.parametrize("chosen, expected", [(None, X86), ("0", False), ("1", True)])
def test_a_script_runs_onednn_on_x86_unless_the_user_chose(chosen, expected):
    """A real script, as a user starts it, with TensorFlow's own log lines shown
    (TF_CPP_MIN_LOG_LEVEL=0): TensorFlow says at import whether oneDNN is on. absl prints the
    script's help and exits 1 after the script has imported TensorFlow."""
    env = dict(script_env(), TF_CPP_MIN_LOG_LEVEL="0")
    env.pop(cpu_kernels.VARIABLE, None)
    if chosen is not None:
        env[cpu_kernels.VARIABLE] = chosen
    process = subprocess.run([sys.executable, str(ROOT / "query_savedmodel.py"), "--helpshort"],
                             capture_output=True, text=True, env=env, timeout=120)
    assert process.returncode == 1 and "EXPORT_DIR" in process.stderr, process.stderr[-2000:]
    assert (ONEDNN_ON in process.stderr) == expected, process.stderr[-2000:]


def test_prefer_onednn_keeps_the_users_value(monkeypatch):
    monkeypatch.setenv(cpu_kernels.VARIABLE, "0")
    cpu_kernels.prefer_onednn()
    assert os.environ[cpu_kernels.VARIABLE] == "0"
    monkeypatch.delenv(cpu_kernels.VARIABLE)
    cpu_kernels.prefer_onednn()
    assert os.environ.get(cpu_kernels.VARIABLE) == ("1" if X86 else None)
