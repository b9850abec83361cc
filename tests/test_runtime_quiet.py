"""Tests for modeling/runtime/quiet.py: TensorFlow's start-up noise is dropped, nothing else is."""
import logging
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from modeling.checkpoints import name_based
from modeling.runtime import quiet

# Lines as TensorFlow 2.21 prints them on a machine without a GPU, TF_CPP_MIN_LOG_LEVEL=2.
STARTUP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795476152.847596    1005 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors from "
    "different computation orders. To turn them off, set the environment variable "
    "`TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795476152.847945    1005 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795476049.834545   32736 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI FMA, in other operations, "
    "rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795479042.732626   20317 util.cc:131] oneDNN supports DT_INT64 only on "
    "platforms with AVX-512. Falling back to the default Eigen-based implementation if present.",
    "E0000 00:00:1795476155.745895    1005 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
]
# What every program loaded from XLA's cache prints (--xla_cache_dir), features abridged.
_FEATURES = ("Compile machine features: [+64bit,+avx512f,+prefer-no-scatter,+prefer-no-gather] vs "
             "host machine features: [64bit,avx512f]. This could lead to execution errors such "
             "as SIGILL.")
XLA_CACHE = [
    "E0000 00:00:1795795700.992816   15469 text_format.cc:378] Error parsing text-format "
    "tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 6",
    *(f"E0000 00:00:1795795700.994281   15469 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. "
      f"Target machine feature +prefer-no-{kind} is not  supported on the host machine. Machine "
      f"type used for XLA:CPU compilation doesn't match the machine type for execution. "
      f"{_FEATURES}" for kind in ("scatter", "gather")),
]
REAL_ERROR = ("E0000 00:00:1795476155.745895    1005 kernel.cc:52] something real broke: "
              "INTERNAL: out of memory")


def _lines(data):
    return data.decode().splitlines(keepends=True)


def test_the_filter_drops_startup_lines_and_keeps_everything_else():
    ours = "I1123 23:22:42.460150 139711787817856 build_vocab.py:48] Wrote 341 tokens\n"
    stream = "".join(line + "\n" for line in STARTUP[:3]) + ours + REAL_ERROR + "\n" + \
        "".join(line + "\n" for line in STARTUP[3:]) + "Traceback (most recent call last):\n"
    line_filter = quiet.LineFilter()
    # Fed in pieces that cut lines anywhere, as reads from a pipe do.
    data = stream.encode()
    out = b"".join(line_filter.feed(data[i:i + 7]) for i in range(0, len(data), 7))
    out += line_filter.flush()
    assert _lines(out) == [ours, REAL_ERROR + "\n", "Traceback (most recent call last):\n"]


def test_the_xla_caches_false_alarms_are_dropped_a_missing_instruction_set_kept():
    missing = XLA_CACHE[1].replace("+prefer-no-scatter is", "+avx512bf16 is")
    stream = "".join(line + "\n" for line in XLA_CACHE + [missing])
    assert quiet.LineFilter().feed(stream.encode()) == (missing + "\n").encode()


def test_cuinit_failing_is_shown_where_a_driver_was_found():
    cuinit = STARTUP[-1] + "\n"
    assert quiet.LineFilter(driver_installed=True).feed(cuinit.encode()) == cuinit.encode()


def test_cuinit_failing_and_its_trace_are_dropped_without_a_driver():
    # As tf-nightly 2.23 prints it: no "Could not find cuda drivers" before, a trace after.
    trace = STARTUP[-1].replace(".cc:52", ".cc:57") + "\n=== Source Location Trace: === \n" \
        "external/xla/xla/stream_executor/cuda/cuda_status.cc:50\n\n"
    ours = "our line\n\n"
    assert quiet.LineFilter(driver_installed=False).feed((trace + ours).encode()) == \
        ours.encode()
    assert quiet.LineFilter(driver_installed=True).feed(trace.encode()) == trace.encode()


def test_partial_lines_and_carriage_returns_pass_untouched():
    line_filter = quiet.LineFilter()
    assert line_filter.feed(b"progress 1\rprogress 2\r") == b"progress 1\rprogress 2\r"
    assert line_filter.feed(b"Password: ") == b""
    assert line_filter.flush() == b"Password: "
    assert line_filter.feed("naïve ünïcode\n".encode()) == "naïve ünïcode\n".encode()


