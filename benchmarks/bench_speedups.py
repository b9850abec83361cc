"""Each hand-made speed-up of the training step against the plain form it replaced, by the
script a user runs, on the TensorFlow installed.

  python benchmarks/bench_speedups.py                          # buckets_bfloat16, 3 rounds
  python benchmarks/bench_speedups.py --config=dynamic_float32 --variants=all_positions
  /tmp/venv-nightly/bin/python benchmarks/bench_speedups.py    # the same on tf-nightly

run_classifier.py fine-tunes all-MiniLM-L6-v2 (converted once) on MRPC's first 320 training
pairs for --epochs, once per variant and round, the variants interleaved within each round.
A variant is the library with one speed-up taken out, replaced before the script starts:
- plain_passes: the feed-forward's bias and GELU, and each block's bias, dropout, residual and
  LayerNorm, by Keras' layers op by op, as inference computes them (instead of `fused`'s
  compiled passes with their own backward passes);
- all_positions: every position a row, padding included (instead of `token_rows.RealTokens`);
- grappler: the training loop's graph optimized by grappler, as TensorFlow does by default
  (instead of run as traced, `Trainer._train_loop` on CPUs).
The one-hot embeddings, the attention's scale folded into the query projection and the small
variables' update in one compiled call were taken out of the library after this benchmark
measured them (history/speedups.md).
Each variant fills its own XLA cache in a first, unmeasured run of the same length, so that
the rounds compare warm runs. Prints, per variant, the medians of the first step and of the
later steps' seconds, and the median over rounds of the later steps' time against the
library's (above 1: the speed-up pays), with the machine's matmul peaks measured in the same run.

  python benchmarks/bench_speedups.py --in_process --rounds=10 [--bucketed=false]

times the training step alone, for effects smaller than the scripts' run-to-run spread: every
variant's MiniLM classifier (random weights) built and traced in one process, then run on the
same synthetic MRPC-like batches, the variants alternating batch by batch; each run as the
training loop runs on a CPU, without grappler but for the grappler variant.
"""
import argparse
import atexit
import contextlib
import pathlib
import runpy
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from modeling.runtime import cpu_kernels  # noqa: E402 (imports no TensorFlow)

cpu_kernels.choose()  # before TensorFlow loads: the kernels the scripts run


def plain_passes():
    from modeling.encoder import layers

    def intermediate(self, rows, training=False):
        outputs = self.dense(rows)
        return outputs if self.activation is None else self.activation(outputs)

    def dense_layer_norm(self, rows, residual, training=False):
        return self.layer_norm(self.dropout(self.dense(rows), training=training) + residual)

    return [(layers.Intermediate, "call", intermediate),
            (layers.DenseLayerNorm, "call", dense_layer_norm)]


def all_positions():
    from modeling.encoder import token_rows
    return [(token_rows, "for_input_mask", token_rows.AllPositions)]


def grappler():
    from modeling.training import trainer
    graph_optimizer = trainer.graph_optimizer
    return [(trainer, "graph_optimizer", lambda enabled: graph_optimizer(enabled=True))]


VARIANTS = {"library": lambda: [], "plain_passes": plain_passes, "all_positions": all_positions,
            "grappler": grappler}


@contextlib.contextmanager
def patched(variant):
    """The library with `variant`'s replacements, while the block runs (a model built and a
    step traced inside keep them)."""
    replacements = VARIANTS[variant]()
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in replacements]
    for owner, name, replacement in replacements:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def child(variant, script_and_flags):
    """Runs the script with `variant`'s replacements."""
    sys.argv = script_and_flags
    with patched(variant):
        runpy.run_path(script_and_flags[0], run_name="__main__")


