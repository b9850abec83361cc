"""TensorFlow's thread pools for micro-batches computed side by side (`parallel_micro_batches`).

By default every op shards its work over all cores (the intra-op pool) and the op's thread
sleeps until the shards are done; on a 2-core VM each such hand-over is an interrupt to the
other core, and oneDNN's bfloat16 matmuls scale poorly over two threads (a [1696, 384] x
[384, 384] product: 0.50 ms on one thread of TensorFlow 2.21, 0.38 ms on two). Split into
`parts` independent micro-batches, a step has `parts` ops ready at any time: one inter-op
thread each, and the cores divided among them, runs them side by side
(benchmarks/history/parallel_micro_batches.md).
"""
import os

import tensorflow as tf
from absl import logging

# Set by the user, these keep their values.
INTRA_OP, INTER_OP = "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"


def cores():
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def split_over(parts):
    """Gives TensorFlow `parts` inter-op threads and cores // `parts` (at least 1) intra-op
    threads, before its runtime starts; a no-op for one part.

    Returns:
      (intra-op, inter-op) threads now set, or None where nothing was set.
    """
    if parts == 1:
        return None
    intra, inter = max(1, cores() // parts), parts
    try:
        if INTRA_OP in os.environ:  # TensorFlow reads it when its runtime starts
            intra = int(os.environ[INTRA_OP])
        else:
            tf.config.threading.set_intra_op_parallelism_threads(intra)
        if INTER_OP in os.environ:
            inter = int(os.environ[INTER_OP])
        else:
            tf.config.threading.set_inter_op_parallelism_threads(inter)
    except RuntimeError:  # TensorFlow ran an op already: its pools are made
        logging.warning("%d parallel micro-batches, but TensorFlow's thread pools were made "
                        "before they could be set to %d intra-op and %d inter-op threads: "
                        "call modeling.runtime.cpu_threads.split_over first", parts, intra,
                        inter)
        return None
    logging.info("%d micro-batches side by side: TensorFlow's inter-op threads %d, intra-op "
                 "threads %d", parts, inter, intra)
    return intra, inter
