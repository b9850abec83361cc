"""Latency of the exported classifier SavedModel against the bare forward pass, on the CPU.

A `BertClassifier` at BERT-Base shapes (random weights, 2 labels) is exported as run_classifier
exports it (`modeling.export.ClassifierExport` + `save_versioned`: the in-graph WordPiece
tokenizer and packer, then the model), loaded back with `tf.saved_model.load`, and its
`serving_default` signature is called on raw strings. Its peer is the bare forward pass exactly
as `bench_forward.py` times it: a compiled `tf.function` of the same weights' `BertModel` with a
fixed int32 [B, 128] input signature (its helpers are imported from there).

Jobs, each timed request by request, outputs copied to numpy:
  serving    `serving_default` on B texts that fill all 128 tokens after WordPiece (the start of
             SQuAD v1.1 dev paragraphs), tokenization and packing included.
  bare       the bare forward on random int32 [B, 128] ids.
  ids        the SavedModel's `ids` signature on those same ids: the SavedModel without the
             tokenizer (informational; it separates the tokenizer's cost from the rest).
  tokenize   the tokenizer and packer alone, in-process, on serving's texts (informational).
  short      `serving_default` on one text of 12 words (SQuAD questions), which the signature
             trims to its length before the forward pass (informational).
at batch 1 and at --batch_size (32). Each round runs --requests batch-1 requests of every job,
then --batch_requests of every large-batch job, one request per job in turn, the order rotating,
so that noise from the shared machine hits serving and bare alike. The tables give p50 and p99
over all rounds, sentences/s (B x requests / their total time) and serving/bare of the p50s;
the ratio of every round's p50s is printed too, with the CPU other processes used in it.

Usage:
  python benchmarks/bench_serving.py                          # README's figures, ~5 min
  python benchmarks/bench_serving.py --precision=mixed_bfloat16
  python benchmarks/bench_serving.py --rounds=1 --requests=3 --batch_requests=1   # smoke test
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import bench_forward  # noqa: E402  (beside this file; defines absl flags this script ignores)
from modeling import export  # noqa: E402
from modeling.text import tokenization  # noqa: E402
from modeling.models.classifier import BertClassifier  # noqa: E402

SEQ_LENGTH = 128
SHORT_WORDS = 12
QUIET = 0.15  # cores used by other processes below which a round counts as quiet


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--precision", choices=["float32", "mixed_bfloat16"], default="float32",
                        help="Keras dtype policy set before the model is built.")
    parser.add_argument("--rounds", type=int, default=5, help="Interleaved rounds.")
    parser.add_argument("--requests", type=int, default=60,
                        help="Batch-1 requests of each job per round.")
    parser.add_argument("--batch_requests", type=int, default=6,
                        help="Requests of each job at --batch_size per round.")
    parser.add_argument("--batch_size", type=int, default=32, help="The large batch.")
    parser.add_argument("--warmup", type=int, default=3, help="Untimed calls of each job first.")
    parser.add_argument("--vocab", default=str(SHARED / "data/vocab/bert-base-uncased/vocab.txt"),
                        help="Uncased WordPiece vocab of BERT-Base (30522 tokens).")
    parser.add_argument("--squad", default=str(SHARED / "data/squad/dev-v1.1.json"),
                        help="SQuAD v1.1 JSON whose paragraphs and questions are the texts.")
    args = parser.parse_args()
    for name in ("rounds", "requests", "batch_requests", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("vocab", "squad"):
        if not os.path.exists(getattr(args, name)):
            parser.error(f"--{name}: {getattr(args, name)} does not exist")
    return args


def make_texts(squad_file, vocab_file, count):
    """Up to `count` texts of each kind from SQuAD: (long, short), lists of str.

    A long text is the shortest run of a paragraph's first words that makes at least
    SEQ_LENGTH - 2 WordPiece tokens (with "[CLS]" and "[SEP]", every row is full); a short
    text is a question's first SHORT_WORDS words.
    """
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    with open(squad_file, encoding="utf-8") as reader:
        articles = json.load(reader)["data"]
    long_texts, short_texts = [], []
    for paragraph in (p for article in articles for p in article["paragraphs"]):
        words, tokens = [], 0
        # The basic tokenizer splits on whitespace first, so pieces add up word by word.
        for word in paragraph["context"].split():
            words.append(word)
            tokens += len(tokenizer.tokenize(word))
            if tokens >= SEQ_LENGTH - 2:
                if len(long_texts) < count:
                    long_texts.append(" ".join(words))
                break
        for question in paragraph["qas"]:
            words = question["question"].split()
            if len(words) >= SHORT_WORDS and len(short_texts) < count:
                short_texts.append(" ".join(words[:SHORT_WORDS]))
        if len(long_texts) == count and len(short_texts) == count:
            break
    return long_texts, short_texts


def requests_of(texts, batch_size, count):
    """`count` string tensors [batch_size], consecutive slices of `texts` (cycled)."""
    return [tf.constant([texts[(i * batch_size + j) % len(texts)] for j in range(batch_size)])
            for i in range(count)]


def build_classifier(precision):
    """A BERT-Base `BertClassifier` (2 labels, seeded random weights) under `precision`."""
    keras.mixed_precision.set_dtype_policy(precision)
    try:
        keras.utils.set_random_seed(0)
        model = BertClassifier(bench_forward.BERT_BASE, num_labels=2)
        # Builds the weights (a pass at T=8). In a tf.function: called eagerly under
        # mixed_bfloat16, BertClassifier adds the bias autocast to bfloat16 to float32 logits.
        tf.function(model)(dict(zip(
            ("input_ids", "input_mask", "token_type_ids"),
            bench_forward.random_inputs(1, 8, bench_forward.BERT_BASE.vocab_size))))
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    return model


class Job:
    """Zero-argument calls cycled one per request; `time()` runs the next and returns seconds."""

    def __init__(self, calls):
        self.calls, self.next = calls, 0

    def time(self):
        call = self.calls[self.next % len(self.calls)]
        self.next += 1
        begin = time.perf_counter()
        for output in tf.nest.flatten(call()):
            output.numpy()  # the work is done, and the result is on the host
        return time.perf_counter() - begin


def build_jobs(args, classifier, serving, ids_signature, module):
    """{(name, batch): Job} for batch 1 and args.batch_size."""
    count = max(64, 2 * args.batch_size)  # distinct texts per kind
    long_texts, short_texts = make_texts(args.squad, args.vocab, count)
    if len(long_texts) < count or len(short_texts) < count:
        raise ValueError(f"{args.squad}: {len(long_texts)} paragraphs of >= {SEQ_LENGTH - 2} "
                         f"tokens and {len(short_texts)} questions of >= {SHORT_WORDS} words, "
                         f"{count} of each needed")
    pack = tf.function(lambda texts: module.packer(module.tokenizer(texts)),
                       input_signature=[tf.TensorSpec([None], tf.string)])
    jobs = {}
    for batch in (1, args.batch_size):
        texts = requests_of(long_texts, batch, count // batch)
        shortest = min(int(tf.reduce_min(tf.reduce_sum(pack(t)["input_mask"], axis=1)))
                       for t in texts)
        if shortest != SEQ_LENGTH:  # every row full: no trimming, the bare forward's shapes
            raise ValueError(f"a serving text packs to {shortest} < {SEQ_LENGTH} tokens")
        forward = bench_forward.compiled_forward(classifier.bert, batch, SEQ_LENGTH, False)
        inputs = bench_forward.random_inputs(batch, SEQ_LENGTH,
                                             bench_forward.BERT_BASE.vocab_size)
        ids = dict(zip(("input_ids", "input_mask", "segment_ids"), inputs))
        # Default arguments bind this batch's values: the loop rebinds the names.
        jobs[("serving", batch)] = Job([lambda t=t: serving(text_a=t) for t in texts])
        jobs[("bare", batch)] = Job([lambda f=forward, x=inputs: f(*x)])
        jobs[("ids", batch)] = Job([lambda x=ids: ids_signature(**x)])
        jobs[("tokenize", batch)] = Job([lambda t=t: pack(t) for t in texts])
    short = requests_of(short_texts, 1, count)
    tokens = np.mean([int(tf.reduce_sum(pack(t)["input_mask"])) for t in short])
    print(f"texts: {SEQ_LENGTH} tokens (long), {tokens:.1f} on average ({SHORT_WORDS} words)")
    jobs[("short", 1)] = Job([lambda t=t: serving(text_a=t) for t in short])
    return jobs


def run_rounds(args, jobs):
    """Times the jobs in interleaved rounds: ({key: [[seconds] per round]}, [cores of others])."""
    samples = {key: [[] for _ in range(args.rounds)] for key in jobs}
    groups = [([key for key in jobs if key[1] == 1], args.requests),
              ([key for key in jobs if key[1] == args.batch_size], args.batch_requests)]
    loads = []
    for round_index in range(args.rounds):
        others, start = bench_forward.cpu_seconds_of_others(), time.perf_counter()
        for keys, requests in groups:
            for request in range(requests):
                shift = (round_index + request) % len(keys)  # no job always goes first
                for key in keys[shift:] + keys[:shift]:
                    samples[key][round_index].append(jobs[key].time())
        seconds = time.perf_counter() - start
        # Clock ticks make a quiet round's share come out a hair below 0.
        loads.append(max(0.0, (bench_forward.cpu_seconds_of_others() - others) / seconds))
        print(f"  round {round_index + 1}/{args.rounds}: {seconds:5.1f} s, other processes "
              f"used {loads[-1]:.2f} cores", flush=True)
    return samples, loads


def stats(rounds, batch):
    """(p50 ms, p99 ms, sentences/s) of the samples of all rounds."""
    seconds = np.concatenate(rounds)
    p50, p99 = np.percentile(seconds, [50, 99]) * 1e3
    return p50, p99, batch * len(seconds) / seconds.sum()


def print_results(args, samples, loads):
    quiet = sum(load < QUIET for load in loads)
    print(f"\n{args.precision}, T={SEQ_LENGTH}, {args.rounds} rounds ({quiet} quiet: other "
          f"processes under {QUIET} cores); serving = SavedModel serving_default on text, "
          f"tokenization included; bare = bench_forward's compiled forward on int32 ids")
    print(f"  {'batch':>5} {'requests':>8} | {'serving p50':>11} {'p99':>8} {'sent/s':>7} | "
          f"{'bare p50':>8} {'p99':>8} {'seq/s':>7} | {'serving/bare p50':>16}")
    for batch in (1, args.batch_size):
        serving, bare = samples[("serving", batch)], samples[("bare", batch)]
        s50, s99, s_rate = stats(serving, batch)
        b50, b99, b_rate = stats(bare, batch)
        print(f"  {batch:>5} {sum(map(len, serving)):>8} | {s50:>11.1f} {s99:>8.1f} "
              f"{s_rate:>7.2f} | {b50:>8.1f} {b99:>8.1f} {b_rate:>7.2f} | {s50 / b50:>16.3f}")
        ratios = [np.median(s) / np.median(b) for s, b in zip(serving, bare)]
        print(f"        serving/bare p50 per round: {' '.join(f'{r:.3f}' for r in ratios)}")

    print("\ninformational, same rounds:")
    print(f"  {'job':<46} {'batch':>5} {'p50 ms':>8} {'p99 ms':>8} {'sent/s':>8} "
          f"{'p50 / bare p50':>14}")
    names = {"ids": "SavedModel `ids` signature, same ids as bare",
             "tokenize": "tokenizer + packer alone, serving's texts",
             "short": f"SavedModel serving_default, {SHORT_WORDS}-word text"}
    for name in ("ids", "tokenize", "short"):
        for batch in (1, args.batch_size):
            if (name, batch) not in samples:
                continue
            p50, p99, rate = stats(samples[(name, batch)], batch)
            bare50 = stats(samples[("bare", batch)], batch)[0]
            print(f"  {names[name]:<46} {batch:>5} {p50:>8.1f} {p99:>8.1f} {rate:>8.2f} "
                  f"{p50 / bare50:>14.3f}")


def main():
    args = parse_args()
    tf.get_logger().setLevel("ERROR")
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs, "
          f"precision {args.precision}")
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg(), flush=True)

    classifier = build_classifier(args.precision)
    module = export.ClassifierExport(classifier, args.vocab, do_lower_case=True,
                                     max_seq_length=SEQ_LENGTH, label_names=["0", "1"],
                                     pair_task=False)
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as export_dir:
        begin = time.perf_counter()
        directory = export.save_versioned(module, export_dir)
        saved = time.perf_counter() - begin
        loaded = tf.saved_model.load(directory)
        print(f"exported in {saved:.1f} s, loaded in {time.perf_counter() - begin - saved:.1f} s:"
              f" {directory}", flush=True)
        jobs = build_jobs(args, classifier, loaded.signatures["serving_default"],
                          loaded.signatures["ids"], module)
        for key, job in jobs.items():  # traces, runs grappler, warms oneDNN's caches
            begin = time.perf_counter()
            for _ in range(args.warmup):
                job.time()
            print(f"  warm-up {key[0]:<8} batch {key[1]:>2}: {time.perf_counter() - begin:5.1f} s",
                  flush=True)
        samples, loads = run_rounds(args, jobs)
    print_results(args, samples, loads)
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
