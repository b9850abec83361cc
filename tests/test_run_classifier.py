"""run_classifier.py end to end: fine-tune, eval, predict, export, and the SavedModel served by
a process that has only TensorFlow and tensorflow-text."""
import json
import math
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import DATA, REFS, ROOT
from modeling import BertConfig
from modeling.checkpoints import name_based
from modeling.models.classifier import BertClassifier
from modeling.training import loop_cache
from scripts import (logical_cpus_command, run_on_logical_cpus, run_script, run_workers,
                     script_command, script_env)
from serving import assert_same_outputs, read_features, serve, warmup_requests

SEQ = 24
PAIRS = [  # invented
    ("the keeper lit the lamp at dusk", "at dusk the lamp was lit by the keeper", "1"),
    ("the boat left the harbour early", "the market closed before noon", "0"),
    ("children carried stones to the wall", "the wall was built with stones by children", "1"),
    ("the river rose in the spring", "the baker sold bread in the square", "0"),
    ("a storm broke the old mast", "the old mast was broken by a storm", "1"),
    ("the library kept maps of the coast", "fish were heavy in the nets", "0"),
]
LONG = " ".join(["the lighthouse keeper climbed the winding stairs once more"] * 12)
TEST_ROWS = [  # mixed lengths: empty, far beyond SEQ, non-ASCII, an empty text_b
    ("", "the lamp was lit"),
    (LONG, "he was tired"),
    ("Ünïcödé façade — naïve café 東京 ½", "Crème brûlée in the Straße"),
    ("the sea was calm", ""),
    ("the keeper lit the lamp", "the lamp was lit by the keeper"),
]


def require_shared():
    if not REFS.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")


def write_config(path, dropout=0.1):
    path.write_text(json.dumps({
        "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 64,
        "type_vocab_size": 2, "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": dropout}))
    return path


