"""The matmul-bound limit of a fine-tuning run: how many examples a second the training step
could reach if it did nothing but its encoder's matmuls, at the rate those matmuls' shapes run
on this machine. A ratio to the peer's step says how much lead there is left to take.

The work counted is what any implementation must do for the task, padding left out:
- every layer but the last, at each of an example's L pieces: the query, key, value and
  attention output projections (4 of [H, H]), the feed-forward pair ([H, I] and [I, H]), and
  attention's two products (scores QK^T and their weighted sum of V, each 2 L^2 H a layer);
- the last layer at the pieces the head reads (a classifier's [CLS] alone, a tagger's every
  piece): keys and values at all L pieces, the rest at the head's R rows;
- training: the forward once and the backward twice (the gradients of a matmul's input and of
  its weights each cost its forward), so 3x the forward.
Embeddings, normalization, activations, dropout and the update are left out: they are the
"not matmul" a step spends beyond the limit. `step_matmuls` lists these products one by one;
bench_step_breakdown.py times the same list.

The rate is measured, not taken from the 2048^3 peak: the step's own shapes ([B L, H] by
[H, 3H], [H, H], [H, I], [I, H], and the transposed products of the backward) run slower on a
CPU than a large square matmul does. bench_step_breakdown.py times each of them alone, and the
step part by part, at one batch's shapes. Timed as there, the whole list one product after
another (each waiting for the one before, attention's and the [CLS] rows' included, each as
often as a step runs it), they reach less than here, where one function runs the larger shapes
once each and independent products overlap: 120 against 210 GFLOP/s on MRPC's records,
alternated in one sitting on a 2-core Xeon (benchmarks/history/finetuning_against_peer.md).
This limit takes the higher rate.
"""
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

_MEASURE = r"""
import json, statistics, sys, time
import numpy as np
from modeling.runtime import cpu_kernels
cpu_kernels.choose()  # the kernels the scripts run
import tensorflow as tf

records, config_path, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = json.load(open(config_path, encoding="utf-8"))
hidden, inner = config["hidden_size"], config["intermediate_size"]
lengths = [int(np.sum(tf.train.Example.FromString(record).features.feature["input_mask"]
                      .int64_list.value))
           for record in tf.data.TFRecordDataset(records).as_numpy_iterator()]
rows = batch * round(float(np.mean(lengths)))
shapes = []  # (m, k, n) of the forward's products and of their two gradients
for k, n in ((hidden, 3 * hidden), (hidden, hidden), (hidden, inner), (inner, hidden)):
    shapes += [(rows, k, n), (rows, n, k), (k, rows, n)]
rates = {}
for dtype in (tf.float32, tf.bfloat16):
    pairs = [(tf.cast(tf.random.normal([m, k]), dtype), tf.cast(tf.random.normal([k, n]), dtype))
             for m, k, n in shapes]
    products = tf.function(lambda pairs: [tf.reduce_sum(tf.matmul(a, b)) for a, b in pairs])
    [value.numpy() for value in products(pairs)]
    times = []
    for _ in range(7):
        start = time.perf_counter()
        [value.numpy() for value in products(pairs)]
        times.append(time.perf_counter() - start)
    rates[dtype.name] = sum(2 * m * k * n for m, k, n in shapes) / statistics.median(times) / 1e9
print(json.dumps({"lengths": lengths, "rows": rows, "gflops": rates}))
"""