def synthetic_batches(count, bucketed, seed=0):
    """`count` batches of 32 MRPC-like pairs: lengths about N(53, 12) pieces; sorted by length
    before batching where `bucketed`, each batch cut to its longest."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.normal(53, 12, 32 * count), 16, 128).astype(int)
    if bucketed:
        lengths = np.sort(lengths)
    batches = []
    for chunk in lengths.reshape(count, 32):
        mask = (np.arange(chunk.max())[None, :] < chunk[:, None]).astype(np.int32)
        batches.append({"input_ids": tf.constant(rng.integers(1000, 30000, mask.shape) * mask),
                        "input_mask": tf.constant(mask),
                        "token_type_ids": tf.constant((np.arange(mask.shape[1]) > 20) * mask),
                        "label_ids": tf.constant(rng.integers(0, 2, 32))})
    return batches


def traced_step(variant, batches):
    """A MiniLM classifier's training step (forward, backward, clipping, the update) built and
    traced with `variant`'s replacements, run once on every batch (XLA compiles each shape)."""
    import tensorflow as tf
    from bench_adam_update import MINILM

    from modeling import BertConfig
    from modeling.models.classifier import BertClassifier
    from modeling.training import optimization
    with patched(variant):
        model = BertClassifier(BertConfig(**MINILM), 2)
        optimizer = optimization.create_optimizer(2e-5, 1000, 100)
        optimizer.build(model.trainable_variables)

        @tf.function(reduce_retracing=True)
        def step(batch):
            with tf.GradientTape() as tape:
                loss = model(batch, training=True)["loss"]
            gradients = [tf.convert_to_tensor(g)
                         for g in tape.gradient(loss, model.trainable_variables)]
            scale, _ = optimization.clip_scale(gradients)
            optimizer.apply_scaled_gradients(zip(gradients, model.trainable_variables), scale)
            return loss

    for batch in batches:
        run(variant, step, batch)
    return step


def run(variant, step, batch):
    """One call of `variant`'s step, with grappler where its loop would have it."""
    from modeling.training import trainer
    with patched(variant), trainer.graph_optimizer(enabled=False):
        step(batch).numpy()


def in_process(args, variants):
    """Every variant's step in this process, the variants alternating batch by batch."""
    import time

    import keras

    from bench_finetuning import matmul_peaks
    keras.mixed_precision.set_global_policy(args.precision)
    batches = synthetic_batches(args.batches, args.bucketed)
    steps = {variant: traced_step(variant, batches) for variant in variants}
    peaks = matmul_peaks()
    seconds = {variant: [] for variant in variants}
    for _ in range(args.rounds):
        for batch in batches:
            for variant in variants:
                start = time.perf_counter()
                run(variant, steps[variant], batch)
                seconds[variant].append(time.perf_counter() - start)
    print(f"MiniLM step in one process, {args.precision}, {args.batches} batches of 32 "
          f"{'in length buckets' if args.bucketed else 'at random'} (lengths N(53, 12)), "
          f"{args.rounds} rounds; matmul peak bfloat16 {peaks['bfloat16']:.0f}, float32 "
          f"{peaks['float32']:.0f} GFLOP/s")
    print(f"| {'variant':<20} | {'median ms':>9} | {'its step / library (quartiles)':>30} |")
    print(f"|{'-' * 22}|{'-' * 11}|{'-' * 32}|")
    for variant in variants:
        ratios = sorted(mine / ours for mine, ours in zip(seconds[variant], seconds["library"]))
        quartiles = statistics.quantiles(ratios, n=4)
        print(f"| {variant:<20} | {1000 * statistics.median(seconds[variant]):>9.1f} | "
              f"{quartiles[1]:>10.3f} ({quartiles[0]:.3f} to {quartiles[2]:.3f}) |")


