"""Tests for modeling/runtime/cpu_kernels.py: the scripts run oneDNN's kernels on any x86 CPU,
where TensorFlow alone turns them on only with AVX-512 VNNI/BF16 or AMX, and XLA's own loops
for the compiled training passes' reductions, not YNNPACK's."""
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
def test_every_script_chooses_the_kernels_before_tensorflow_loads(script):
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, on import: the call must come before the
    first import of anything but the runtime's own modules (which import no TensorFlow)."""
    for node in ast.parse((ROOT / script).read_text("utf-8")).body:
        if ast.unparse(node) == "cpu_kernels.choose()":
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            assert module in ("modeling.runtime", "__future__"), (script, module)
    pytest.fail(f"{script} never calls cpu_kernels.choose()")


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


def test_choose_keeps_the_users_values(monkeypatch):
    monkeypatch.setenv(cpu_kernels.VARIABLE, "0")
    monkeypatch.setenv(cpu_kernels.XLA_VARIABLE, f"{cpu_kernels.YNN_FUSIONS_FLAG}=reduce")
    cpu_kernels.choose()
    assert os.environ[cpu_kernels.VARIABLE] == "0"
    assert os.environ[cpu_kernels.XLA_VARIABLE] == f"{cpu_kernels.YNN_FUSIONS_FLAG}=reduce"
    monkeypatch.delenv(cpu_kernels.VARIABLE)
    users = "--xla_dump_to=/tmp/hlo"
    monkeypatch.setenv(cpu_kernels.XLA_VARIABLE, users)
    cpu_kernels.choose()
    assert os.environ.get(cpu_kernels.VARIABLE) == ("1" if X86 else None)
    assert os.environ[cpu_kernels.XLA_VARIABLE] == (
        f"{users} {cpu_kernels.YNN_FUSIONS_FLAG}=" if X86 else users)


# LayerNorm's training passes (forward and backward) at a row count of token rows, as a script
# runs them: after `choose()`, XLA dumping each compiled program after its optimizations.
_LAYER_NORM_PASSES = """
from modeling.runtime import cpu_kernels
cpu_kernels.choose()
import tensorflow as tf
from modeling.encoder import fused
x, residual, upstream = (tf.random.normal([300, 384], seed=s, dtype=tf.bfloat16) for s in (1, 2, 3))
bias, gamma, beta = tf.zeros([384], tf.bfloat16), tf.ones([384]), tf.zeros([384])
keep = tf.random.uniform([300, 384], seed=4) < 0.9
with tf.GradientTape() as tape:
    tape.watch([x, residual])
    output = fused.dropout_add_layer_norm(x, bias, residual, keep, 1 / 0.9, gamma, beta, 1e-12)
gradients = tape.gradient(output, [x, residual], output_gradients=upstream)
assert all(bool(tf.reduce_all(tf.math.is_finite(tf.cast(g, tf.float32)))) for g in gradients)
"""


@pytest.mark.skipif(not X86, reason="choose() leaves XLA's flags to XLA off x86")
def test_xla_knows_the_flag_and_keeps_the_training_passes_reductions(tmp_path):
    """The flag is experimental: an XLA that no longer knows it stops the process at the first
    compilation, and this names it. With it, no reduction of the passes goes to YNNPACK."""
    dump = f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text"
    env = script_env(PYTHONPATH=str(ROOT), **{cpu_kernels.XLA_VARIABLE: dump})
    # A compilation cache that a test of this process named (runtime.compilation_cache) would
    # load the programs instead of compiling, and so dumping, them.
    env.pop("TF_XLA_FLAGS", None)
    process = subprocess.run([sys.executable, "-c", _LAYER_NORM_PASSES], capture_output=True,
                             text=True, env=env, timeout=300)
    assert process.returncode == 0, (
        f"XLA_FLAGS {env[cpu_kernels.XLA_VARIABLE]} {cpu_kernels.YNN_FUSIONS_FLAG}= failed; "
        f"renamed or removed in this XLA? {process.stderr[-2000:]}")
    programs = sorted(tmp_path.glob("*after_optimizations.txt"))
    assert len(programs) >= 2, sorted(path.name for path in tmp_path.iterdir())
    assert not [path.name for path in programs if "__ynn_fusion" in path.read_text()]