def step_matmuls(batch, length, config, head_rows=1):
    """The encoder's matmuls in one training step on `batch` examples of `length` pieces:
    list of (phase, name, batch dims, m, k, n, transpose_a, transpose_b, count), a [m, k] x
    [k, n] product (of the batch dims' many), `count` times a step.

    Every layer at the B*L pieces, but where the head reads `head_rows` < L pieces of each
    example (a classifier: [CLS] alone), the last layer computes keys and values at every
    piece and the rest (query, attention output, feed-forward) at those rows only.

    Args:
      config: a dict with hidden_size, intermediate_size, num_attention_heads and
        num_hidden_layers (bert_config.json's keys).
    """
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    heads, layers = config["num_attention_heads"], config["num_hidden_layers"]
    rows, depth = batch * length, hidden // heads
    full = layers if head_rows == length else layers - 1
    inventory = []

    def dense(name, m, k, n, count):
        inventory.extend([
            ("forward", name, (), m, k, n, False, False, count),
            ("backward", f"{name}: input gradient", (), m, n, k, False, True, count),
            ("backward", f"{name}: weight gradient", (), k, m, n, True, False, count)])

    def attention(name, queries, count):
        b = (batch * heads,)
        inventory.extend([
            ("forward", f"{name}scores Q K^T", b, queries, depth, length, False, True, count),
            ("forward", f"{name}context P V", b, queries, length, depth, False, False, count),
            ("backward", f"{name}scores: dQ = dS K", b, queries, length, depth, False, False,
             count),
            ("backward", f"{name}scores: dK = dS^T Q", b, length, queries, depth, True, False,
             count),
            ("backward", f"{name}context: dP = dC V^T", b, queries, depth, length, False, True,
             count),
            ("backward", f"{name}context: dV = P^T dC", b, length, queries, depth, True, False,
             count)])

    # The last layer's keys and values at every piece, where it reads fewer.
    dense("q/k/v/o projection", rows, hidden, hidden, 4 * full + 2 * (full < layers))
    dense("feed-forward in", rows, hidden, inner, full)
    dense("feed-forward out", rows, inner, hidden, full)
    attention("attention ", length, full)
    if full < layers:
        at = "[CLS]" if head_rows == 1 else f"{head_rows} rows"
        dense(f"last layer at {at}: q/o projection", batch * head_rows, hidden, hidden, 2)
        dense(f"last layer at {at}: feed-forward in", batch * head_rows, hidden, inner, 1)
        dense(f"last layer at {at}: feed-forward out", batch * head_rows, inner, hidden, 1)
        attention(f"last layer at {at}: ", head_rows, 1)
    return inventory


def training_flops(length, head_rows, hidden, inner, layers):
    """Matmul FLOPs of training on one example of `length` pieces (forward and backward) of
    an encoder of `layers` layers, `hidden` wide with feed-forward width `inner`, whose head
    reads `head_rows` of its pieces (1 or `length`)."""
    config = dict(hidden_size=hidden, intermediate_size=inner, num_attention_heads=1,
                  num_hidden_layers=layers)
    return sum(2 * m * k * n * (dims[0] if dims else 1) * count
               for _, _, dims, m, k, n, _, _, count in step_matmuls(1, length, config, head_rows))


def measure(records, config_path, batch, every_piece_read, python=sys.executable):
    """The limit of a run training on `records` (a TFRecord file of the scripts, with
    `input_mask`) with the model of `config_path` (bert_config.json) in batches of `batch`;
    `every_piece_read`: the head reads every piece (tagging) rather than [CLS] alone. The
    matmuls are timed by the TensorFlow of `python`.

    Returns:
      {"records", "mean_length", "gflop_per_batch", "matmul_gflops": {dtype: GFLOP/s at the
      step's shapes}, "examples_per_second": {dtype: the limit}}.
    """
    process = subprocess.run([python, "-c", _MEASURE, str(records), str(config_path),
                              str(batch)], capture_output=True, text=True, cwd=ROOT,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), check=True)
    measured = json.loads(process.stdout.strip().splitlines()[-1])
    config = json.loads(pathlib.Path(config_path).read_text("utf-8"))
    lengths = measured["lengths"]
    flops = [training_flops(length, length if every_piece_read else 1, config["hidden_size"],
                            config["intermediate_size"], config["num_hidden_layers"])
             for length in lengths]
    per_example = sum(flops) / len(flops)
    return {"records": len(lengths), "mean_length": sum(lengths) / len(lengths),
            "gflop_per_batch": batch * per_example / 1e9,
            "matmul_gflops": measured["gflops"],
            "examples_per_second": {dtype: rate * 1e9 / per_example
                                    for dtype, rate in measured["gflops"].items()}}