def run_once(variant, config_flags, epochs, model, data, cache, work):
    """(first step s, later steps' s/step) of one run of `variant`."""
    from bench_finetuning import minilm_mrpc_flags, run_child, training_seconds
    output = tempfile.mkdtemp(dir=work)
    flags = minilm_mrpc_flags(model, data, output, epochs, cache) + list(config_flags)
    log = pathlib.Path(output) / "log"
    code, *_ = run_child([sys.executable, str(pathlib.Path(__file__).resolve()), "--child",
                          variant, "--", *flags], log, {"CUDA_VISIBLE_DEVICES": ""})
    text = log.read_text("utf-8", errors="replace")
    shutil.rmtree(output, ignore_errors=True)  # its checkpoint: 270 MB a run
    if code:
        sys.exit(f"{variant}: run_classifier.py failed with {code}; its log ends:\n"
                 f"{text[-3000:]}")
    seconds, steps, first = training_seconds(text)
    return first, (seconds - first) / (steps - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=2.0,
                        help="over 320 pairs: 10 steps of 32 an epoch")
    parser.add_argument("--config", default="buckets_bfloat16",
                        help="one of bench_finetuning.py's configurations of ours")
    parser.add_argument("--variants", default=",".join(v for v in VARIANTS if v != "library"),
                        help=f"comma-separated, of {sorted(VARIANTS)}")
    parser.add_argument("--in_process", action="store_true",
                        help="time the step alone in one process, on synthetic batches")
    parser.add_argument("--precision", default="mixed_bfloat16",
                        help="--in_process: Keras' policy")
    parser.add_argument("--batches", type=int, default=8, help="--in_process: batches a round")
    parser.add_argument("--bucketed", type=lambda v: v.lower() == "true", default=True,
                        help="--in_process: batches of similar lengths (true) or random")
    parser.add_argument("--child", metavar="VARIANT", help=argparse.SUPPRESS)
    parser.add_argument("script_and_flags", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.script_and_flags)
    variants = ["library"] + [v for v in args.variants.split(",") if v and v != "library"]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {unknown}; expected some of {sorted(VARIANTS)}")
    if args.in_process:
        return in_process(args, variants)

    import tensorflow as tf
    from bench_finetuning import CONFIGS, DATA, convert_minilm, matmul_peaks, subset_mrpc
    if args.config not in CONFIGS:
        parser.error(f"--config: unknown {args.config!r}; expected one of {sorted(CONFIGS)}")
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_speedups_"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the model, data, caches
    model = convert_minilm(work)
    data = subset_mrpc(DATA / "glue" / "MRPC", work / "mrpc", 320)
    caches = {variant: work / f"xla_cache_{variant}" for variant in variants}
    for variant in variants:  # fills each variant's cache: the rounds compare warm runs
        run_once(variant, CONFIGS[args.config], args.epochs, model, data, caches[variant],
                 work)
    peaks = matmul_peaks()
    runs = {variant: [] for variant in variants}
    for round_ in range(args.rounds):
        for variant in variants:
            runs[variant].append(run_once(variant, CONFIGS[args.config], args.epochs, model,
                                          data, caches[variant], work))
            first, step = runs[variant][-1]
            print(f"round {round_ + 1} {variant}: first step {first:.2f} s, later steps "
                  f"{step:.3f} s", flush=True)

    print(f"\nTensorFlow {tf.__version__}; MiniLM, MRPC 320 pairs, {args.config}, "
          f"{args.epochs:g} epochs, {args.rounds} rounds, warm XLA caches; matmul peak "
          f"bfloat16 {peaks['bfloat16']:.0f}, float32 {peaks['float32']:.0f} GFLOP/s"
          + (" (no bfloat16 instructions)" if peaks["cpu_lacks_bfloat16"] else ""))
    print(f"| {'variant':<20} | {'first step s':>12} | {'later s/step':>12} | "
          f"{'its step / library':>18} |")
    print(f"|{'-' * 22}|{'-' * 14}|{'-' * 14}|{'-' * 20}|")
    for variant in variants:
        ratio = statistics.median(mine[1] / ours[1]
                                  for mine, ours in zip(runs[variant], runs["library"]))
        print(f"| {variant:<20} | {statistics.median(r[0] for r in runs[variant]):>12.2f} | "
              f"{statistics.median(r[1] for r in runs[variant]):>12.3f} | {ratio:>18.3f} |")


if __name__ == "__main__":
    main()
