"""Speed of the in-graph GraphTokenizer against the Python FullTokenizer, on the same lines.

  python benchmarks/bench_tokenizer.py                       # 4 MB synthetic + refs corpus
  python benchmarks/bench_tokenizer.py --megabytes=20 --batch_sizes=1024 --repeats=5

Each line of a corpus is one string (split on "\\n" only, as refs/README.md says). The Python
tokenizer runs `tokenize` + `convert_tokens_to_ids` line by line; the graph tokenizer runs on
batches of lines, already tensors, inside one `tf.function` with an input signature. Every
figure is the median of --repeats passes after a warm-up pass (which also fills the Python
tokenizer's word cache and traces the function); "python, first pass" is one pass of a new
FullTokenizer, cache empty. tensorflow-text's FastBertTokenizer, which is
not exact, is timed for reference, and so is the FastWordpieceTokenizer that GraphTokenizer
ends with, alone on the raw lines: the floor of GraphTokenizer's time. Each tokenizer's
mismatching lines against FullTokenizer are counted.

The stress corpora append one word to each of the first --stress_lines synthetic lines, so that
every line takes one of GraphTokenizer's slower ways: an accented word (the per-character
table), Hangul (characters that give several code points) or Greek capitals ending in a final
sigma. "cpu ms/MB" is the process CPU time per MB (all threads), steadier than the wall-clock
figures when the machine is shared.
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from modeling.text import tokenization  # noqa: E402
from modeling.text.graph_tokenizer import GraphTokenizer  # noqa: E402


def make_corpus(megabytes, vocab, work_dir):
    corpus = work_dir / f"corpus_{pathlib.Path(vocab).stem}_{megabytes:g}mb.txt"
    if not corpus.exists():
        subprocess.run([sys.executable, str(SHARED / "tools/make_corpus.py"), "--vocab", vocab,
                        "--out", str(corpus), "--megabytes", str(megabytes), "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL)
    return corpus


def read_lines(path):
    with open(path, encoding="utf-8", newline="") as reader:
        return reader.read().split("\n")


def timed(run, repeats):
    """Runs `run` once to warm up, then `repeats` times; returns median (wall, CPU) seconds."""
    run()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def python_ids(tokenizer, lines):
    return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line)) for line in lines]


def run_batches(function, batches):
    """Calls `function` on every batch; returns the outputs (eager: already computed)."""
    return [function(batch) for batch in batches]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=4)
    parser.add_argument("--batch_sizes", default="256,1024")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stress_lines", type=int, default=8192,
                        help="lines of each stress corpus; 0 for none")
    parser.add_argument("--work_dir", default="/tmp/bench_tokenizer")
    parser.add_argument("--vocab", default=str(SHARED / "refs/vocab/uncased_vocab.txt"))
    parser.add_argument("--do_lower_case", default=True,
                        type=lambda value: value.lower() in ("1", "true", "yes"))
    args = parser.parse_args()

    work_dir = pathlib.Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    synthetic = read_lines(make_corpus(args.megabytes, args.vocab, work_dir))
    corpora = {
        f"synthetic {args.megabytes:g} MB": synthetic,
        "refs tokenization": read_lines(SHARED / "refs/tokenization/corpus.txt"),
    }
    for word in ("Ünïcödé", "한국어", "ΟΔΟΣ") if args.stress_lines else ():
        corpora[f"stress: + {word}"] = [
            f"{line} {word}" for line in synthetic[:args.stress_lines]]
    python = tokenization.FullTokenizer(args.vocab, args.do_lower_case)
    start = time.perf_counter()
    graph = GraphTokenizer(args.vocab, args.do_lower_case)
    build_seconds = time.perf_counter() - start
    fast_bert = tf_text.FastBertTokenizer(
        graph.vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=args.do_lower_case)
    wordpiece = tf_text.FastWordpieceTokenizer(graph.vocab, max_bytes_per_word=800,
                                               token_out_type=tf.int32)
    signature = [tf.TensorSpec([None], tf.string)]
    functions = {
        "graph": tf.function(graph.tokenize, input_signature=signature),
        "FastBert": tf.function(fast_bert.tokenize, input_signature=signature),
        "FastWordpiece": tf.function(wordpiece.tokenize, input_signature=signature),
    }
    batch_sizes = [int(size) for size in args.batch_sizes.split(",")]

    print(f"vocab {args.vocab}, do_lower_case={args.do_lower_case}; GraphTokenizer built in "
          f"{build_seconds:.1f} s; median of {args.repeats} passes; "
          f"{os.cpu_count()} CPU cores")
    header = (f"{'corpus':22s} {'tokenizer':26s} {'lines/s':>9s} {'MB/s':>7s} "
              f"{'x python':>9s} {'cpu ms/MB':>10s} {'mismatching lines':>18s}")
    print(header)
    print("-" * len(header))
    for name, lines in corpora.items():
        megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
        # A new tokenizer's first pass fills its word cache; later passes are warm.
        start, start_cpu = time.perf_counter(), time.process_time()
        expected = python_ids(tokenization.FullTokenizer(args.vocab, args.do_lower_case), lines)
        first = (time.perf_counter() - start, time.process_time() - start_cpu)
        python_seconds = timed(lambda: python_ids(python, lines), args.repeats)
        rows = [("python, first pass", first, 0), ("python FullTokenizer", python_seconds, 0)]
        for batch_size in batch_sizes:
            batches = [tf.constant(lines[i:i + batch_size])
                       for i in range(0, len(lines), batch_size)]
            for label, function in functions.items():
                label = f"{label}, batch {batch_size}"
                seconds = timed(lambda: run_batches(function, batches), args.repeats)
                ids = [row for out in run_batches(function, batches) for row in out.to_list()]
                rows.append((label, seconds, sum(a != b for a, b in zip(ids, expected))))
        for label, (seconds, cpu_seconds), mismatches in rows:
            print(f"{name:22s} {label:26s} {len(lines) / seconds:9.0f} "
                  f"{megabytes / seconds:7.2f} {python_seconds[0] / seconds:9.1f} "
                  f"{1000 * cpu_seconds / megabytes:10.1f} {mismatches:18d}")
        print(f"{'':22s} ({len(lines)} lines, {megabytes:.2f} MB)")


if __name__ == "__main__":
    main()