def write_mrpc(directory, train_copies=6):
    """MRPC's layout: header, then quality, #1 ID, #2 ID, #1 String, #2 String."""
    directory.mkdir(parents=True, exist_ok=True)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    rows = [f"{label}\t{i}\t{i + 1}\t{a}\t{b}\n" for i, (a, b, label) in enumerate(PAIRS)]
    (directory / "train.tsv").write_text(header + "".join(rows * train_copies), "utf-8")
    (directory / "dev.tsv").write_text(header + "".join(rows), "utf-8")
    test = [f"{i}\t{i}\t{i + 1}\t{a}\t{b}\n" for i, (a, b) in enumerate(TEST_ROWS)]
    (directory / "test.tsv").write_text("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                        + "".join(test), "utf-8")
    return directory


def classifier_flags(data_dir, config, output_dir, *extra, task="MRPC"):
    return [f"--task_name={task}", f"--data_dir={data_dir}", f"--bert_config_file={config}",
            f"--vocab_file={REFS / 'vocab/uncased_vocab.txt'}", f"--output_dir={output_dir}",
            f"--max_seq_length={SEQ}", "--train_batch_size=4", "--eval_batch_size=4",
            "--predict_batch_size=4", "--learning_rate=1e-3", "--num_train_epochs=2",
            "--save_checkpoints_steps=5", "--iterations_per_loop=3", *extra]


def count_rows(path):
    return len(path.read_text("utf-8").rstrip("\n").split("\n"))


def read_results(path):
    return dict(line.split(" = ") for line in path.read_text().splitlines())


def read_test_results(path):
    return np.array([[float(v) for v in line.split("\t")]
                     for line in path.read_text().splitlines()])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One fine-tuning run with every output: train, eval, predict, export."""
    require_shared()
    root = tmp_path_factory.mktemp("classifier")
    data, config = write_mrpc(root / "data"), write_config(root / "config.json")
    (root / "tmp").mkdir()
    process = run_script("run_classifier.py", *classifier_flags(
        data, config, root / "out", "--do_train", "--do_eval", "--do_predict",
        f"--export_dir={root / 'serving'}", "--progress_seconds=1e-9",
        f"--xla_cache_dir={root / 'xla_cache'}"), TMPDIR=str(root / "tmp"))
    return root, process


def test_a_run_leaves_nothing_in_the_temporary_directory(trained):
    root, _ = trained
    assert sorted(path.name for path in (root / "tmp").iterdir()) == []


def test_training_keeps_its_xla_compilations_for_the_next_run(trained):
    root, _ = trained
    (machine,) = (root / "xla_cache").iterdir()
    entries = list(machine.glob("*.pb"))  # the fused passes, the update: one per shape
    assert len(entries) >= 4
    assert not os.listdir(machine / ".runs")  # the run's private directory is gone


def test_a_rerun_on_the_warm_xla_cache_prints_only_our_lines(trained):
    """A second run as a user makes it (TF_CPP_MIN_LOG_LEVEL unset), on the compilations and
    the traced loop the first one kept: every program loads from the cache, the loop is not
    traced, the weights are those of the first run, and stderr holds our lines only."""
    root, _ = trained
    cache = next((root / "xla_cache").iterdir())
    kept = sorted(path.name for path in cache.glob("*.pb"))
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    process = subprocess.run(script_command("run_classifier.py", *classifier_flags(
        root / "data", root / "config.json", root / "rerun", "--do_train",
        f"--xla_cache_dir={root / 'xla_cache'}")), capture_output=True, text=True, env=env,
        timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    lines = process.stderr.splitlines()
    assert loop_cache.LOADED in process.stderr, [
        line for line in trained[1].stderr.splitlines() + lines if "loop" in line]
    assert sorted(path.name for path in cache.glob("*.pb")) == kept  # nothing compiled anew
    first, rerun = (tf.train.load_checkpoint(str(root / run)) for run in ("out", "rerun"))
    assert first.get_variable_to_shape_map() == rerun.get_variable_to_shape_map()
    for name in first.get_variable_to_shape_map():
        np.testing.assert_array_equal(first.get_tensor(name), rerun.get_tensor(name), name)
    ours = {path.name for path in ROOT.glob("*.py")} | {
        path.name for path in (ROOT / "modeling").rglob("*.py")}
    assert len(lines) > 3 and [line for line in lines if _writer(line) not in ours] == []


def _writer(line):
    """The file named by an absl or TensorFlow log line's prefix; None for another line."""
    match = re.match(r"[IWEF]\d{4} [\d:.]+ +\d+ ([\w.\-]+):\d+\] ", line)
    return match and match.group(1)


def test_train_eval_predict_write_the_original_outputs(trained):
    root, process = trained
    out = root / "out"
    steps = int(len(PAIRS) * 6 / 4 * 2)  # int(examples / batch * epochs), as the original
    results = read_results(out / "eval_results.txt")
    assert list(results) == sorted(results)
    assert set(results) == {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"}
    assert int(results["global_step"]) == steps
    accuracy = float(results["eval_accuracy"])
    assert accuracy * len(PAIRS) == pytest.approx(round(accuracy * len(PAIRS)))
    assert 0 < float(results["eval_loss"]) < 5 and 0 <= float(results["eval_f1"]) <= 1
    # Three pairs of each label: the tie goes to "0", half right and never a paraphrase.
    assert (f"Eval: eval_accuracy {accuracy:.4f} (always guessing the majority label, 0: "
            f"0.5000); eval_f1 {float(results['eval_f1']):.4f} (always guessing the majority "
            f"label, 0: 0.0000)") in process.stderr
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "checkpoint",
                 f"ckpt-{steps}.index"):
        assert (out / name).exists(), name
    assert sum(1 for _ in tf.data.TFRecordDataset(str(out / "train.tf_record"))) == 36
    probabilities = read_test_results(out / "test_results.tsv")
    assert probabilities.shape == (len(TEST_ROWS), 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-6)
    assert re.search(rf"step {steps}/{steps}: loss", process.stderr)


def test_eval_and_predict_report_their_progress(trained):
    _, process = trained  # --progress_seconds=1e-9: a line per batch of 4
    for what, count in (("eval", len(PAIRS)), ("predict", len(TEST_ROWS))):
        lines = re.findall(rf"\] {what}: (\d+)/{count} examples, (.*)", process.stderr)
        assert [int(done) for done, _ in lines] == list(range(4, count, 4)) + [count], what
        assert "ETA at the next report" in lines[0][1]  # the first batch compiles
        assert all(re.search(r"examples/s, elapsed \d+:\d\d, ETA \d+:\d\d$", timing)
                   for _, timing in lines[1:]), lines
        assert re.search(rf"\] {what}: {count} examples in \d+:\d\d", process.stderr)


def test_the_original_format_checkpoint_loads_strictly(trained):
    root, _ = trained
    path = root / "out/export/bert_model.ckpt"
    model = BertClassifier(BertConfig.from_json_file(root / "config.json"), num_labels=2)
    result = name_based.load_original(model, path)
    assert "output_weights" in result.loaded and not result.unused and not result.not_found
    assert any(name.endswith("/adam_m") for name in result.skipped)
    assert tf.train.load_checkpoint(str(path)).get_tensor("global_step") == 18


def test_savedmodel_served_by_tensorflow_alone_equals_do_predict(trained):
    """Both signatures, through tf.saved_model.load and TF Serving's way (a session fed and
    fetched by tensor name), in a process that imports only tensorflow and tensorflow_text."""
    root, _ = trained
    versions = [p for p in (root / "serving").iterdir() if not p.name.startswith(".")]
    assert len(versions) == 1 and versions[0].name.isdigit()
    warmup = warmup_requests(versions[0])
    text, ids, *warmed = serve(versions[0], [
        ("serving_default", {"text_a": [a for a, _ in TEST_ROWS],
                             "text_b": [b for _, b in TEST_ROWS]}),
        ("ids", read_features(root / "out/predict.tf_record", SEQ))] + warmup)
    # TF Serving's warm-up file, made of the real vocabulary: every request answers.
    assert sorted({signature for signature, _ in warmup}) == ["ids", "serving_default"]
    assert max(len(row.split()) for _, inputs in warmup for row in inputs.get("text_a", [])) > SEQ
    for (_, inputs), result in zip(warmup, warmed):
        assert_same_outputs(result["session"], result["object_loader"])
        assert len(result["session"]["labels"]) == len(inputs[next(iter(inputs))])
    expected = read_test_results(root / "out/test_results.tsv")
    for loader in ("session", "object_loader"):
        np.testing.assert_allclose(text[loader]["probabilities"], expected, atol=1e-5, rtol=0)
        np.testing.assert_allclose(ids[loader]["probabilities"], expected, atol=1e-5, rtol=0)
        assert text[loader]["label_ids"] == np.argmax(expected, axis=1).tolist()
        assert text[loader]["labels"] == [str(i) for i in text[loader]["label_ids"]]
    assert (versions[0] / "assets/labels.txt").read_text("utf-8").split() == ["0", "1"]


def test_saved_model_cli_lists_both_signatures(trained):
    root, _ = trained
    version = next(p for p in (root / "serving").iterdir() if p.name.isdigit())
    process = subprocess.run(["saved_model_cli", "show", "--all", "--dir", str(version)],
                             capture_output=True, text=True, env=script_env(), timeout=300)
    assert process.returncode == 0, process.stderr[-2000:]
    listing = process.stdout
    for needle in ("signature_def['serving_default']", "signature_def['ids']",
                   "inputs['text_a']", "inputs['text_b']", "inputs['input_ids']",
                   "outputs['probabilities']", "outputs['label_ids']", "outputs['labels']"):
        assert needle in listing, needle


def test_export_from_the_fine_tuned_checkpoint_alone(trained, tmp_path):
    root, _ = trained
    run_script("run_classifier.py", *classifier_flags(
        root / "data", root / "config.json", tmp_path / "out",
        f"--init_checkpoint={root / 'out/export/bert_model.ckpt'}",
        f"--export_dir={tmp_path / 'serving'}", "--do_predict"))
    np.testing.assert_allclose(read_test_results(tmp_path / "out/test_results.tsv"),
                               read_test_results(root / "out/test_results.tsv"), atol=1e-6)
    assert len([p for p in (tmp_path / "serving").iterdir() if p.name.isdigit()]) == 1


def test_export_of_a_checkpoint_without_a_classifier_head_is_refused(trained, tmp_path):
    root, _ = trained
    data, config = root / "data", root / "config.json"
    bare = tmp_path / "bare/bert_model.ckpt"  # the fine-tuned encoder without its head
    from modeling import BertModel
    model = BertModel(BertConfig.from_json_file(config))
    name_based.load_original(model, root / "out/export/bert_model.ckpt")
    name_based.save_original(model, str(bare))
    process = run_script("run_classifier.py", *classifier_flags(
        data, config, tmp_path / "out", f"--init_checkpoint={bare}",
        f"--export_dir={tmp_path / 'serving'}"), check=False)
    assert process.returncode == 2
    assert "has no task head (output_bias, output_weights)" in process.stderr
    assert not (tmp_path / "serving").exists() or not any((tmp_path / "serving").iterdir())


def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path):
    """With length buckets: the resumed run regroups the batches it skips as the whole run."""
    require_shared()
    data, config = write_mrpc(tmp_path / "data", train_copies=20), write_config(
        tmp_path / "config.json")
    common = ("--do_train", "--do_predict", "--save_checkpoints_steps=10",
              "--iterations_per_loop=2", "--bucket_by_length", "--padding_multiple=8")
    run_script("run_classifier.py", *classifier_flags(data, config, tmp_path / "whole", *common))
    killed = tmp_path / "killed"
    process = subprocess.Popen(script_command("run_classifier.py", *classifier_flags(
        data, config, killed, *common)), env=script_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    state = killed / "checkpoint"  # written after the checkpoint's files: then it counts
    while not (state.exists() and "ckpt-10" in state.read_text()) and process.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "export").exists(), "killed too late to test anything"
    resumed = run_script("run_classifier.py", *classifier_flags(data, config, killed, *common))
    assert "Resumed from" in resumed.stderr
    assert "Batches: length buckets" in resumed.stderr
    np.testing.assert_allclose(read_test_results(killed / "test_results.tsv"),
                               read_test_results(tmp_path / "whole/test_results.tsv"),
                               atol=1e-6)


