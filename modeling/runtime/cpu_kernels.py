"""oneDNN's kernels on every x86 CPU, unless the user chose otherwise.

TensorFlow 2.21 runs its oneDNN kernels by default only on x86 CPUs with AVX-512 VNNI, AVX-512
BF16 or AMX. On the others (AVX2 alone: AMD's Zen 2 and Zen 3; Intel's Skylake-SP, whose AVX-512
has no VNNI) it runs Eigen's, whose batched matmuls are slow at attention's shapes: on a 2-core
Zen 3, the [53, 32] x [32, 53] products of a MiniLM step ran at 13-28 GFLOP/s against oneDNN's
69-85, and fine-tuning MRPC went 1.19x faster with oneDNN on
(benchmarks/history/finetuning_against_peer.md). Its allocator also counts the peak memory that
`tf.config.experimental.get_memory_info` reports.

TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` once, while it is imported, so `prefer_onednn()` is
called by every script that runs a model before anything imports TensorFlow. A value the user
set, `TF_ENABLE_ONEDNN_OPTS=0` included, is kept. Other architectures keep TensorFlow's own
choice (oneDNN on ARM goes through the Arm Compute Library, not measured here). Importing this
module imports no TensorFlow.
"""
import os
import platform

VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
X86 = ("x86_64", "amd64", "i386", "i686")


def prefer_onednn():
    """Sets TF_ENABLE_ONEDNN_OPTS=1 where it is unset, on x86; a no-op elsewhere."""
    if platform.machine().lower() in X86:
        os.environ.setdefault(VARIABLE, "1")
