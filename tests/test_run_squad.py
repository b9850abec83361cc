"""run_squad.py end to end on the invented refs/squad file: fine-tune, predict, score, export,
and the SavedModel answering questions in a process with only TensorFlow and tensorflow-text."""
import json

import pytest

from conftest import REFS
from modeling import BertConfig
from modeling.checkpoints import name_based
from modeling.models.squad import BertSpanModel
from scripts import run_on_logical_cpus, run_script
from serving import assert_same_outputs, read_features, serve, serve_once

SEQ = 192  # every context of tiny_squad_v2.json fits one window


def require_shared():
    if not REFS.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")


def write_config(path):
    path.write_text(json.dumps({
        "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": SEQ,
        "type_vocab_size": 2}))
    return path


def squad_flags(config, output_dir, *extra, seq=SEQ):
    squad = REFS / "squad/tiny_squad_v2.json"
    return [f"--bert_config_file={config}", f"--vocab_file={REFS / 'vocab/uncased_vocab.txt'}",
            f"--output_dir={output_dir}", f"--train_file={squad}", f"--predict_file={squad}",
            f"--max_seq_length={seq}", "--doc_stride=32", "--max_query_length=16",
            "--train_batch_size=4", "--predict_batch_size=4", "--learning_rate=1e-3",
            "--num_train_epochs=4", "--save_checkpoints_steps=5", "--iterations_per_loop=5",
            "--version_2_with_negative=True", *extra]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    require_shared()
    root = tmp_path_factory.mktemp("squad")
    config = write_config(root / "config.json")
    process = run_script("run_squad.py", *squad_flags(
        config, root / "out", "--do_train", "--do_predict", f"--export_dir={root / 'serving'}"))
    return root, process


def test_train_and_predict_write_the_original_files_and_the_metric(trained):
    root, process = trained
    out = root / "out"
    predictions = json.loads((out / "predictions.json").read_text())
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    null_odds = json.loads((out / "null_odds.json").read_text())
    ids = [f"q{i}" for i in range(1, 11)]
    assert sorted(predictions) == sorted(nbest) == sorted(null_odds) == sorted(ids)
    assert all(0 < len(entries) <= 21 for entries in nbest.values())  # 20 + the null one
    results = json.loads((out / "eval_results.json").read_text())
    for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh",
                "best_f1", "best_f1_thresh"):
        assert key in results, key
    assert results["total"] == 10 and results["HasAns_total"] == 9
    steps = int(10 / 4 * 4)  # int(examples / batch * epochs): the original's count
    assert f"step {steps}/{steps}" in process.stderr
    for name in ("train.tf_record", "eval.tf_record", f"ckpt-{steps}.index"):
        assert (out / name).exists(), name


def test_the_original_format_checkpoint_loads_strictly(trained):
    root, _ = trained
    model = BertSpanModel(BertConfig.from_json_file(root / "config.json"))
    result = name_based.load_original(model, root / "out/export/bert_model.ckpt")
    assert "cls/squad/output_weights" in result.loaded and not result.unused