def test_two_replicas_workers_and_parallel_micro_batches_equal_one_device(tmp_path):
    require_shared()
    data, config = write_mrpc(tmp_path / "data"), write_config(tmp_path / "config.json", 0.0)
    common = ("--do_train", "--do_eval", "--do_predict", "--predict_batch_size=4")
    for devices, directory, extra in ((1, "one", "--distribution_strategy=one_device"),
                                      (2, "two", "--distribution_strategy=mirrored"),
                                      (1, "halves", "--parallel_micro_batches=2")):
        process = run_on_logical_cpus("run_classifier.py", devices, *classifier_flags(
            data, config, tmp_path / directory, *common, extra))
        assert "Batches: dynamic padding" in process.stderr  # the default
    assert re.search(r"2 micro-batches side by side: TensorFlow's inter-op threads 2, intra-op "
                     r"threads \d+", process.stderr)
    temp = tmp_path / "tmp"
    temp.mkdir()
    command = logical_cpus_command("run_classifier.py", 1, *classifier_flags(
        data, config, tmp_path / "workers", *common, f"--export_dir={tmp_path / 'serving'}",
        "--distribution_strategy=multi_worker_mirrored"))
    for code, stderr in run_workers([command, command], temp):
        assert code == 0, stderr[-3000:]
    assert sorted(p.name for p in temp.iterdir()) == []  # worker 1's copies are gone
    assert len(list((tmp_path / "serving").iterdir())) == 1
    # 5 test examples in batches of 4: the last batch splits unevenly over the 2 replicas, and
    # into a micro-batch of one example and an empty one.
    one = read_test_results(tmp_path / "one/test_results.tsv")
    for directory in ("two", "workers", "halves"):
        np.testing.assert_allclose(read_test_results(tmp_path / directory / "test_results.tsv"),
                                   one, atol=1e-5)
    one = read_results(tmp_path / "one/eval_results.txt")
    for directory in ("two", "workers", "halves"):
        other = read_results(tmp_path / directory / "eval_results.txt")
        assert one.keys() == other.keys()
        for key in one:
            assert float(other[key]) == pytest.approx(float(one[key]), abs=1e-5), key


