"""The paper's pre-training ablations (Devlin et al. 2019, Tables 5 and 8) at small scale, on
real text: pre-train one small BERT per variant with the same budget and seed, then fine-tune
each on MRPC and SST-2 over several seeds, and print tables shaped like the paper's.

  python benchmarks/bench_paper_ablations.py --work_dir=/tmp/ablations          # the real run
  python benchmarks/bench_paper_ablations.py --work_dir=/tmp/ablations_smoke --model=tiny \\
      --train_steps=300 --corpus_mb=1 --finetune_seeds=1 --max_train_examples=512  # smoke
  python benchmarks/bench_paper_ablations.py --model=base --work_dir=...   # BERT-Base shapes

Everything goes through the user's scripts: wikiextractor_to_text.py turns
../shared/data/enwiki_2015_extract (real Wikipedia, 964 articles) into the corpus;
create_pretraining_data.py makes each variant's records (--pretraining_objective,
--mask_proportions); run_pretraining.py pre-trains; run_classifier.py fine-tunes from each
export/ (bert_config.json carries causal_attention for the left-to-right model).
Held-out: WikiText-2's validation text (../shared/data/wikitext2), masked 100/0/0 so that every
bidirectional variant answers the same question (predict a hidden token); the LTR model's
figure is its next-token accuracy on the same text, another question.

Resumable: every stage writes its outputs atomically under --work_dir and is skipped when they
are there; an interrupted run_pretraining.py or run_classifier.py resumes from its checkpoints.
Rerun the same command after an interruption. Intervals are mean ± t(0.975, n-1)·s/√n over the
fine-tuning seeds (the pre-training seed is fixed: they show fine-tuning noise only).
"""
import argparse
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
VOCAB = DATA / "vocab" / "bert-base-uncased" / "vocab.txt"
sys.path.insert(0, str(ROOT))  # this checkout's modeling/, for the sentence splitter

# name -> (create_pretraining_data flags, run_pretraining --pretraining_objective)
VARIANTS = {
    "bert": ([], "mlm_nsp"),  # 80/10/10, masked LM + next sentence: both tables' first row
    "no_nsp": (["--pretraining_objective=mlm"], "mlm"),
    "ltr_no_nsp": (["--pretraining_objective=ltr"], "ltr"),
    "mask_100_0_0": (["--mask_proportions=100,0,0"], "mlm_nsp"),
    "mask_80_0_20": (["--mask_proportions=80,0,20"], "mlm_nsp"),
    "mask_80_20_0": (["--mask_proportions=80,20,0"], "mlm_nsp"),
    "mask_0_20_80": (["--mask_proportions=0,20,80"], "mlm_nsp"),
    "mask_0_0_100": (["--mask_proportions=0,0,100"], "mlm_nsp"),
}
TABLE_5 = ("bert", "no_nsp", "ltr_no_nsp")
TABLE_8 = ("bert", "mask_100_0_0", "mask_80_0_20", "mask_80_20_0", "mask_0_20_80",
           "mask_0_0_100")
MODELS = {  # name -> bert_config.json sizes
    "tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                 intermediate_size=512),
    "mini": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4,
                 intermediate_size=1024),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                 intermediate_size=3072),
}
# The paper's figures (BERT-Base, dev sets), printed beside ours for the shape, not to compare:
# Table 5 MRPC and SST-2 accuracy, Table 8 MNLI-m accuracy.
PAPER_TABLE_5 = {"bert": (86.7, 92.7), "no_nsp": (86.5, 92.6), "ltr_no_nsp": (77.5, 92.1)}
PAPER_TABLE_8 = {"bert": 84.2, "mask_100_0_0": 84.3, "mask_80_0_20": 84.1,
                 "mask_80_20_0": 84.4, "mask_0_20_80": 83.7, "mask_0_0_100": 83.6}
