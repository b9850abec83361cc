"""The Adam update compiled by XLA, assigning in place, against the same formula compiled but
assigned after the compiled pass, and run op by op, in one process.

  python benchmarks/bench_adam_update.py                  # MiniLM shapes, 32 x 64, 8 rounds
  python benchmarks/bench_adam_update.py --seq_length=128 --rounds=6

Three identical MiniLM classifiers (22.7M weights, random), trained by:
- the library's `AdamWeightDecay`: each variable's weights and slots computed and assigned by
  one XLA-compiled call (XLA writes into the variables' buffers);
- a subclass whose compiled calls return the new values, assigned after each call (the library
  before this benchmark's third column: a new buffer for every result at every step);
- a subclass that runs the same formula one TensorFlow operation at a time for every variable,
  as the library did before 897968a.
Each round times one training step (forward, backward, clip, update) and three bare updates of
each, alternating, so that the machine's drift hits all alike. Prints medians, the median of the
rounds' step-time ratios to the library's, and the float32 matmul peak measured in the same run.
"""
import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from modeling.runtime import cpu_kernels, quiet  # noqa: E402

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from modeling import BertConfig  # noqa: E402
from modeling.models.classifier import BertClassifier  # noqa: E402
from modeling.training import optimization  # noqa: E402

MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, hidden_act="gelu_exact")


def _assign_after(new_values):
    """An `_assign_new_values` that assigns what `new_values` (the formula) returns."""
    def assign_new_values(self, weights, m, v, gradient, learning_rate, step, decays, scale,
                          condition):
        new = new_values(self, *(variable.read_value() for variable in (weights, m, v)),
                         gradient, learning_rate, step, decays, scale)
        for variable, value in zip((weights, m, v), new):
            variable.assign(value)
        return step
    return assign_new_values


class AssignedAfterAdamWeightDecay(optimization.AdamWeightDecay):
    """The formula compiled, its results assigned outside the compiled call."""
    _assign_new_values = _assign_after(
        tf.function(optimization.AdamWeightDecay._new_values, jit_compile=True))


class OpByOpAdamWeightDecay(optimization.AdamWeightDecay):
    """The library's own formula, run op by op for every variable."""
    _assign_new_values = _assign_after(optimization.AdamWeightDecay._new_values)


def compiled_steps(optimizer_class, batch):
    """Returns (training step, bare update, its gradients) for a fresh model."""
    model = BertClassifier(BertConfig(**MINILM), 2)
    optimizer = optimizer_class(optimization.WarmupPolynomialDecay(2e-5, 1000, 100))
    optimizer.build(model.trainable_variables)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = model(batch, training=True)["loss"]
        gradients = tape.gradient(loss, model.trainable_variables)
        clipped, _ = optimization.clip_gradients(gradients)
        optimizer.apply_gradients(zip(clipped, model.trainable_variables))
        return loss

    @tf.function
    def update(gradients):
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return optimizer.iterations

    gradients = [tf.random.normal(v.shape, stddev=1e-3) for v in model.trainable_variables]
    for _ in range(2):  # trace, compile, warm up
        step(batch)
        update(gradients)
    return step, update, gradients


def seconds(function, argument):
    start = time.perf_counter()
    function(argument).numpy()
    return time.perf_counter() - start


def matmul_peak():
    """float32 GFLOP/s of a 2048³ matmul, median of 5."""
    a = tf.random.normal([2048, 2048])
    product = tf.function(lambda a: tf.reduce_sum(tf.matmul(a, a)))
    product(a)
    return 2 * 2048 ** 3 / statistics.median(seconds(product, a) for _ in range(5)) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.seq_length)
    batch = {"input_ids": tf.constant(rng.integers(1000, 30000, shape), tf.int32),
             "input_mask": tf.ones(shape, tf.int32), "token_type_ids": tf.zeros(shape, tf.int32),
             "label_ids": tf.constant(rng.integers(0, 2, shape[:1]), tf.int32)}
    jobs = {"in place": compiled_steps(optimization.AdamWeightDecay, batch),
            "assigned after": compiled_steps(AssignedAfterAdamWeightDecay, batch),
            "op by op": compiled_steps(OpByOpAdamWeightDecay, batch)}
    peak_before = matmul_peak()
    steps = {name: [] for name in jobs}
    updates = {name: [] for name in jobs}
    for _ in range(args.rounds):
        for name, (step, update, gradients) in jobs.items():
            steps[name].append(seconds(step, batch))
            updates[name].extend(seconds(update, gradients) for _ in range(3))
    print(f"MiniLM, batch {args.batch_size} x {args.seq_length}, {args.rounds} rounds; float32 "
          f"matmul peak {peak_before:.0f} GFLOP/s before, {matmul_peak():.0f} after")
    print(f"{'update':<15} {'update ms':>10} {'step ms':>8} {'step / in place (range)':>26}")
    for name in jobs:
        ratios = [step / ours for step, ours in zip(steps[name], steps["in place"])]
        print(f"{name:<15} {1000 * statistics.median(updates[name]):>10.0f} "
              f"{1000 * statistics.median(steps[name]):>8.0f} "
              f"{statistics.median(ratios):>9.3f} ({min(ratios):.3f} to {max(ratios):.3f})")


if __name__ == "__main__":
    main()