def test_mnli_evaluates_and_predicts_matched_and_mismatched(tmp_path):
    require_shared()
    data = tmp_path / "mnli"
    data.mkdir()
    labels = ["entailment", "neutral", "contradiction"]
    header = "\t".join(["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                        "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                        "sentence1", "sentence2", "label1", "gold_label"]) + "\n"

    def rows(count, with_label=True):
        lines = []
        for i in range(count):
            a, b, _ = PAIRS[i % len(PAIRS)]
            label = [labels[i % 3]] if with_label else []
            lines.append("\t".join([str(i), "0", "0", "fiction", "", "", "", "", a, b, *label,
                                    *label]) + "\n")
        return header + "".join(lines)
    (data / "train.tsv").write_text(rows(12), "utf-8")
    for name, count in (("matched", 5), ("mismatched", 7)):
        (data / f"dev_{name}.tsv").write_text(rows(count), "utf-8")
        (data / f"test_{name}.tsv").write_text(rows(count + 1, with_label=False), "utf-8")
    config = write_config(tmp_path / "config.json")
    run_script("run_classifier.py", *classifier_flags(
        data, config, tmp_path / "out", "--do_train", "--do_eval", "--do_predict",
        "--num_train_epochs=1", task="mnli"))
    results = read_results(tmp_path / "out/eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_loss", "loss", "global_step",
                            "eval_accuracy_mismatched", "eval_loss_mismatched",
                            "loss_mismatched"}
    assert float(results["eval_accuracy"]) * 5 == pytest.approx(
        round(float(results["eval_accuracy"]) * 5))
    assert float(results["eval_accuracy_mismatched"]) * 7 == pytest.approx(
        round(float(results["eval_accuracy_mismatched"]) * 7))
    assert read_test_results(tmp_path / "out/test_results.tsv").shape == (6, 3)
    assert read_test_results(tmp_path / "out/test_results_mismatched.tsv").shape == (8, 3)


