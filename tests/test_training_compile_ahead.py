"""The optimizer's update passes compiled beside a training loop's first call, traced or loaded:
each program once (the loop's calls find them), and a failure costs nothing but a warning."""
import json
import re
import subprocess
import sys

from conftest import ROOT
from test_training_loop_cache import _pretrainer, _run

from modeling.training import compile_ahead, loop_cache

# One loop of a run (tracing its loop, or loading the one an earlier run kept in the same
# directory), the compilation ahead waited for before the loop runs.
_TRAIN_ONCE = """
import json, sys
from absl import logging
sys.path.insert(0, sys.argv[1])
from test_training_loop_cache import _pretrainer, _run
from modeling import BertConfig
from modeling.training import compile_ahead
start = compile_ahead.start

def start_and_wait(*args):
    start(*args).join()
    print("THE LOOP RUNS", file=sys.stderr, flush=True)

compile_ahead.start = start_and_wait
logging.set_verbosity("info")
config = BertConfig(**json.loads(sys.argv[2]))
_run(_pretrainer(config, sys.argv[3]), config, loops=1)
"""


def _train_once(tiny_config, cache):
    process = subprocess.run(
        [sys.executable, "-c", _TRAIN_ONCE, str(ROOT / "tests"),
         json.dumps(tiny_config.to_dict()), str(cache)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "0",
             "TF_CPP_VMODULE": "device_compiler=2", "PYTHONPATH": str(ROOT)})
    assert process.returncode == 0, process.stderr[-3000:]
    return process.stderr


def test_the_update_programs_are_compiled_ahead_and_the_loop_finds_them(tiny_config, tmp_path):
    """Counted in TensorFlow's own log of XLA's compilations, in a run that traces the loop and
    in a later one that loads it: the thread compiles each update program, and the loop, run
    after it, compiles none (under another key than the loop's call, it would compile each
    again)."""
    compiled = re.compile(r"Instantly compiling for signature: \S*_assign_new_values")
    for run in ("traced", "loaded"):
        ahead, _, loop = _train_once(tiny_config, tmp_path).partition("THE LOOP RUNS")
        assert (loop_cache.LOADED in ahead) == (run == "loaded"), ahead[-3000:]
        reported = re.findall(r"Compiled the optimizer's (\d+) update passes", ahead)
        assert len(reported) == 1 and int(reported[0]) >= 3, ahead[-3000:]
        assert len(compiled.findall(ahead)) == int(reported[0])
        assert compiled.findall(loop) == [] and "forward_fn" in loop  # the loop compiled its own


def test_a_failure_to_compile_ahead_is_a_warning_and_the_step_compiles(tiny_config, tmp_path,
                                                                        caplog, monkeypatch):
    def failing(program, function_name):
        raise ValueError("no such node")
    traced = _run(_pretrainer(tiny_config, None), tiny_config, loops=1)
    monkeypatch.setattr(compile_ahead, "_caller", failing)
    with caplog.at_level("INFO", logger="absl"):
        kept = _run(_pretrainer(tiny_config, tmp_path), tiny_config, loops=1)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "no such node" in warnings[0], warnings
    assert kept[0] == traced[0]


def test_programs_whose_zeros_would_pass_the_limit_are_left_to_the_step(tiny_config,
                                                                        monkeypatch):
    pretrainer = _pretrainer(tiny_config, None)
    _run(pretrainer, tiny_config, loops=1)
    calls = pretrainer.optimizer.compiled_updates
    programs = compile_ahead.distinct_programs(calls)
    assert len(calls) == len(pretrainer.trained_variables) > len(programs) >= 3
    largest = max(compile_ahead._input_bytes(*call) for call in calls)
    monkeypatch.setattr(compile_ahead, "MAX_BYTES", largest - 1)
    assert len(compile_ahead.distinct_programs(calls)) == len(programs) - 1
