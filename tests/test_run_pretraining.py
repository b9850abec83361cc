"""run_pretraining.py end to end, on one device, two logical CPUs and two worker processes."""
import json
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from modeling import BertConfig, BertPretrainer
from modeling.checkpoints import name_based
from scripts import run_script, run_workers, script_command, script_env

SEQ, PREDICTIONS = 32, 5


def write_config(path, dropout, hidden=16):
    path.write_text(json.dumps({
        "vocab_size": 30522, "hidden_size": hidden, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 64,
        "type_vocab_size": 2, "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": dropout}))
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    from conftest import REFS
    if not REFS.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")
    path = tmp_path_factory.mktemp("data") / "sample.tfrecord"
    run_script("create_pretraining_data.py", f"--input_file={ROOT / 'sample_data/sample_text.txt'}",
               f"--output_file={path}", f"--vocab_file={REFS / 'vocab/uncased_vocab.txt'}",
               f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDICTIONS}",
               "--dupe_factor=20")
    return path


@pytest.fixture(scope="module")
def one_device(records, tmp_path_factory):
    """(config without dropout, the exported weights of 8 steps on one device): the run that
    two replicas, two workers and accumulated micro-batches must each reproduce."""
    root = tmp_path_factory.mktemp("one_device")
    config = write_config(root / "config.json", dropout=0.0)
    run_script("run_pretraining.py", *flags(records, config, root / "one"))
    return config, exported(root / "one")


def flags(records, config, output_dir, *extra, steps=8):
    return [f"--input_file={records}", f"--bert_config_file={config}",
            f"--output_dir={output_dir}", f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDICTIONS}", "--train_batch_size=8",
            f"--num_train_steps={steps}", "--num_warmup_steps=2", "--learning_rate=1e-3",
            "--do_train=True", *extra]


def exported(output_dir):
    reader = tf.train.load_checkpoint(str(output_dir / "export/bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_same_weights(first, second, atol):
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_allclose(first[name], second[name], atol=atol, rtol=0, err_msg=name)


def logged_losses(stderr):
    return [float(x) for x in re.findall(r"masked_lm_loss ([0-9.]+)", stderr)]


def test_end_to_end_loss_falls_and_eval_has_every_key(records, tmp_path):
    config = write_config(tmp_path / "config.json", dropout=0.1)
    process = run_script("run_pretraining.py", *flags(
        records, config, tmp_path / "out", "--do_eval=True", "--iterations_per_loop=4",
        "--progress_seconds=1000",  # a report per loop however slow the machine
        "--save_checkpoints_steps=8", "--eval_batch_size=4", "--max_eval_steps=5", steps=24))
    losses = logged_losses(process.stderr)
    # The first step is reported alone (progress as soon as the step is compiled), then by loop.
    assert len(losses) == 7 and losses[-1] < losses[0] - 0.5, losses
    lines = (tmp_path / "out/eval_results.txt").read_text().splitlines()
    accuracy = re.search(r"masked_lm_accuracy = (\S+)", "\n".join(lines)).group(1)
    assert re.search(rf"Eval: masked_lm_accuracy {float(accuracy):.4f} \(always guessing the most "
                     rf"frequent masked token, id \d+: 0\.\d{{4}}\); next_sentence_accuracy "
                     rf"[0-9.]+ \(always guessing the majority label, [01]: 0\.\d{{4}}\)",
                     process.stderr), process.stderr[-2000:]
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
        "next_sentence_accuracy", "next_sentence_loss"]
    assert lines[0] == "global_step = 24"
    assert sorted(p.name for p in (tmp_path / "out").glob("ckpt-*.index")) == [
        "ckpt-16.index", "ckpt-24.index", "ckpt-8.index"]
    model = BertPretrainer(BertConfig.from_json_file(config))
    result = name_based.load_original(model, str(tmp_path / "out/export/bert_model.ckpt"))
    assert result.unused == [] and len(result.skipped) == 1 + 2 * len(result.loaded)
    assert list((tmp_path / "out/train").iterdir())  # TensorBoard events


def test_constant_guesses_count_what_evaluate_reads():
    from modeling.tasks.pretraining import constant_guess_accuracies
    rows = tf.data.Dataset.from_tensor_slices({
        "masked_lm_ids": [[5, 5, 7], [5, 9, 0], [7, 7, 7]],
        "masked_lm_weights": [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 0.0]],
        "next_sentence_labels": [[1], [0], [1]]})

    first = constant_guess_accuracies(rows.batch(2), max_eval_steps=1)
    both = constant_guess_accuracies(rows.batch(2), max_eval_steps=2)

    # The first batch: 5 three times among five weighted positions; labels 1 and 0.
    assert first == {"masked_lm_accuracy": 0.6, "masked_lm_id": 5,
                     "next_sentence_accuracy": 0.5, "next_sentence_label": 0}
    assert both == {"masked_lm_accuracy": 3 / 7, "masked_lm_id": 5,
                    "next_sentence_accuracy": 2 / 3, "next_sentence_label": 1}