@pytest.mark.parametrize("task, metrics", [
    ("CoLA", {"eval_accuracy", "eval_mcc"}),
    ("MRPC", {"eval_accuracy", "eval_f1"}),
    ("STS-B", {"eval_pearson", "eval_spearman"}),
])
def test_real_glue_tasks_give_their_metrics(task, metrics, tmp_path):
    require_shared()
    data_dir = DATA / "glue" / task
    if not data_dir.exists():
        pytest.skip(f"{data_dir} is absent")
    config = write_config(tmp_path / "config.json")
    run_script("run_classifier.py", *classifier_flags(
        data_dir, config, tmp_path / "out", "--do_train", "--do_eval", "--do_predict",
        "--num_train_epochs=0.02", "--train_batch_size=32", "--eval_batch_size=64",
        "--predict_batch_size=64", task=task))
    results = read_results(tmp_path / "out/eval_results.txt")
    assert set(results) == metrics | {"eval_loss", "global_step", "loss"}
    assert all(math.isfinite(float(v)) for v in results.values())
    dev_rows = sum(1 for _ in tf.data.TFRecordDataset(str(tmp_path / "out/eval.tf_record")))
    test_lines = count_rows(data_dir / "test.tsv") - 1
    predictions = read_test_results(tmp_path / "out/test_results.tsv")
    assert predictions.shape == (test_lines, 1 if task == "STS-B" else 2)
    assert dev_rows == count_rows(data_dir / "dev.tsv") - (task != "CoLA")  # CoLA: no header


