"""modeling/training/distribution.py: the strategy the flags name, who the chief is, and how
it is fed."""
import pathlib
import platform
import subprocess
import sys
import types

import keras
import pytest
import tensorflow as tf
from absl import logging

from modeling.training import distribution
from modeling.training.options import TrainingOptions

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_strategies_by_name():
    assert isinstance(distribution.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
    mirrored = distribution.get_strategy("mirrored")
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == len(tf.config.list_logical_devices("GPU")
                                                or tf.config.list_logical_devices("CPU"))
    with pytest.raises(ValueError, match=r"Unknown distribution strategy 'gpu'; expected one "
                                         r"of \('one_device'"):
        distribution.get_strategy("gpu")
    with pytest.raises(ValueError, match="needs --tpu_name or --master"):
        distribution.get_strategy("tpu")


def _strategy(spec, task_type, task_id=0):
    resolver = types.SimpleNamespace(cluster_spec=lambda: tf.train.ClusterSpec(spec),
                                     task_type=task_type, task_id=task_id)
    return types.SimpleNamespace(cluster_resolver=resolver)


@pytest.mark.parametrize("spec, task_type, task_id, chief", [
    ({"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "chief", 0, True),
    ({"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "worker", 0, False),
    ({"worker": ["b:1", "c:1"]}, "worker", 0, True),
    ({"worker": ["b:1", "c:1"]}, "worker", 1, False),
    ({}, None, 0, True),
])
def test_the_chief_is_the_chief_task_else_worker_0(spec, task_type, task_id, chief):
    assert distribution.is_chief(_strategy(spec, task_type, task_id)) is chief
    assert distribution.is_chief(tf.distribute.get_strategy())  # no cluster: the only process


@pytest.mark.parametrize("flags, lacks", [
    ("fpu avx512f avx512_vnni", True),  # an AVX-512 Xeon without bfloat16
    ("fpu avx512f avx512_bf16", False),  # Cooper Lake, Zen 4/5
    ("fpu avx512f amx_bf16 amx_tile", False),  # Sapphire Rapids
    ("", False),  # no flags listed: cannot tell
])
def test_a_cpu_without_bfloat16_instructions_is_recognised(tmp_path, flags, lacks):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: "
                       f"{flags}\n")
    assert distribution.cpu_lacks_bfloat16(str(cpuinfo)) is lacks
    assert distribution.cpu_lacks_bfloat16(str(tmp_path / "absent")) is False


@pytest.mark.parametrize("precision, lacks, warned", [
    ("mixed_bfloat16", True, True), ("mixed_bfloat16", False, False), ("float32", True, False)])
def test_mixed_bfloat16_on_a_cpu_without_bfloat16_is_warned_of(monkeypatch, tmp_path, precision,
                                                               lacks, warned):
    monkeypatch.setattr(distribution, "cpu_lacks_bfloat16", lambda: lacks)
    warnings = []
    monkeypatch.setattr(logging, "warning", lambda message, *args: warnings.append(
        message % args))
    try:
        TrainingOptions(output_dir=str(tmp_path), precision=precision).strategy()
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert any("--precision=mixed_bfloat16 on a CPU without bfloat16" in w
               for w in warnings) is warned, warnings


# Run in a fresh process: TensorFlow's pin of glibc's malloc policy lasts for the process.
_MALLOC_PROBE = r"""
import ctypes, sys
import tensorflow as tf
from modeling.training import distribution

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)

def mmapped_after_a_free():
    # glibc maps a large block; once one is freed, its dynamic threshold rises above that size
    # and the next block of the size comes from the heap, unless the threshold is pinned.
    libc.free(libc.malloc(1 << 20))
    block = libc.malloc(1 << 20)
    mapped = libc.mallinfo2().hblks
    libc.free(block)
    return libc.mallinfo2().hblks < mapped

strategy = {"one_device": lambda: tf.distribute.OneDeviceStrategy("/cpu:0"),
            "mirrored": lambda: tf.distribute.MirroredStrategy(["/cpu:0"])}[sys.argv[2]]()
dataset = tf.data.Dataset.range(4).batch(2)
if sys.argv[1] == "ours":
    batches = distribution.per_replica_batches(strategy, dataset)
else:
    batches = iter(strategy.experimental_distribute_dataset(dataset))
assert [list(strategy.experimental_local_results(b)[0].numpy()) for b in batches] == [[0, 1], [2, 3]]
print(mmapped_after_a_free())
"""


# TensorFlow 2.21's own iterators pin the threshold (its ApplyPython311MemoryPatch): the fault
# itself, so that the probe is shown to see it. tf-nightly 2.23's no longer do.
TENSORFLOW_PINS = tf.__version__.startswith("2.21.")


@pytest.mark.parametrize("how, strategy, pinned", [
    ("tensorflow", "one_device", TENSORFLOW_PINS),
    ("ours", "one_device", False),
    ("ours", "mirrored", False),
])
def test_feeding_a_strategy_leaves_glibc_mapping_large_blocks_as_usual(how, strategy, pinned):
    """TensorFlow's distributed iterators pin glibc's mmap threshold at 128 KiB (Python 3.11):
    then every large tensor is mmap'd and faulted in afresh at every op, a third of a training
    process's CPU time in the kernel on some machines. `per_replica_batches` avoids or undoes it."""
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc only")
    if pinned and sys.version_info[:2] != (3, 11):
        pytest.skip("TensorFlow pins the threshold under Python 3.11 (its ApplyPython311MemoryPatch)")
    result = subprocess.run([sys.executable, "-c", _MALLOC_PROBE, how, strategy],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == str(pinned)
