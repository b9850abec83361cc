"""The CPU kernels the scripts run, where the measured faster one is not TensorFlow's default.

oneDNN's kernels on every x86 CPU. TensorFlow 2.21 runs them by default only on x86 CPUs with
AVX-512 VNNI, AVX-512 BF16 or AMX. On the others (AVX2 alone: AMD's Zen 2 and Zen 3; Intel's
Skylake-SP, whose AVX-512 has no VNNI) it runs Eigen's, whose batched matmuls are slow at
attention's shapes: on a 2-core Zen 3, the [53, 32] x [32, 53] products of a MiniLM step ran at
13-28 GFLOP/s against oneDNN's 69-85, and fine-tuning MRPC went 1.19x faster with oneDNN on
(benchmarks/history/finetuning_against_peer.md). Its allocator also counts the peak memory that
`tf.config.experimental.get_memory_info` reports. TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` once,
while it is imported.

XLA's own loops for the reductions of the compiled training passes (`encoder/fused.py`), not
YNNPACK's. XLA's CPU backend hands a reduction to YNNPACK as a call of its own, whose inputs are
first written out whole. tf-nightly 2.23 hands over every reduction: LayerNorm's backward pass
took 1.2-1.7 ms at [512, 384] against 0.85-0.95 with the flag below, a MiniLM step's ops 338
against 290 ms of CPU time, and CoNLL-2003 trained 1.12x faster with the flag (TensorFlow 2.21,
which hands over fewer: a tie; benchmarks/history/parallel_micro_batches.md). XLA reads
`XLA_FLAGS` at its first compilation; an XLA that does not know a flag there stops the process,
and tests/test_runtime_cpu_kernels.py checks that the installed one knows it.

`choose()` is called by every script that runs a model before anything imports TensorFlow. A
value the user set (`TF_ENABLE_ONEDNN_OPTS=0`, or the YNNPACK flag in `XLA_FLAGS`) is kept. Other
architectures keep TensorFlow's own choices (neither is measured there; oneDNN on ARM goes
through the Arm Compute Library). Importing this module imports no TensorFlow.
"""
import os
import platform

VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
XLA_VARIABLE = "XLA_FLAGS"
# Which fusions XLA's CPU backend hands to YNNPACK; empty: none.
YNN_FUSIONS_FLAG = "--xla_cpu_experimental_ynn_fusion_type"
X86 = ("x86_64", "amd64", "i386", "i686")


def choose():
    """On x86: TF_ENABLE_ONEDNN_OPTS=1 where it is unset, and no YNNPACK fusions in XLA_FLAGS
    where they name none. A no-op elsewhere."""
    if platform.machine().lower() not in X86:
        return
    os.environ.setdefault(VARIABLE, "1")
    flags = os.environ.get(XLA_VARIABLE, "")
    if YNN_FUSIONS_FLAG not in flags:
        os.environ[XLA_VARIABLE] = f"{flags} {YNN_FUSIONS_FLAG}=".strip()
