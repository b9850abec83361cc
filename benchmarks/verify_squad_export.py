"""The served SQuAD answer against run_squad.py's, question by question (issue 26).

Runs `run_squad.py --do_predict --export_dir` as a user does (a subprocess), then asks the
exported SavedModel's text signature every question of the same file, and counts the
questions whose served answer differs from predictions.json (and, for v2.0, whose
`null_score_diff` differs from null_odds.json by more than float32 rounding). With
--lengthen=4 the file is first rewritten so that each context is 4 consecutive paragraphs of
its article joined (every question kept, its answers shifted): contexts 4x longer, read
through more windows.

Usage (the figures in benchmarks/README.md):
  python benchmarks/verify_squad_export.py --predict_file=../shared/data/squad/dev-v1.1.json \
    --bert_config_file=... --vocab_file=... [--init_checkpoint=...] --max_seq_length=128
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLAGS = flags.FLAGS
flags.DEFINE_string("predict_file", None, "A SQuAD json file.")
flags.DEFINE_string("bert_config_file", None, "The model's config.")
flags.DEFINE_string("vocab_file", None, "Its vocabulary.")
flags.DEFINE_string("init_checkpoint", None, "Its checkpoint; random weights if unset. A "
                    "checkpoint without a span head (a pre-trained one) gets a seeded random "
                    "head: the served and the script's answers must agree whatever the weights.")
flags.DEFINE_bool("do_lower_case", True, "As the vocabulary.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0.")
flags.DEFINE_integer("max_seq_length", 384, "run_squad.py's flag.")
flags.DEFINE_integer("doc_stride", 128, "run_squad.py's flag.")
flags.DEFINE_integer("max_query_length", 64, "run_squad.py's flag.")
flags.DEFINE_integer("n_best_size", 20, "run_squad.py's flag.")
flags.DEFINE_integer("max_answer_length", 30, "run_squad.py's flag.")
flags.DEFINE_integer("lengthen", 1, "Join this many consecutive paragraphs of an article.")
flags.DEFINE_integer("limit", 0, "Keep the first N questions (0: all).")
flags.DEFINE_integer("batch_size", 16, "Questions per served request.")
flags.DEFINE_string("work_dir", None, "Where run_squad.py writes; a temporary folder if unset.")
flags.mark_flags_as_required(["predict_file", "bert_config_file", "vocab_file"])


def rewrite(source, target, lengthen, limit):
    """Writes `source` with each context `lengthen` paragraphs long and at most `limit`
    questions; returns the number of questions."""
    data = json.loads(pathlib.Path(source).read_text("utf-8"))
    articles, count = [], 0
    for article in data["data"]:
        paragraphs = []
        for first in range(0, len(article["paragraphs"]), lengthen):
            group = article["paragraphs"][first:first + lengthen]
            context, qas = "", []
            for paragraph in group:
                shift = len(context) + (1 if context else 0)
                context = f"{context} {paragraph['context']}" if context else paragraph["context"]
                for qa in paragraph["qas"]:
                    if limit and count >= limit:
                        break
                    qa = dict(qa, answers=[dict(answer, answer_start=answer["answer_start"] + shift)
                                           for answer in qa.get("answers", [])])
                    qas.append(qa)
                    count += 1
            if qas:
                paragraphs.append({"context": context, "qas": qas})
        if paragraphs:
            articles.append(dict(article, paragraphs=paragraphs))
    pathlib.Path(target).write_text(json.dumps(dict(data, data=articles)), "utf-8")
    return count


def with_span_head(work_dir):
    """A checkpoint of the whole span model: FLAGS.init_checkpoint's variables (all of them,
    or the encoder's), the rest seeded random."""
    import keras
    import numpy as np
    from modeling import BertConfig
    from modeling.checkpoints import name_based
    from modeling.models.squad import BertSpanModel
    keras.utils.set_random_seed(1)
    model = BertSpanModel(BertConfig.from_json_file(FLAGS.bert_config_file))
    ones = np.ones([1, 8], np.int32)
    model({"input_ids": ones, "input_mask": ones, "token_type_ids": 0 * ones})
    if FLAGS.init_checkpoint:
        heads = [name_based.checkpoint_name(v) for v in model.variables
                 if not name_based.checkpoint_name(v).startswith("bert/")]
        name_based.load_original(model, FLAGS.init_checkpoint, optional=heads)
    path = os.path.join(work_dir, "span_model/bert_model.ckpt")
    name_based.save_original(model, path)
    return path


