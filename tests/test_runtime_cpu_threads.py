"""Tests for modeling/runtime/cpu_threads.py: the thread pools of parallel micro-batches are set
before TensorFlow's first op, a user's own setting is kept, and a call too late says so."""
import subprocess
import sys

from scripts import script_env

SPLIT = """
import os, sys, tensorflow as tf
from modeling.runtime import cpu_threads
if sys.argv[1] == "late":
    tf.constant(1.0) + 1.0  # TensorFlow's runtime starts: its pools are made
print("set", cpu_threads.split_over(int(sys.argv[2])))
print("threads", tf.config.threading.get_intra_op_parallelism_threads(),
      tf.config.threading.get_inter_op_parallelism_threads(), cpu_threads.cores())
"""


def run(when, parts, **env):
    process = subprocess.run([sys.executable, "-c", SPLIT, when, str(parts)],
                             capture_output=True, text=True, env=script_env(**env), timeout=120)
    assert process.returncode == 0, process.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in process.stdout.splitlines())
    intra, inter, cores = (int(value) for value in lines["threads"].split())
    return lines["set"], intra, inter, cores, process.stderr


def test_two_parts_get_two_inter_op_threads_of_the_cores_divided():
    result, intra, inter, cores, _ = run("first", 2)
    assert (intra, inter) == (max(1, cores // 2), 2)
    assert result == f"({intra}, 2)"


def test_one_part_leaves_tensorflow_s_defaults():
    result, intra, inter, _, _ = run("first", 1)
    assert (result, intra, inter) == ("None", 0, 0)


def test_a_user_s_own_thread_setting_is_kept():
    result, intra, inter, _, _ = run("first", 2, TF_NUM_INTRAOP_THREADS="3")
    assert (result, intra, inter) == ("(3, 2)", 0, 2)  # TensorFlow reads the variable itself


def test_too_late_a_call_warns_and_sets_nothing():
    result, intra, inter, _, stderr = run("late", 2)
    assert (result, intra, inter) == ("None", 0, 0)
    assert "TensorFlow's thread pools were made before they could be set" in stderr
