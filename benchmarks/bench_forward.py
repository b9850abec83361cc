"""Forward-pass speed of `BertModel` at BERT-Base shapes on the CPU (issue 2).

Prints, for float32, float32 + XLA, mixed bfloat16 and mixed bfloat16 + XLA, at each batch size:
sequences/s, milliseconds per batch (median and best), achieved GFLOP/s and its ratio to a matmul
peak measured in the same run. All figures come from a compiled `tf.function` with a fixed
input signature; one `model.predict` batch-1 latency is printed for contrast.

The machine this was written for is shared and noisy, so every round times each configuration
once (batch 1: for about `--round_seconds`) in a rotating order, and the tables give medians over
the rounds: a burst of load then hits every configuration alike.

Usage:
  python benchmarks/bench_forward.py            # the figures of benchmarks/README.md
  python benchmarks/bench_forward.py --quick    # 2 rounds, a smoke test
"""
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from modeling import BertConfig, BertModel  # noqa: E402

CONFIGS = {  # name: (Keras dtype policy, jit_compile)
    "float32": ("float32", False),
    "float32_xla": ("float32", True),
    "mixed_bfloat16": ("mixed_bfloat16", False),
    "mixed_bfloat16_xla": ("mixed_bfloat16", True),
}

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", list(CONFIGS), f"Configurations to time, among {list(CONFIGS)}.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes to time.")
flags.DEFINE_integer("seq_length", 128, "Sequence length T.")
flags.DEFINE_integer("rounds", 7, "Interleaved rounds; the tables give medians over them.")
flags.DEFINE_float("round_seconds", 0.5,
                   "Small batches repeat calls within a round for about this long.")
flags.DEFINE_integer("peak_size", 2048, "n of the [n, n] x [n, n] matmul that measures the peak.")
flags.DEFINE_integer("predict_calls", 5, "model.predict batch-1 calls to time (0: skip).")
flags.DEFINE_integer("intra_op_threads", 0, "TF intra-op threads (0: TF's default).")
flags.DEFINE_integer("inter_op_threads", 0, "TF inter-op threads (0: TF's default).")
flags.DEFINE_bool("quick", False, "2 rounds, 0.2 s per small-batch round, 2 predict calls.")

# BERT-Base (uncased_L-12_H-768_A-12/bert_config.json); the weights are random.
BERT_BASE = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                       num_attention_heads=12, intermediate_size=3072)


def forward_flops(config, seq_length):
    """FLOPs (2 per multiply-add) of the matmuls of one sequence's forward pass.

    Element-wise work (GELU, softmax, LayerNorm, embeddings) is left out, as it is by the peers
    this is compared with; it is well under 1% of the total at BERT-Base shapes.
    """
    t, h, i = seq_length, config.hidden_size, config.intermediate_size
    per_layer = (2 * t * h * 3 * h  # query, key and value projections
                 + 2 * t * t * h  # scores = query key^T, all heads together
                 + 2 * t * t * h  # context = probs value
                 + 2 * t * h * h  # attention output projection
                 + 2 * t * h * i * 2)  # feed-forward H -> I -> H
    pooler = 2 * h * h  # first token only
    return config.num_hidden_layers * per_layer + pooler


def build_model(policy):
    """A BERT-Base `BertModel` whose layers use `policy`; the same random weights every time."""
    keras.mixed_precision.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        return BertModel(BERT_BASE)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def compiled_forward(model, batch_size, seq_length, jit_compile):
    """`model` as a `tf.function` of (input_ids, input_mask, token_type_ids), each int32 [B, T].

    Returns sequence_output [B, T, H] and pooled_output [B, H], what inference keeps.
    """
    spec = tf.TensorSpec([batch_size, seq_length], tf.int32)

    @tf.function(input_signature=[spec, spec, spec], jit_compile=jit_compile)
    def forward(input_ids, input_mask, token_type_ids):
        outputs = model({"input_ids": input_ids, "input_mask": input_mask,
                         "token_type_ids": token_type_ids}, training=False)
        return outputs["sequence_output"], outputs["pooled_output"]

    return forward