def test_savedmodel_answers_like_run_squad_in_a_tensorflow_only_process(trained):
    """Both signatures, through tf.saved_model.load and a session fed and fetched by tensor
    name (TF Serving's way), in a process that imports only tensorflow and tensorflow_text."""
    root, _ = trained
    version = next(p for p in (root / "serving").iterdir() if p.name.isdigit())
    questions, contexts, ids = [], [], []
    squad = json.loads((REFS / "squad/tiny_squad_v2.json").read_text("utf-8"))
    for article in squad["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                questions.append(qa["question"])
                contexts.append(paragraph["context"])
                ids.append(qa["id"])
    features = read_features(root / "out/eval.tf_record", SEQ)
    text, logits = serve(version, [
        ("serving_default", {"question": questions, "context": contexts}), ("ids", features)])
    assert_same_outputs(text["session"], text["object_loader"])
    assert_same_outputs(logits["session"], logits["object_loader"])
    assert len(logits["session"]["start_logits"]) == 10  # one window per question here
    assert_served_like_predictions_json(root / "out", ids, contexts, text["session"])


def assert_served_like_predictions_json(out, ids, contexts, answers):
    """The served answers are run_squad.py's predictions.json and null_odds.json, and their
    offsets locate them in the context (whose whitespace the original joins with one space)."""
    predictions = json.loads((out / "predictions.json").read_text())
    null_odds = json.loads((out / "null_odds.json").read_text())
    served = dict(zip(ids, answers["answer"]))
    assert served == {qid: predictions[qid] for qid in ids}
    for qid, context, answer, start, end, diff in zip(
            ids, contexts, answers["answer"], answers["start_char"], answers["end_char"],
            answers["null_score_diff"]):
        assert diff == pytest.approx(null_odds[qid], rel=1e-5, abs=1e-5), qid
        if answer == "":
            assert (start, end) == (-1, -1), qid
        else:
            assert " ".join(context[start:end].split()) == answer, qid


def lengthened(path, paragraphs):
    """A SQuAD file whose contexts are `paragraphs` consecutive ones of an article joined."""
    data = json.loads(path.read_text("utf-8"))
    for article in data["data"]:
        joined = []
        for first in range(0, len(article["paragraphs"]), paragraphs):
            group = article["paragraphs"][first:first + paragraphs]
            context = "\n\n".join(p["context"] for p in group)
            qas = []
            for index, paragraph in enumerate(group):
                shift = sum(len(p["context"]) + 2 for p in group[:index])
                qas += [dict(qa, answers=[dict(a, answer_start=a["answer_start"] + shift)
                                          for a in qa["answers"]]) for qa in paragraph["qas"]]
            joined.append({"context": context, "qas": qas})
        article["paragraphs"] = joined
    return data


def test_the_savedmodel_reads_every_window_of_a_long_context_as_run_squad(trained, tmp_path):
    """Contexts of three paragraphs read through windows of 64 (four or more a question):
    the served answers are predictions.json's, through the session loader for every
    question and TF Serving's own C++ loader for those it can send (one-line contexts)."""
    root, _ = trained
    squad = lengthened(REFS / "squad/tiny_squad_v2.json", 3)
    predict_file = tmp_path / "long.json"
    predict_file.write_text(json.dumps(squad))
    run_script("run_squad.py", *squad_flags(
        root / "config.json", tmp_path / "out", "--do_predict", f"--predict_file={predict_file}",
        f"--init_checkpoint={root / 'out/export/bert_model.ckpt'}", "--doc_stride=16",
        f"--export_dir={tmp_path / 'serving'}", seq=64))
    rows = [(qa["id"], qa["question"], paragraph["context"]) for article in squad["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    ids, questions, contexts = zip(*rows)
    features = read_features(tmp_path / "out/eval.tf_record", 64)["input_ids"]
    assert len(features) >= 3 * len(rows)
    version = next(p for p in (tmp_path / "serving").iterdir() if p.name.isdigit())
    (answers,) = serve(version, [("serving_default", {"question": list(questions),
                                                      "context": list(contexts)})])
    assert_served_like_predictions_json(tmp_path / "out", ids, contexts, answers["session"])
    # TF Serving's C++ loader takes rows without line breaks: the contexts that have none.
    one_line = [row for row in rows if "\n" not in row[2]]
    assert len(one_line) >= 3
    ids, questions, contexts = zip(*one_line)
    status, answers, stderr = serve_once(version, "serving_default",
                                         strings={"question": list(questions),
                                                  "context": list(contexts)})
    assert status == 0, stderr[-2000:]
    answers["answer"] = [a.decode() if isinstance(a, bytes) else a for a in answers["answer"]]
    assert_served_like_predictions_json(tmp_path / "out", ids, contexts, answers)


def test_predictions_are_deterministic_from_the_checkpoint_alone(trained, tmp_path):
    root, _ = trained
    run_script("run_squad.py", *squad_flags(
        root / "config.json", tmp_path / "out", "--do_predict",
        f"--init_checkpoint={root / 'out/export/bert_model.ckpt'}"))
    for name in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
        assert (tmp_path / "out" / name).read_text() == (root / "out" / name).read_text(), name


def test_short_windows_give_several_features_per_question(trained, tmp_path):
    root, _ = trained
    run_script("run_squad.py", *squad_flags(
        root / "config.json", tmp_path / "out", "--do_predict",
        f"--init_checkpoint={root / 'out/export/bert_model.ckpt'}", seq=64))
    ref = json.loads((REFS / "squad/predictions_v2/predictions.json").read_text())
    ours = json.loads((tmp_path / "out/predictions.json").read_text())
    assert sorted(ours) == sorted(ref)


def test_a_stride_without_overlap_is_refused_naming_the_flag(tmp_path):
    require_shared()
    config = write_config(tmp_path / "config.json")
    process = run_script("run_squad.py", *squad_flags(config, tmp_path / "out", "--do_predict",
                                                      "--allow_untrained", "--doc_stride=45",
                                                      seq=64), check=False)
    assert process.returncode == 2, process.stderr[-2000:]
    assert ("--doc_stride=45 must be at least 1 and below the 45 pieces of a window"
            in process.stderr)
    assert "Traceback" not in process.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("content, message", [
    ('{"version": "v2.0"}', "no 'data' list"),
    ("not json", "not JSON"),
])
def test_a_file_that_is_not_squad_is_a_one_line_error(content, message, tmp_path):
    require_shared()
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    config = write_config(tmp_path / "config.json")
    process = run_script("run_squad.py", *squad_flags(config, tmp_path / "out", "--do_predict",
                                                      f"--predict_file={bad}"), check=False)
    assert process.returncode == 2
    assert str(bad) in process.stderr and "Traceback" not in process.stderr


def test_mirrored_on_two_logical_cpus_equals_one_device(trained, tmp_path):
    root, _ = trained
    config = json.loads((root / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    write = tmp_path / "config.json"
    write.write_text(json.dumps(config))
    for devices, directory, strategy in ((1, "one", "one_device"), (2, "two", "mirrored")):
        run_on_logical_cpus("run_squad.py", devices, *squad_flags(
            write, tmp_path / directory, "--do_train", "--do_predict", "--num_train_epochs=2",
            f"--distribution_strategy={strategy}"))
    one, two = (json.loads((tmp_path / d / "null_odds.json").read_text())
                for d in ("one", "two"))
    assert one.keys() == two.keys()
    for qid in one:  # the null score minus the best span's: logits to 1e-4
        assert two[qid] == pytest.approx(one[qid], abs=1e-4), qid
    assert (tmp_path / "one/predictions.json").read_text() == (
        tmp_path / "two/predictions.json").read_text()