TASKS = ("MRPC", "SST-2")
_T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
          9: 2.262}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work_dir", required=True, help="Where every stage writes; rerun "
                        "the same command to resume.")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"Comma-separated, of {', '.join(VARIANTS)}.")
    parser.add_argument("--model", default="mini", choices=sorted(MODELS))
    parser.add_argument("--corpus_mb", type=float, default=0,
                        help="Use the first articles of the extract up to this many MB; 0: all.")
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--train_steps", type=int, default=2000,
                        help="Pre-training steps of every variant: the budget.")
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=12345, help="Pre-training seed (data, "
                        "weights), the same for every variant.")
    parser.add_argument("--finetune_seeds", default="1,2,3")
    parser.add_argument("--finetune_epochs", type=float, default=3.0)
    parser.add_argument("--finetune_learning_rate", type=float, default=1e-4)
    parser.add_argument("--max_train_examples", type=int, default=0,
                        help="Fine-tune on the first N training examples of each task; 0: all.")
    parser.add_argument("--heldout_batches", type=int, default=100)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.variants.split(",")) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    args.variants = args.variants.split(",")
    args.finetune_seeds = [int(seed) for seed in args.finetune_seeds.split(",")]
    return args


def run(script, *flags, log=None):
    """Runs one of the project's scripts; its stderr goes to `log` (and the tail on failure)."""
    command = [sys.executable, str(ROOT / script), *map(str, flags)]
    with open(log, "a") as stream:
        process = subprocess.run(command, stdout=stream, stderr=subprocess.STDOUT,
                                 env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if process.returncode:
        tail = pathlib.Path(log).read_text().splitlines()[-5:]
        sys.exit(f"{script} failed ({process.returncode}); see {log}:\n" + "\n".join(tail))


def stage(done, what):
    """Whether a stage still has to run (its output `done` absent); says so either way."""
    if pathlib.Path(done).exists():
        print(f"[ablations] {what}: done already", flush=True)
        return False
    print(f"[ablations] {what} ...", flush=True)
    return True


def write_atomically(path, text):
    temp = pathlib.Path(f"{path}.tmp{os.getpid()}")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def wikitext_to_lines(raw_text):
    """WikiText-2's raw text as create_pretraining_data.py's input: a document per article
    (" = Title = " lines), sub-headings dropped, its tokenization's escapes undone,
    paragraphs split into sentences."""
    from modeling.data import wikiextractor
    lines = []
    for line in raw_text.splitlines():
        line = line.strip()
        if re.fullmatch(r"= [^=].* =", line):
            lines.append("")
        elif line and not line.startswith("= "):
            for escape, plain in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")):
                line = line.replace(escape, plain)
            lines.extend(wikiextractor.split_sentences(line))
    return "\n".join(lines).strip("\n") + "\n\n"


def prepare_corpora(args, work):
    corpus, heldout = work / "enwiki.txt", work / "wikitext2_valid.txt"
    if stage(corpus, "corpus: wikiextractor_to_text.py"):
        whole = work / "enwiki_all.txt"
        run("wikiextractor_to_text.py", f"--input_file={DATA / 'enwiki_2015_extract/AA/wiki_*'}",
            f"--output_file={whole}", log=work / "corpus.log")
        text = whole.read_text(encoding="utf-8")
        if args.corpus_mb:
            cut = text.find("\n\n", int(args.corpus_mb * 1e6))
            text = text if cut < 0 else text[:cut + 2]
        write_atomically(corpus, text)
        whole.unlink()
    if stage(heldout, "held-out text: WikiText-2 validation"):
        raw = (DATA / "wikitext2/wiki.valid.raw").read_text(encoding="utf-8")
        write_atomically(heldout, wikitext_to_lines(raw))
    return corpus, heldout


def data_flags(args, vocab):
    return [f"--vocab_file={vocab}", f"--max_seq_length={args.max_seq_length}",
            "--max_predictions_per_seq=20", f"--random_seed={args.seed}", "--num_workers=2"]


def pretrain_variant(args, work, name, corpus, config):
    data, objective = VARIANTS[name]
    folder = work / name
    folder.mkdir(exist_ok=True)
    records = folder / "train.tfrecord"
    if stage(records, f"{name}: create_pretraining_data.py"):
        run("create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={records}",
            f"--dupe_factor={args.dupe_factor}", *data_flags(args, VOCAB), *data,
            log=folder / "data.log")
    export = folder / "pretraining/export/bert_config.json"
    if stage(export, f"{name}: run_pretraining.py, {args.train_steps} steps"):
        start = time.time()
        run("run_pretraining.py", f"--input_file={records}", f"--bert_config_file={config}",
            f"--output_dir={folder / 'pretraining'}", f"--max_seq_length={args.max_seq_length}",
            "--max_predictions_per_seq=20", f"--train_batch_size={args.train_batch_size}",
            f"--num_train_steps={args.train_steps}",
            f"--num_warmup_steps={args.train_steps // 10}",
            f"--learning_rate={args.learning_rate}", f"--seed={args.seed}", "--do_train",
            f"--pretraining_objective={objective}", "--save_checkpoints_steps=200",
            "--iterations_per_loop=100", log=folder / "pretraining.log")
        write_atomically(folder / "pretraining_seconds.txt", f"{time.time() - start:.0f}\n")
    return folder / "pretraining/export"


def heldout_accuracy(args, work, name, heldout, export):
    """The variant's accuracy on the held-out text: masked tokens (100/0/0) or next tokens."""
    objective = VARIANTS[name][1]
    records = work / f"heldout_{objective}.tfrecord"
    if stage(records, f"held-out records for {objective}"):
        masking = [] if objective == "ltr" else ["--mask_proportions=100,0,0"]
        run("create_pretraining_data.py", f"--input_file={heldout}", f"--output_file={records}",
            "--dupe_factor=1", f"--pretraining_objective={objective}", *masking,
            *data_flags(args, VOCAB), log=work / "heldout.log")
    output = work / name / "pretraining"
    results = output / "eval_results.txt"
    if stage(results, f"{name}: held-out evaluation"):
        run("run_pretraining.py", f"--input_file={records}",
            f"--bert_config_file={export / 'bert_config.json'}", f"--output_dir={output}",
            f"--max_seq_length={args.max_seq_length}", "--max_predictions_per_seq=20",
            "--eval_batch_size=32", f"--max_eval_steps={args.heldout_batches}", "--do_eval",
            f"--pretraining_objective={objective}", log=work / name / "heldout.log")
    values = dict(line.split(" = ") for line in results.read_text().splitlines())
    key = "next_token_accuracy" if objective == "ltr" else "masked_lm_accuracy"
    return float(values[key])


def task_data(args, work, task):
    """The task's folder, or a copy with its first --max_train_examples training rows."""
    if not args.max_train_examples:
        return DATA / "glue" / task
    folder = work / f"glue_{task}_{args.max_train_examples}"
    if not (folder / "dev.tsv").exists():
        folder.mkdir(exist_ok=True)
        lines = (DATA / "glue" / task / "train.tsv").read_text(encoding="utf-8-sig").splitlines()
        write_atomically(folder / "train.tsv",
                         "\n".join(lines[:args.max_train_examples + 1]) + "\n")
        for name in ("test.tsv", "dev.tsv"):  # dev last: its presence says the copy is whole
            write_atomically(folder / name, (DATA / "glue" / task / name).read_text("utf-8"))
    return folder


def fine_tune(args, work, name, export, task, seed):
    output = work / name / f"{task}_seed{seed}"
    results = output / "eval_results.txt"
    if stage(results, f"{name}: run_classifier.py {task}, seed {seed}"):
        run("run_classifier.py", f"--task_name={task}", f"--data_dir={task_data(args, work, task)}",
            f"--bert_config_file={export / 'bert_config.json'}", f"--vocab_file={VOCAB}",
            f"--init_checkpoint={export / 'bert_model.ckpt'}", f"--output_dir={output}",
            "--do_train", "--do_eval", f"--max_seq_length={args.max_seq_length}",
            "--train_batch_size=32", f"--learning_rate={args.finetune_learning_rate}",
            f"--num_train_epochs={args.finetune_epochs}", f"--seed={seed}",
            "--save_checkpoints_steps=500", log=work / name / f"{task}_seed{seed}.log")
    values = dict(line.split(" = ") for line in results.read_text().splitlines())
    return 100 * float(values["eval_accuracy"])


def interval(values):
    """'mean ± half-width' (95%, Student's t) of the seeds' values; the value alone for one."""
    mean = statistics.mean(values)
    if len(values) < 2:
        return f"{mean:.1f} (n=1)"
    half = _T_975.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.1f} ± {half:.1f}"