def random_inputs(batch_size, seq_length, vocab_size, seed=0):
    """Random ids, no padding, two segments: int32 [B, T] each."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(0, vocab_size, size=(batch_size, seq_length), dtype=np.int32)
    token_type_ids = np.zeros((batch_size, seq_length), np.int32)
    token_type_ids[:, seq_length // 2:] = 1
    return (tf.constant(input_ids), tf.ones([batch_size, seq_length], tf.int32),
            tf.constant(token_type_ids))


def time_calls(fn, args, min_seconds):
    """Seconds of each call of `fn(*args)` (outputs copied to host) until `min_seconds` pass."""
    times = []
    start = time.perf_counter()
    while not times or time.perf_counter() - start < min_seconds:
        begin = time.perf_counter()
        for output in tf.nest.flatten(fn(*args)):
            output.numpy()
        times.append(time.perf_counter() - begin)
    return times


def matmul_peaks(n):
    """[n, n] x [n, n] matmuls in float32 and bfloat16; returns {dtype: (fn, args, flops)}."""
    matmul = tf.function(tf.matmul)
    peaks = {}
    for dtype in (tf.float32, tf.bfloat16):
        a = tf.cast(tf.random.stateless_normal([n, n], seed=[1, 2]), dtype)
        b = tf.cast(tf.random.stateless_normal([n, n], seed=[3, 4]), dtype)
        peaks[dtype.name] = (matmul, (a, b), 2 * n ** 3)
    return peaks


def main(argv):
    del argv
    if FLAGS.quick:
        FLAGS.rounds, FLAGS.round_seconds, FLAGS.predict_calls = 2, 0.2, 2
    unknown = set(FLAGS.configs) - set(CONFIGS)
    if unknown:
        raise app.UsageError(f"--configs: unknown {sorted(unknown)}; choose from {list(CONFIGS)}")
    if FLAGS.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    if FLAGS.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    seq_length = FLAGS.seq_length
    flops = forward_flops(BERT_BASE, seq_length)

    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs, "
          f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(unset)')}, "
          f"threads intra/inter {tf.config.threading.get_intra_op_parallelism_threads()}/"
          f"{tf.config.threading.get_inter_op_parallelism_threads()} (0: default)")
    print(f"BERT-Base, T={seq_length}: {flops / 1e9:.2f} GFLOP per sequence (matmuls)")
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg())

    models = {policy: build_model(policy) for policy, _ in
              {CONFIGS[name] for name in FLAGS.configs}}
    jobs = {}  # (label, batch) -> (fn, args, flops per call)
    for name in FLAGS.configs:
        policy, jit = CONFIGS[name]
        for batch in batch_sizes:
            forward = compiled_forward(models[policy], batch, seq_length, jit)
            jobs[(name, batch)] = (forward, random_inputs(batch, seq_length, BERT_BASE.vocab_size),
                                   flops * batch)
    for dtype, job in matmul_peaks(FLAGS.peak_size).items():
        jobs[(f"matmul {FLAGS.peak_size}^3 {dtype}", None)] = job

    for key, (fn, args, _) in jobs.items():  # traces, compiles, warms oneDNN's caches
        begin = time.perf_counter()
        time_calls(fn, args, 0)
        time_calls(fn, args, 0)
        print(f"  warm-up {key[0]:<24} batch {key[1]}: {time.perf_counter() - begin:6.1f} s",
              flush=True)

    samples = {key: [] for key in jobs}
    keys = list(jobs)
    for round_index in range(FLAGS.rounds):
        shift = round_index % len(keys)  # rotate the order so no job always runs first
        for key in keys[shift:] + keys[:shift]:
            fn, args, _ = jobs[key]
            # One call per round for big batches, several for small ones, then their median.
            seconds = FLAGS.round_seconds if key[1] is None or key[1] < 8 else 0
            samples[key].append(statistics.median(time_calls(fn, args, seconds)))
        print(f"  round {round_index + 1}/{FLAGS.rounds} done", flush=True)

    peaks = {}
    print(f"\nmatmul peak, [n, n] x [n, n], n={FLAGS.peak_size} (median / best of "
          f"{FLAGS.rounds} rounds):")
    for dtype in ("float32", "bfloat16"):
        key = (f"matmul {FLAGS.peak_size}^3 {dtype}", None)
        flop = jobs[key][2]
        peaks[dtype] = flop / statistics.median(samples[key]) / 1e9
        print(f"  {dtype:<9} {peaks[dtype]:6.0f} GFLOP/s  (best "
              f"{flop / min(samples[key]) / 1e9:.0f})")

    print(f"\nforward, T={seq_length}, compiled tf.function (median / best of "
          f"{FLAGS.rounds} rounds):")
    print(f"  {'config':<20} {'batch':>5} {'seq/s':>7} {'ms':>8} {'best ms':>8} "
          f"{'GFLOP/s':>8} {'% peak':>7}")
    for name in FLAGS.configs:
        peak = peaks["bfloat16" if "bfloat16" in name else "float32"]
        for batch in batch_sizes:
            seconds = statistics.median(samples[(name, batch)])
            gflops = flops * batch / seconds / 1e9
            print(f"  {name:<20} {batch:>5} {batch / seconds:7.2f} {seconds * 1e3:8.1f} "
                  f"{min(samples[(name, batch)]) * 1e3:8.1f} {gflops:8.0f} "
                  f"{100 * gflops / peak:6.0f}%")

    if FLAGS.predict_calls:
        model = models.get("float32") or build_model("float32")
        input_ids, input_mask, token_type_ids = random_inputs(1, seq_length,
                                                              BERT_BASE.vocab_size)
        inputs = {"input_ids": input_ids.numpy(), "input_mask": input_mask.numpy(),
                  "token_type_ids": token_type_ids.numpy()}
        model.predict(inputs, batch_size=1, verbose=0)  # traces predict_function
        times = []
        for _ in range(FLAGS.predict_calls):
            begin = time.perf_counter()
            model.predict(inputs, batch_size=1, verbose=0)
            times.append(time.perf_counter() - begin)
        print(f"\nfloat32 model.predict, batch 1 (contrast, not a main figure): median "
              f"{statistics.median(times) * 1e3:.1f} ms of {len(times)} calls")
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    app.run(main)
