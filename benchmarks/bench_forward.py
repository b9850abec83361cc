"""Forward-pass speed of `BertModel` at BERT-Base shapes on the CPU (issue 2).

For each configuration and batch size it prints sequences/s, milliseconds per batch, the achieved
GFLOP/s and its ratio to a matmul peak measured in the same run. The figures come from a compiled
`tf.function` with a fixed input signature; one `model.predict` batch-1 latency is printed for
contrast.

Configurations: float32 and mixed bfloat16 (`mixed_bfloat16` set before the model is built), each
with and without XLA (`jit_compile=True`), and `bfloat16`: the same weights stored in bfloat16,
which gives mixed bfloat16's outputs (bit for bit here; trained LayerNorm scales would be rounded
too) without casting every weight at every call.

The machine this was written for is shared and noisy. Every round times each job once (small
batches: repeated for about `--round_seconds`, then their median) in a rotating order, and the
tables give medians over the rounds. Each sample also records how much CPU other processes used
meanwhile (Linux /proc/stat); the "quiet" columns are medians over the samples during which they
used less than 0.15 of a core.

Usage:
  python benchmarks/bench_forward.py            # benchmarks/README.md's figures, ~2 min quiet
  python benchmarks/bench_forward.py --quick    # 2 rounds, a smoke test
"""
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from modeling.runtime import cpu_kernels  # noqa: E402 (imports no TensorFlow)

cpu_kernels.choose()  # before TensorFlow loads: the kernels the scripts run

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
    "bfloat16": ("bfloat16", False),
}
QUIET = 0.15  # cores used by other processes below which a sample counts as quiet

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", list(CONFIGS), f"Configurations to time, among {list(CONFIGS)}.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes to time.")
flags.DEFINE_integer("seq_length", 128, "Sequence length T.")
flags.DEFINE_integer("rounds", 7, "Interleaved rounds; the tables give medians over them.")
flags.DEFINE_float("round_seconds", 0.5,
                   "Batches below 8 repeat calls within a round for about this long.")
flags.DEFINE_integer("peak_size", 2048, "n of the [n, n] x [n, n] matmul that measures the peak.")
flags.DEFINE_integer("predict_calls", 5, "float32 model.predict batch-1 calls to time (0: skip).")
flags.DEFINE_integer("intra_op_threads", 0, "TF intra-op threads (0: TF's default).")
flags.DEFINE_integer("inter_op_threads", 0, "TF inter-op threads (0: TF's default).")
flags.DEFINE_bool("quick", False, "Defaults of 2 rounds, 0.2 s per small-batch round and 2 "
                  "predict calls.")

# BERT-Base (uncased_L-12_H-768_A-12/bert_config.json); the weights are random.
BERT_BASE = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                       num_attention_heads=12, intermediate_size=3072)


def forward_flops(config, seq_length):
    """FLOPs (2 per multiply-add) of the matmuls of one sequence's forward pass.

    Element-wise work (GELU, softmax, LayerNorm, embeddings) is left out, as the figures this is
    compared with leave it out; it is under 1% of the total at BERT-Base shapes.
    """
    t, h, i = seq_length, config.hidden_size, config.intermediate_size
    per_layer = (2 * t * h * 3 * h  # query, key and value projections
                 + 2 * t * t * h  # scores = query key^T, all heads together
                 + 2 * t * t * h  # context = probs value
                 + 2 * t * h * h  # attention output projection
                 + 2 * t * h * i * 2)  # feed-forward H -> I -> H
    pooler = 2 * h * h  # first token only
    return config.num_hidden_layers * per_layer + pooler


def build_model(policy, weights=None):
    """A BERT-Base `BertModel` whose layers use `policy`, with `weights` or seeded random ones."""
    keras.mixed_precision.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        model = BertModel(BERT_BASE)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    if weights is not None:
        model.set_weights(weights)
    return model


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