@pytest.mark.parametrize("bad_flag, message", [
    ("--task_name=nope", "Task not found: 'nope'; known tasks: ['cola', 'hyperpartisan', "
                         "'mnli'"),
    ("--max_seq_length=65", "--max_seq_length=65 must be between 3 and max_position_embeddings"),
    ("--train_batch_size=0", "--train_batch_size must be positive, got 0"),
    ("--parallel_micro_batches=0", "--parallel_micro_batches must be positive, got 0"),
    ("--parallel_micro_batches=3", "--train_batch_size=4 is not divisible by "
                                   "--num_accumulation_steps=1 x --parallel_micro_batches=3"),
    ("--task_name=sst-2", "train.tsv:1: does not look like SST-2's train.tsv: its header names "
                          "column 1 'sentence', column 2 'label'; this one reads 'Quality"),
])
def test_bad_flags_are_one_line_errors(bad_flag, message, tmp_path):
    require_shared()
    data, config = write_mrpc(tmp_path / "data"), write_config(tmp_path / "config.json")
    process = run_script("run_classifier.py", *classifier_flags(data, config, tmp_path / "out",
                                                                "--do_train", bad_flag),
                         check=False)
    assert process.returncode == 2
    assert message in process.stderr
    assert "Traceback" not in process.stderr
    assert not (tmp_path / "out/train.tf_record").exists()  # refused before any work


@pytest.mark.parametrize("task, folder, message", [
    ("cola", "RTE", "RTE/train.tsv:1: does not look like CoLA's train.tsv: its rows have 4 "
                    "tab-separated columns, the label 0 or 1 in column 2 and blank or the "
                    "original's mark (*, ?) in column 3; this one reads 'index\\tsentence1"),
    ("cola", "SST-2", "SST-2/train.tsv:1: does not look like CoLA's train.tsv"),
    ("sst-2", "CoLA", "CoLA/train.tsv:1: does not look like SST-2's train.tsv: its header "
                      "names column 1 'sentence', column 2 'label'; this one reads \"gj04"),
])
def test_a_task_on_another_tasks_real_files_is_one_line_before_any_record(
        task, folder, message, tmp_path, data):
    """CoLA's train and dev have no header: its rows tell it from the other tasks' files."""
    require_shared()
    config = write_config(tmp_path / "config.json")
    process = run_script("run_classifier.py", *classifier_flags(
        data / "glue" / folder, config, tmp_path / "out", "--do_train", task=task), check=False)
    assert process.returncode == 2
    assert message in process.stderr.strip().splitlines()[-1], process.stderr[-2000:]
    assert "unknown label" not in process.stderr and "Traceback" not in process.stderr
    assert not (tmp_path / "out/train.tf_record").exists()


def test_a_bad_row_names_the_file_and_line(tmp_path):
    require_shared()
    data, config = write_mrpc(tmp_path / "data"), write_config(tmp_path / "config.json")
    with open(data / "train.tsv", "a", encoding="utf-8") as writer:
        writer.write("maybe\t1\t2\ta\tb\n")
    process = run_script("run_classifier.py", *classifier_flags(data, config, tmp_path / "out",
                                                                "--do_train"), check=False)
    assert process.returncode == 2
    assert f"{data / 'train.tsv'}:38: unknown label 'maybe'" in process.stderr