def print_tables(args, results):
    seeds = len(args.finetune_seeds)
    print(f"\nModel {args.model} ({MODELS[args.model]}), {args.train_steps} pre-training steps "
          f"of {args.train_batch_size} x {args.max_seq_length}, seed {args.seed}; fine-tuning "
          f"dev accuracy over {seeds} seed(s), mean ± 95% t-interval. Held-out: WikiText-2 "
          f"validation, masked-token accuracy (next-token accuracy for LTR).\n")
    print("Table 5 (pre-training tasks)")
    print("| model | held-out acc | MRPC | SST-2 | paper MRPC / SST-2 (BERT-Base) |")
    print("|---|---:|---:|---:|---:|")
    labels = {"bert": "BERT (MLM + NSP)", "no_nsp": "No NSP", "ltr_no_nsp": "LTR & No NSP"}
    for name in TABLE_5:
        if name in results:
            row = results[name]
            print(f"| {labels[name]} | {100 * row['heldout']:.1f} | {interval(row['MRPC'])} | "
                  f"{interval(row['SST-2'])} | {PAPER_TABLE_5[name][0]} / "
                  f"{PAPER_TABLE_5[name][1]} |")
    print("\nTable 8 (masking procedures: MASK / SAME / RND)")
    print("| MASK | SAME | RND | held-out acc | MRPC | SST-2 | paper MNLI-m (BERT-Base) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for name in TABLE_8:
        if name in results:
            row = results[name]
            proportions = (80, 10, 10) if name == "bert" else name.split("_")[1:]
            print(f"| {' | '.join(map(str, proportions))} | {100 * row['heldout']:.1f} | "
                  f"{interval(row['MRPC'])} | {interval(row['SST-2'])} | "
                  f"{PAPER_TABLE_8[name]} |")


def main(argv=None):
    args = parse_args(argv)
    work = pathlib.Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    settings = work / "settings.json"
    chosen = {k: v for k, v in vars(args).items() if k not in ("variants", "work_dir")}
    if settings.exists() and json.loads(settings.read_text()) != chosen:
        sys.exit(f"{settings} holds another run's settings; use another --work_dir")
    write_atomically(settings, json.dumps(chosen, indent=1, sort_keys=True))
    config = work / "bert_config.json"
    write_atomically(config, json.dumps(dict(
        vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
        **MODELS[args.model]), indent=1))
    corpus, heldout = prepare_corpora(args, work)
    results = {}
    for name in args.variants:
        export = pretrain_variant(args, work, name, corpus, config)
        row = {"heldout": heldout_accuracy(args, work, name, heldout, export)}
        for task in TASKS:
            row[task] = [fine_tune(args, work, name, export, task, seed)
                         for seed in args.finetune_seeds]
        results[name] = row
        write_atomically(work / "results.json", json.dumps(results, indent=1))
    print_tables(args, results)


if __name__ == "__main__":
    main()