def cpu_seconds_of_others():
    """CPU seconds used so far by every other process (0 where /proc/stat is missing)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:]]
    except OSError:
        return 0.0
    user, nice, system, _, _, irq, softirq, steal = ticks[:8]
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    ours = os.times()
    return busy - ours.user - ours.system


def time_sample(fn, args, min_seconds):
    """Median seconds of calls of `fn(*args)` (outputs copied to host), repeated for `min_seconds`.

    Returns (seconds per call, cores used by other processes meanwhile).
    """
    times = []
    others, start = cpu_seconds_of_others(), time.perf_counter()
    while not times or time.perf_counter() - start < min_seconds:
        begin = time.perf_counter()
        for output in tf.nest.flatten(fn(*args)):
            output.numpy()
        times.append(time.perf_counter() - begin)
    load = (cpu_seconds_of_others() - others) / (time.perf_counter() - start)
    return statistics.median(times), load


def matmul_peaks(n):
    """[n, n] x [n, n] matmuls in float32 and bfloat16: {dtype name: (fn, args, flops)}."""
    matmul = tf.function(tf.matmul)
    peaks = {}
    for dtype in (tf.float32, tf.bfloat16):
        a = tf.cast(tf.random.stateless_normal([n, n], seed=[1, 2]), dtype)
        b = tf.cast(tf.random.stateless_normal([n, n], seed=[3, 4]), dtype)
        peaks[dtype.name] = (matmul, (a, b), 2 * n ** 3)
    return peaks


def summarize(samples):
    """(median seconds, median seconds of the quiet samples or None, number of quiet samples)."""
    quiet = [seconds for seconds, load in samples if load < QUIET]
    return (statistics.median(seconds for seconds, _ in samples),
            statistics.median(quiet) if quiet else None, len(quiet))


def figures(flops, batch, seconds, peak):
    """'seq/s ms GFLOP/s %-of-peak' of one timing; the % is '-' without a peak."""
    gflops = flops / seconds / 1e9
    percent = f"{100 * gflops / peak:6.0f}%" if peak else f"{'-':>7}"
    return f"{batch / seconds:7.2f} {seconds * 1e3:8.1f} {gflops:8.0f} {percent}"


def print_setup(flops):
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs, "
          f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', '(unset)')}, "
          f"threads intra/inter {tf.config.threading.get_intra_op_parallelism_threads()}/"
          f"{tf.config.threading.get_inter_op_parallelism_threads()} (0: default)")
    print(f"BERT-Base, T={FLAGS.seq_length}: {flops / 1e9:.2f} GFLOP per sequence (matmuls)")
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg(), flush=True)


def print_results(jobs, samples, flops, batch_sizes):
    """The peak and forward tables: medians of all rounds, then of the quiet ones."""
    peaks, quiet_peaks = {}, {}
    print(f"\nmatmul peak, [n, n] x [n, n], n={FLAGS.peak_size}, GFLOP/s:")
    for dtype in ("float32", "bfloat16"):
        key = (f"matmul {dtype}", None)
        seconds, quiet, count = summarize(samples[key])
        peaks[dtype] = jobs[key][2] / seconds / 1e9
        quiet_peaks[dtype] = jobs[key][2] / quiet / 1e9 if quiet else None
        quiet_text = f"{quiet_peaks[dtype]:.0f}" if quiet else "-"
        print(f"  {dtype:<9} median {peaks[dtype]:4.0f}, quiet {quiet_text} (n={count})")

    print(f"\nforward, T={FLAGS.seq_length}, compiled tf.function, median of {FLAGS.rounds} "
          "rounds, then of the quiet ones (n); % of the peak measured alike:")
    print(f"  {'config':<19} {'batch':>5} {'seq/s':>7} {'ms':>8} {'GFLOP/s':>8} {'% peak':>7}"
          f" | {'n':>2} {'seq/s':>7} {'ms':>8} {'GFLOP/s':>8} {'% peak':>7}")
    for name in FLAGS.configs:
        dtype = "bfloat16" if "bfloat16" in name else "float32"
        for batch in batch_sizes:
            seconds, quiet, count = summarize(samples[(name, batch)])
            line = f"  {name:<19} {batch:>5} {figures(flops * batch, batch, seconds, peaks[dtype])}"
            line += f" | {count:>2} "
            if quiet:
                line += figures(flops * batch, batch, quiet, quiet_peaks[dtype])
            print(line)


def time_predict(model, seq_length, calls):
    """Median seconds of `model.predict` on one sequence, after one call that traces it."""
    input_ids, input_mask, token_type_ids = random_inputs(1, seq_length, BERT_BASE.vocab_size)
    inputs = {"input_ids": input_ids.numpy(), "input_mask": input_mask.numpy(),
              "token_type_ids": token_type_ids.numpy()}
    model.predict(inputs, batch_size=1, verbose=0)
    times = []
    for _ in range(calls):
        begin = time.perf_counter()
        model.predict(inputs, batch_size=1, verbose=0)
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def main(argv):
    del argv
    if FLAGS.quick:  # unless given explicitly
        for name, value in (("rounds", 2), ("round_seconds", 0.2), ("predict_calls", 2)):
            if not FLAGS[name].present:
                FLAGS[name].value = value
    unknown = set(FLAGS.configs) - set(CONFIGS)
    if unknown:
        raise app.UsageError(f"--configs: unknown {sorted(unknown)}; choose from {list(CONFIGS)}")
    tf.get_logger().setLevel("ERROR")  # one tf.function per job: retracing warnings are noise
    if FLAGS.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
    if FLAGS.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    seq_length = FLAGS.seq_length
    flops = forward_flops(BERT_BASE, seq_length)
    print_setup(flops)

    float32_model = build_model("float32")
    models = {"float32": float32_model}
    for policy in {CONFIGS[name][0] for name in FLAGS.configs} - {"float32"}:
        models[policy] = build_model(policy, float32_model.get_weights())
    jobs = {}  # (name, batch or None) -> (fn, args, flops per call)
    for name in FLAGS.configs:
        policy, jit = CONFIGS[name]
        for batch in batch_sizes:
            jobs[(name, batch)] = (compiled_forward(models[policy], batch, seq_length, jit),
                                   random_inputs(batch, seq_length, BERT_BASE.vocab_size),
                                   flops * batch)
    for dtype, job in matmul_peaks(FLAGS.peak_size).items():
        jobs[(f"matmul {dtype}", None)] = job

    for (name, batch), (fn, args, _) in jobs.items():  # traces, compiles, warms oneDNN's caches
        begin = time.perf_counter()
        time_sample(fn, args, 0)
        time_sample(fn, args, 0)
        print(f"  warm-up {name:<20} batch {batch}: {time.perf_counter() - begin:5.1f} s",
              flush=True)

    samples = {key: [] for key in jobs}  # key -> [(seconds, cores used by others)]
    keys = list(jobs)
    for round_index in range(FLAGS.rounds):
        shift = round_index % len(keys)  # rotates the order so that no job always runs first
        for key in keys[shift:] + keys[:shift]:
            fn, args, _ = jobs[key]
            small = key[1] is None or key[1] < 8
            samples[key].append(time_sample(fn, args, FLAGS.round_seconds if small else 0))
        print(f"  round {round_index + 1}/{FLAGS.rounds} done", flush=True)
    print_results(jobs, samples, flops, batch_sizes)

    if FLAGS.predict_calls:
        seconds = time_predict(float32_model, seq_length, FLAGS.predict_calls)
        print(f"\nfloat32 model.predict, batch 1 (for contrast, not a main figure): "
              f"median {seconds * 1e3:.1f} ms of {FLAGS.predict_calls} calls")
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    app.run(main)