def test_killed_run_resumes_to_the_same_weights(records, tmp_path):
    config = write_config(tmp_path / "config.json", dropout=0.1, hidden=64)
    common = ["--iterations_per_loop=1", "--save_checkpoints_steps=20"]
    run_script("run_pretraining.py", *flags(records, config, tmp_path / "whole", *common,
                                            steps=120))
    killed = tmp_path / "killed"
    process = subprocess.Popen(script_command("run_pretraining.py", *flags(
        records, config, killed, *common, steps=120)), env=script_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    state = killed / "checkpoint"  # written after the checkpoint's files are complete
    while not (state.exists() and "ckpt-" in state.read_text()) and time.time() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "export").exists(), "the run finished before it could be killed"
    resumed = run_script("run_pretraining.py", *flags(records, config, killed, *common,
                                                      steps=120))
    assert re.search(r"Resumed from .*ckpt-\d+ at step \d+", resumed.stderr)
    assert_same_weights(exported(tmp_path / "whole"), exported(killed), atol=1e-6)


def test_mirrored_on_two_logical_cpus_equals_one_device(records, one_device, tmp_path):
    config, one = one_device
    two_cpus = ("import sys, runpy, tensorflow as tf\n"
                "cpu = tf.config.list_physical_devices('CPU')[0]\n"
                "tf.config.set_logical_device_configuration(\n"
                "    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
                "sys.argv = sys.argv[1:]\n"
                "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    process = subprocess.run(
        [sys.executable, "-c", two_cpus, str(ROOT / "run_pretraining.py"),
         *flags(records, config, tmp_path / "two", "--distribution_strategy=mirrored")],
        capture_output=True, text=True, env=script_env(), timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    assert "num_replicas_in_sync = 2" in process.stderr or "2 replicas" in process.stderr or \
        "MirroredStrategy with devices" in process.stderr
    assert_same_weights(one, exported(tmp_path / "two"), atol=1e-5)


def test_gradient_accumulation_equals_the_whole_batch(records, one_device, tmp_path):
    config, whole = one_device
    run_script("run_pretraining.py", *flags(records, config, tmp_path / "accumulated",
                                            "--num_accumulation_steps=4"))
    assert_same_weights(whole, exported(tmp_path / "accumulated"), atol=1e-5)


def test_parallel_micro_batches_of_accumulated_ones_equal_the_whole_batch(records, one_device,
                                                                          tmp_path):
    config, whole = one_device
    process = run_script("run_pretraining.py", *flags(
        records, config, tmp_path / "parallel", "--num_accumulation_steps=2",
        "--parallel_micro_batches=2"))
    assert re.search(r"2 micro-batches side by side: TensorFlow's inter-op threads 2, intra-op "
                     r"threads \d+", process.stderr)
    assert_same_weights(whole, exported(tmp_path / "parallel"), atol=1e-5)


def workers(records, config, output_dirs, temp_dir, *extra):
    """Pre-trains with one worker per output dir, on localhost: (exit status, stderr) each."""
    return run_workers([script_command("run_pretraining.py", *flags(
        records, config, output_dir, "--distribution_strategy=multi_worker_mirrored", *extra))
        for output_dir in output_dirs], temp_dir)


def test_two_workers_on_localhost_equal_one_device_and_resume_together(records, one_device,
                                                                        tmp_path):
    config, one = one_device
    multi, temp = tmp_path / "multi", tmp_path / "tmp"
    temp.mkdir()
    for code, stderr in workers(records, config, [multi, multi], temp,
                                "--save_checkpoints_steps=4"):
        assert code == 0, stderr[-3000:]
    assert_same_weights(one, exported(multi), atol=1e-5)
    assert sorted(p.name for p in temp.iterdir()) == []  # worker 1's copies are gone

    for path in multi.glob("ckpt-8.*"):  # killed between its checkpoints
        path.unlink()
    # A worker that cannot read the chief's output_dir would start afresh: refused.
    for code, stderr in workers(records, config, [multi, tmp_path / "elsewhere"], temp):
        assert code == 2, stderr[-3000:]
        assert re.search(r"The workers resume at different steps \(0, 4\): every worker must "
                         r"read the chief's checkpoints in --output_dir=", stderr)
    assert sorted(p.name for p in multi.glob("ckpt-*.index")) == ["ckpt-4.index"]

    results = workers(records, config, [multi, multi], temp, "--save_checkpoints_steps=4")
    for code, stderr in results:
        assert code == 0, stderr[-3000:]
        assert "Resumed from" in stderr and "at step 4" in stderr
    assert_same_weights(one, exported(multi), atol=1e-5)
    assert sorted(p.name for p in temp.iterdir()) == []


@pytest.mark.parametrize("change, message", [
    (lambda f: [x for x in f if not x.startswith("--input_file")] + ["--input_file=/none/*.rec"],
     "pattern '/none/\\*.rec' matches no file"),
    (lambda f: f + ["--max_seq_length=48"], r"input_ids has 32 values but --max_seq_length says 48"),
    (lambda f: f + ["--max_predictions_per_seq=7"],
     r"masked_lm_positions has 5 values but --max_predictions_per_seq says 7"),
])
def test_bad_input_is_a_one_line_error(records, tmp_path, change, message):
    config = write_config(tmp_path / "config.json", dropout=0.0)
    process = run_script("run_pretraining.py", *change(flags(records, config, tmp_path / "o")),
                         check=False)
    assert process.returncode == 2
    assert re.search(message, process.stderr.strip().splitlines()[-1])


def test_vocab_size_that_disagrees_with_the_ids_names_the_value(records, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"vocab_size": 1000, "hidden_size": 16, "num_hidden_layers": 1,
                                  "num_attention_heads": 2, "intermediate_size": 24}))
    process = run_script("run_pretraining.py", *flags(records, config, tmp_path / "o"),
                         check=False)
    assert process.returncode == 2
    last = process.stderr.strip().splitlines()[-1]
    assert str(records) in last and "vocab_size is 1000" in last