def test_library_info_records_are_dropped_their_warnings_and_ours_kept(tmp_path):
    library_filter = quiet.LibraryInfoFilter([str(tmp_path / "tensorflow")])

    def keeps(path, level):
        return library_filter.filter(logging.LogRecord("absl", level, path, 1, "m", (), None))

    assert not keeps(str(tmp_path / "tensorflow/python/saver.py"), logging.INFO)
    assert keeps(str(tmp_path / "tensorflow/python/saver.py"), logging.WARNING)
    assert keeps(str(tmp_path / "tensorflow_text.py"), logging.INFO)
    assert keeps(str(ROOT / "modeling/training/trainer.py"), logging.INFO)


def test_only_an_explicit_low_log_level_asks_for_tensorflow_output():
    for value, asked in (("0", True), ("1", True), ("2", False), ("3", False), ("", False)):
        assert quiet.asked_for_tensorflow_output({"TF_CPP_MIN_LOG_LEVEL": value}) == asked
    assert not quiet.asked_for_tensorflow_output({})


_HARNESS = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from modeling.runtime import quiet
quiet.install()
if sys.argv[4] == "tensorflow":
    import tensorflow as tf
    from absl import logging
    from tensorflow.python.platform import tf_logging
    print(float(tf.constant(1.0) + 1.0))  # a device starts: cuInit where there is no GPU
    print("our line on stderr", file=sys.stderr, flush=True)
    logging.set_verbosity(logging.INFO)
    logging.info("our info")
    tf_logging.info("TensorFlow's info through its logger")
    # As a TensorFlow module logs through absl (the SavedModel writer's renamed inputs, say).
    in_tensorflow = os.path.join(tf.__path__[0], "python", "saved_model", "writer.py")
    exec(compile("from absl import logging\nlogging.info('TensorFlow info through absl')\n"
                 "logging.warning('TensorFlow warning through absl')", in_tensorflow, "exec"))
os.write(2, sys.argv[2].encode() + b"\n")  # an unknown C++ error, written as C++ writes
os.write(2, sys.argv[3].encode() + b"\n")  # a known start-up line
if sys.argv[4] == "crash":
    os.write(2, b"last words before SIGKILL\n")
    os.kill(os.getpid(), 9)
"""


def _user_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return dict(env, **extra)


def _harness(mode, **env):
    return subprocess.run(
        [sys.executable, "-c", _HARNESS, str(ROOT), REAL_ERROR, STARTUP[1], mode],
        capture_output=True, env=_user_env(**env), timeout=300)


def test_a_tensorflow_process_shows_our_lines_and_real_errors_only():
    process = _harness("tensorflow")
    assert process.returncode == 0, process.stderr.decode()
    assert process.stdout.decode() == "2.0\n"
    lines = _lines(process.stderr)
    assert lines[0] == "our line on stderr\n" and lines[-1] == REAL_ERROR + "\n"
    assert "our info" in lines[1] and "TensorFlow warning through absl" in lines[2]
    assert len(lines) == 4, lines


def test_lines_written_before_a_crash_still_arrive():
    process = _harness("crash")
    assert process.returncode == -9
    assert _lines(process.stderr) == [REAL_ERROR + "\n", "last words before SIGKILL\n"]


def test_a_low_log_level_leaves_stderr_untouched():
    process = _harness("plain", TF_CPP_MIN_LOG_LEVEL="0")
    assert process.returncode == 0, process.stderr.decode()
    assert _lines(process.stderr) == [REAL_ERROR + "\n", STARTUP[1] + "\n"]


@pytest.mark.parametrize("script", ["convert_checkpoint.py"])
def test_a_script_prints_only_its_own_lines(script, tmp_path, tiny_config):
    from modeling import BertModel
    name_based.save_original(BertModel(tiny_config), str(tmp_path / "bert_model.ckpt"))
    (tmp_path / "bert_config.json").write_text(tiny_config.to_json_string())
    process = subprocess.run(
        [sys.executable, str(ROOT / script), f"--bert_config_file={tmp_path / 'bert_config.json'}",
         f"--input={tmp_path / 'bert_model.ckpt'}", f"--output={tmp_path / 'bert.keras'}"],
        capture_output=True, text=True, env=_user_env(), timeout=300)
    assert process.returncode == 0, process.stderr
    lines = process.stderr.splitlines()
    assert lines and all(f" {script}:" in line for line in lines), lines
