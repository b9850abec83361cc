"""What the XLA cache costs a run at its start and end, by the number of entries it holds.

  python benchmarks/bench_xla_cache_start.py                      # 1,000 and 4,000 entries
  python benchmarks/bench_xla_cache_start.py --entries=500,8000 --rounds=7

Every script enables `--xla_cache_dir` (`modeling.runtime.compilation_cache`) before its work:
the entries found whole are put in a private directory that TensorFlow reads, and at exit the
new ones are published and the private directory removed. A cache only grows: a user's holds
thousands of entries after a few dozen runs (this machine's: 4,059, 280 MB). The benchmark
fills a cache with entries of the size real ones have (--kilobytes, the mean of this
machine's), then times `enable` and `publish` as the library does them (hard links) and with
each entry copied instead (how the library did it before 2026-11-28), alternating, medians of
--rounds. The files are in the page cache, as for runs in a row; a first run after a reboot
also reads every entry from disk when it copies (4.45 s measured for 280 MB).
"""
import argparse
import atexit
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from modeling.runtime import compilation_cache  # noqa: E402


def entry(size):
    """A cache entry's layout: three length-delimited fields (key, HLO, machine code)."""
    def field(number, payload):
        header, length = bytes([number << 3 | 2]), len(payload)
        while length > 0x7F:
            header += bytes([length & 0x7F | 0x80])
            length >>= 7
        return header + bytes([length]) + payload
    return (field(1, b"key" * 20) + field(2, os.urandom(size // 3))
            + field(3, os.urandom(size - size // 3)))


def start_and_end(root, linked):
    """Seconds of `enable` and of `publish` (nothing new to publish), one process's worth."""
    os.environ.pop("TF_XLA_FLAGS", None)
    saved = compilation_cache._link_or_copy
    if not linked:
        compilation_cache._link_or_copy = shutil.copyfile
    try:
        started = time.perf_counter()
        shared = compilation_cache.enable(str(root))
        enabled = time.perf_counter()
        atexit.unregister(compilation_cache.publish)  # published here, timed
        private = os.environ["TF_XLA_FLAGS"].split("=", 1)[1]
        compilation_cache.publish(private, shared, set(compilation_cache._entries(private)))
        return enabled - started, time.perf_counter() - enabled
    finally:
        compilation_cache._link_or_copy = saved
        os.environ.pop("TF_XLA_FLAGS", None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", default="1000,4000",
                        help="comma-separated cache sizes, in entries")
    parser.add_argument("--kilobytes", type=int, default=69, help="each entry's size")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from bench_finetuning import matmul_peaks
    peaks = matmul_peaks()
    print(f"{os.cpu_count()} cores; matmul peak bfloat16 {peaks['bfloat16']:.0f}, float32 "
          f"{peaks['float32']:.0f} GFLOP/s; entries of {args.kilobytes} KB, medians of "
          f"{args.rounds}")
    print(f"| entries | MB | start, linked s | start, copied s | end, linked s | end, copied s "
          f"| start and end, copied / linked |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for count in [int(n) for n in args.entries.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench_xla_cache_") as root:
            shared = pathlib.Path(root) / compilation_cache.machine_key()
            shared.mkdir()
            for index in range(count):
                (shared / f"xla_compile_cache__{index}__XLA_CPU_JIT.pb").write_bytes(
                    entry(args.kilobytes * 1024))
            times = {True: [], False: []}
            for _ in range(args.rounds):
                for linked in (True, False):
                    times[linked].append(start_and_end(root, linked))
            median = {(linked, part): statistics.median(t[part] for t in times[linked])
                      for linked in times for part in (0, 1)}
            ratio = statistics.median(
                sum(copied) / sum(linked) for copied, linked in zip(times[False], times[True]))
            print(f"| {count:,} | {count * args.kilobytes / 1024:.0f} | {median[True, 0]:.3f} "
                  f"| {median[False, 0]:.3f} | {median[True, 1]:.3f} | {median[False, 1]:.3f} "
                  f"| {ratio:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
