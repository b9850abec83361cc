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
"not matmul" a step spends beyond the limit.

The rate is measured, not taken from the 2048^3 peak: the step's own shapes ([B L, H] by
[H, 3H], [H, H], [H, I], [I, H], and the transposed products of the backward) run slower on a
CPU than a large square matmul does. bench_step_breakdown.py times each of them alone, and the
step part by part, at one batch's shapes.
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


def training_flops(length, head_rows, hidden, inner, layers):
    """Matmul FLOPs of training on one example of `length` pieces (forward and backward) of
    an encoder of `layers` layers, `hidden` wide with feed-forward width `inner`, whose head
    reads `head_rows` of its pieces (1 or `length`)."""
    full_layer = 2 * length * hidden * (4 * hidden + 2 * inner) + 4 * length ** 2 * hidden
    last_layer = (2 * length * hidden * 2 * hidden  # keys and values at every piece
                  + 2 * head_rows * hidden * (2 * hidden + 2 * inner)  # query, output, FFN
                  + 4 * head_rows * length * hidden)  # the head rows' attention
    return 3 * ((layers - 1) * full_layer + last_layer)


def measure(records, config_path, batch, every_piece_read):
    """The limit of a run training on `records` (a TFRecord file of the scripts, with
    `input_mask`) with the model of `config_path` (bert_config.json) in batches of `batch`;
    `every_piece_read`: the head reads every piece (tagging) rather than [CLS] alone.

    Returns:
      {"records", "mean_length", "gflop_per_batch", "matmul_gflops": {dtype: GFLOP/s at the
      step's shapes}, "examples_per_second": {dtype: the limit}}.
    """
    process = subprocess.run([sys.executable, "-c", _MEASURE, str(records), str(config_path),
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