def run_squad(predict_file, work_dir, checkpoint):
    args = [sys.executable, str(ROOT / "run_squad.py"), "--do_predict",
            f"--predict_file={predict_file}", f"--bert_config_file={FLAGS.bert_config_file}",
            f"--vocab_file={FLAGS.vocab_file}", f"--do_lower_case={FLAGS.do_lower_case}",
            f"--output_dir={work_dir}/out", f"--export_dir={work_dir}/serving",
            f"--version_2_with_negative={FLAGS.version_2_with_negative}",
            f"--max_seq_length={FLAGS.max_seq_length}", f"--doc_stride={FLAGS.doc_stride}",
            f"--max_query_length={FLAGS.max_query_length}",
            f"--n_best_size={FLAGS.n_best_size}", f"--max_answer_length={FLAGS.max_answer_length}",
            f"--init_checkpoint={checkpoint}"]
    subprocess.run(args, check=True)


def main(_):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="verify_squad_")
    os.makedirs(work_dir, exist_ok=True)
    predict_file = os.path.join(work_dir, "predict.json")
    total = rewrite(FLAGS.predict_file, predict_file, FLAGS.lengthen, FLAGS.limit)
    checkpoint = with_span_head(work_dir)
    began = time.time()
    run_squad(predict_file, work_dir, checkpoint)
    script_seconds = time.time() - began
    predictions = json.loads(pathlib.Path(work_dir, "out/predictions.json").read_text())
    null_odds_path = pathlib.Path(work_dir, "out/null_odds.json")
    null_odds = json.loads(null_odds_path.read_text()) if null_odds_path.exists() else {}
    version = max(pathlib.Path(work_dir, "serving").iterdir(), key=lambda p: int(p.name))
    serve = tf.saved_model.load(str(version)).signatures["serving_default"]

    rows = [(qa["id"], qa["question"], paragraph["context"])
            for article in json.loads(pathlib.Path(predict_file).read_text("utf-8"))["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    differences, odds_differences, began = [], 0, time.time()
    for first in range(0, len(rows), FLAGS.batch_size):
        batch = rows[first:first + FLAGS.batch_size]
        outputs = serve(question=tf.constant([q for _, q, _ in batch]),
                        context=tf.constant([c for _, _, c in batch]))
        answers = [a.decode("utf-8") for a in outputs["answer"].numpy()]
        for (qid, _, _), answer, diff in zip(batch, answers,
                                             outputs["null_score_diff"].numpy()):
            if answer != predictions[qid]:
                differences.append((qid, predictions[qid], answer))
            if qid in null_odds and abs(diff - null_odds[qid]) > 1e-4 * max(1, abs(diff)):
                odds_differences += 1
    served_seconds = time.time() - began
    print(f"{FLAGS.predict_file} (contexts x{FLAGS.lengthen}, max_seq_length "
          f"{FLAGS.max_seq_length}, doc_stride {FLAGS.doc_stride}): {total} questions, "
          f"{len(differences)} served answers differ from predictions.json"
          + (f", {odds_differences} null_score_diff differ from null_odds.json"
             if FLAGS.version_2_with_negative else "")
          + f"; run_squad.py {script_seconds:.0f} s, served {served_seconds:.0f} s")
    for qid, expected, answer in differences[:20]:
        print(f"  {qid}: predictions.json {expected!r}, served {answer!r}")
    return 1 if differences or odds_differences else 0


if __name__ == "__main__":
    app.run(main)
