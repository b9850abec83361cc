"""Speed and memory of create_pretraining_data on a synthetic corpus, side by side.

  python benchmarks/bench_create_pretraining_data.py                 # 20 MB, 3 rounds
  python benchmarks/bench_create_pretraining_data.py --megabytes=200 --configs=stream1,stream2 \
      --repeats=1                                                    # memory stays flat

Each configuration runs in a fresh child process (its peak RSS, workers included, is its own);
the configurations are interleaved round by round and the medians reported. The original
cannot run beside it here, so its figures are the ones measured on this machine class and
quoted in issue 3: 30 s and 0.8 GB for a 2 MB corpus (62,780 instances).
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
ORIGINAL_MB_PER_S = 2.0 / 30.0
ORIGINAL_RSS_GB_AT_2MB = 0.8
CONFIGS = {  # name: (num_workers, streaming chunk MB)
    "exact": (1, 0),
    "workers2": (2, 0),
    "stream1": (1, 2),
    "stream2": (2, 2),
}


def child(args):
    """Runs one configuration in this process and prints its figures as JSON."""
    sys.path.insert(0, str(ROOT))
    from modeling.data import pretraining, pretraining_pipeline
    workers, chunk_mb = CONFIGS[args.child]
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        _, instances = pretraining_pipeline.create_pretraining_data(
            args.corpus, args.output, args.vocab, True, pretraining.InstanceOptions(),
            12345, 10, num_workers=workers, chunk_bytes=int(chunk_mb * 1e6),
            progress_stream=quiet)
    seconds = time.perf_counter() - start
    # Linux reports kB; for worker processes (any run but the exact one uses a pool) only the
    # largest one's peak, so count it once per worker.
    parent_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pooled = workers > 1 or chunk_mb > 0
    worker_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if pooled else 0
    print(json.dumps({"seconds": seconds, "instances": instances,
                      "rss_gb": (parent_kb + workers * worker_kb) / 1e6}))


def make_corpus(megabytes, vocab, work_dir):
    corpus = work_dir / f"corpus_{megabytes}mb.txt"
    if not corpus.exists():
        subprocess.run([sys.executable, str(SHARED / "tools/make_corpus.py"), "--vocab", vocab,
                        "--out", str(corpus), "--megabytes", str(megabytes), "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL)
    return corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--work_dir", default="/tmp/bench_create_pretraining_data")
    parser.add_argument("--vocab", default=str(SHARED / "refs/vocab/uncased_vocab.txt"))
    parser.add_argument("--child", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    work_dir = pathlib.Path(args.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    corpus = make_corpus(args.megabytes, args.vocab, work_dir)
    size_mb = corpus.stat().st_size / 1e6
    names = args.configs.split(",")
    runs = {name: [] for name in names}
    for round_index in range(args.repeats):
        for name in names:  # interleaved: a noisy neighbour hits every configuration alike
            output = work_dir / f"{name}.tfrecord"
            result = subprocess.run(
                [sys.executable, __file__, "--child", name, "--corpus", str(corpus),
                 "--output", str(output), "--vocab", args.vocab],
                check=True, capture_output=True, text=True)
            runs[name].append(json.loads(result.stdout.strip().splitlines()[-1]))
            output.unlink()
            print(f"round {round_index + 1} {name}: {runs[name][-1]}", file=sys.stderr)

    print(f"corpus {size_mb:.1f} MB ({corpus}), dupe_factor 10, max_seq_length 128, "
          f"{args.repeats} rounds, medians")
    print(f"{'config':10} {'workers':>7} {'chunk MB':>8} {'seconds':>8} {'MB/s':>6} "
          f"{'inst/s':>7} {'peak RSS GB*':>12} {'vs original MB/s':>16}")
    print(f"{'original':10} {1:>7} {'-':>8} {'-':>8} {ORIGINAL_MB_PER_S:>6.3f} "
          f"{62780 / 30:>7.0f} {ORIGINAL_RSS_GB_AT_2MB:>9.2f}@2MB {1.0:>15.1f}x")
    for name in names:
        workers, chunk_mb = CONFIGS[name]
        seconds = statistics.median(run["seconds"] for run in runs[name])
        rss = statistics.median(run["rss_gb"] for run in runs[name])
        instances = runs[name][0]["instances"]
        print(f"{name:10} {workers:>7} {chunk_mb or '-':>8} {seconds:>8.1f} "
              f"{size_mb / seconds:>6.3f} {instances / seconds:>7.0f} {rss:>12.2f} "
              f"{size_mb / seconds / ORIGINAL_MB_PER_S:>15.1f}x")
    print("* the parent's peak plus the largest worker process's peak once per worker")
    if "exact" in runs and "workers2" in runs:
        ratio = (statistics.median(r["seconds"] for r in runs["exact"])
                 / statistics.median(r["seconds"] for r in runs["workers2"]))
        print(f"scaling, 2 workers vs 1: {ratio:.2f}x")


if __name__ == "__main__":
    main()
