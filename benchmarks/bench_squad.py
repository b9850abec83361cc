"""SQuAD prediction speed on the CPU (issue 6): the span model's features/s at BERT-Base
shapes, seq 384, with and without XLA, and the post-processing time for 10,000 features.

The model part times a compiled `tf.function` of `BertSpanModel` (random weights) on fixed
int32 [batch, 384] inputs, each configuration once per round in a rotating order, and prints
medians over the rounds with the XLA / no-XLA ratio. The post-processing part reads the real
SQuAD v1.1 dev set from ../shared/data (skipped, and said so, when it is absent), makes its
features as run_squad.py does (384 / 128 / 64, uncased vocab), gives them random logits and
times `squad_answers.write_predictions` on the first 10,000 features' examples.

Usage:
  python benchmarks/bench_squad.py            # benchmarks/README.md's figures
  python benchmarks/bench_squad.py --quick    # a smoke test
"""
import os
import pathlib
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from modeling.runtime import cpu_kernels  # noqa: E402 (imports no TensorFlow)

cpu_kernels.choose()  # before TensorFlow loads: the kernels the scripts run

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from modeling import BertConfig  # noqa: E402
from modeling.text import tokenization  # noqa: E402
from modeling.data import squad
from modeling.evaluation import squad_answers
from modeling.models.squad import BertSpanModel  # noqa: E402

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
CONFIGS = {"float32": ("float32", False), "float32_xla": ("float32", True),
           "mixed_bfloat16": ("mixed_bfloat16", False)}

FLAGS = flags.FLAGS
flags.DEFINE_list("configs", list(CONFIGS), f"Configurations to time, among {list(CONFIGS)}.")
flags.DEFINE_integer("batch_size", 8, "Features per call (run_squad's predict_batch_size).")
flags.DEFINE_integer("seq_length", 384, "Sequence length.")
flags.DEFINE_integer("rounds", 5, "Interleaved rounds; the table gives medians.")
flags.DEFINE_integer("calls", 3, "Timed calls per configuration and round.")
flags.DEFINE_integer("features", 10000, "Features to post-process.")
flags.DEFINE_bool("quick", False, "2 rounds of 1 call, 500 features.")

BERT_BASE = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                       num_attention_heads=12, intermediate_size=3072)


def build_predictors():
    """name -> compiled function of the span model on [batch, seq] int32 inputs."""
    predictors = {}
    for name in FLAGS.configs:
        policy, xla = CONFIGS[name]
        keras.mixed_precision.set_dtype_policy(policy)
        model = BertSpanModel(BERT_BASE)
        keras.mixed_precision.set_dtype_policy("float32")
        spec = tf.TensorSpec([FLAGS.batch_size, FLAGS.seq_length], tf.int32)

        @tf.function(input_signature=[spec, spec, spec], jit_compile=xla)
        def predict(ids, mask, types, model=model):
            outputs = model({"input_ids": ids, "input_mask": mask, "token_type_ids": types})
            return outputs["start_logits"], outputs["end_logits"]
        predictors[name] = predict
    return predictors


def time_model(predictors, rounds, calls):
    rng = np.random.default_rng(0)
    shape = (FLAGS.batch_size, FLAGS.seq_length)
    inputs = (tf.constant(rng.integers(1000, 30000, shape), tf.int32),
              tf.ones(shape, tf.int32), tf.constant(np.repeat(
                  [[0] * 64 + [1] * (FLAGS.seq_length - 64)], FLAGS.batch_size, 0), tf.int32))
    for predict in predictors.values():  # compile and warm up
        [t.numpy() for t in predict(*inputs)]
    samples = {name: [] for name in predictors}
    names = list(predictors)
    for round_index in range(rounds):
        for name in names[round_index % len(names):] + names[:round_index % len(names)]:
            start = time.perf_counter()
            for _ in range(calls):
                [t.numpy() for t in predictors[name](*inputs)]
            samples[name].append(FLAGS.batch_size * calls / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in samples.items()}


def time_postprocessing(count):
    data_file = SHARED / "data/squad/dev-v1.1.json"
    if not data_file.exists():
        print(f"post-processing: skipped, {data_file} is absent")
        return
    tokenizer = tokenization.FullTokenizer(str(SHARED / "refs/vocab/uncased_vocab.txt"), True)
    examples = squad.read_squad_examples(str(data_file), is_training=False,
                                              version_2_with_negative=False)
    features = []

    def keep(feature):
        if len(features) < count:
            features.append(feature)
    squad.convert_examples_to_features(examples, tokenizer, 384, 128, 64, False, keep)
    examples = examples[:features[-1].example_index + 1]
    rng = np.random.default_rng(1)
    results = [squad_answers.RawResult(f.unique_id, rng.normal(size=384).tolist(),
                                           rng.normal(size=384).tolist()) for f in features]
    with tempfile.TemporaryDirectory() as directory:
        paths = [os.path.join(directory, name) for name in ("p.json", "n.json", "o.json")]
        start = time.perf_counter()
        squad_answers.write_predictions(examples, features, results, 20, 30, True, *paths)
        elapsed = time.perf_counter() - start
    print(f"post-processing: {len(features)} features of {len(examples)} examples in "
          f"{elapsed:.2f} s ({len(features) / elapsed:.0f} features/s)")


def main(_):
    rounds, calls, count = ((2, 1, 500) if FLAGS.quick
                            else (FLAGS.rounds, FLAGS.calls, FLAGS.features))
    predictors = build_predictors()
    speeds = time_model(predictors, rounds, calls)
    print(f"BertSpanModel, BERT-Base shapes, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, "
          f"median of {rounds} rounds x {calls} calls")
    print(f"{'configuration':<16} {'features/s':>10} {'ms/feature':>11} {'vs float32':>10}")
    for name, speed in speeds.items():
        ratio = speed / speeds["float32"] if "float32" in speeds else float("nan")
        print(f"{name:<16} {speed:>10.2f} {1000 / speed:>11.1f} {ratio:>10.2f}x")
    time_postprocessing(count)


if __name__ == "__main__":
    app.run(main)
