"""The reliability promise, case by case: a user's mistake gives one line on stderr naming the
file, line, flag or value, and exit status 2, before any long work; inputs are never harmed;
outputs appear only when complete; stale temporaries of killed runs are cleaned up.

The library's rules are tested directly (fast); each script is run as the user runs it where
the rule lives in the script's start-up.
"""
import json
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling.data import text
from modeling.encoder import config as encoder_config
from modeling.runtime import files
from modeling.text import tokenization
from scripts import dead_pid, run_script, script_command, script_env

SAMPLE = ROOT / "sample_data"
CONFIG = SAMPLE / "bert_config_tiny.json"


def _one_line_error(process, *needles):
    """Exit 2 and exactly one non-empty stderr line of ours naming every needle."""
    assert process.returncode == 2, process.stderr[-2000:]
    ours = [line for line in process.stderr.splitlines() if ": error: " in line]
    assert len(ours) == 1, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    for needle in needles:
        assert str(needle) in ours[0], ours[0]
    return ours[0]


@pytest.fixture
def config_file(tmp_path):
    """The sample's tiny config, for the 10-token vocabulary below."""
    settings = json.loads(CONFIG.read_text())
    settings["vocab_size"] = 10
    path = tmp_path / "config.json"
    path.write_text(json.dumps(settings))
    return path


@pytest.fixture
def vocab(tmp_path):
    path = tmp_path / "vocab.txt"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "keeper", "lit", "lamp", "a"]
    path.write_text("\n".join(words) + "\n")
    return path


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the keeper lit the lamp.\na lamp.\n\nthe lamp lit a keeper.\nthe keeper.\n")
    return path


def _pretraining_data(*args):
    return run_script("create_pretraining_data.py", *args, check=False)


# --- Inputs are never harmed; outputs appear whole or not at all -----------------------------

def test_output_equal_to_an_input_is_refused_before_reading(corpus, vocab):
    before = corpus.read_bytes()
    process = _pretraining_data(f"--input_file={corpus}", f"--output_file={corpus}",
                                f"--vocab_file={vocab}")
    _one_line_error(process, corpus, "input")
    assert corpus.read_bytes() == before


def test_output_linked_to_an_input_is_refused(tmp_path, corpus, vocab):
    link = tmp_path / "link.tfrecord"
    link.symlink_to(corpus)
    _one_line_error(_pretraining_data(f"--input_file={corpus}", f"--output_file={link}",
                                      f"--vocab_file={vocab}"), link)


def test_same_output_twice_is_refused_and_nothing_is_written(tmp_path, corpus, vocab):
    out = tmp_path / "a.tfrecord"
    _one_line_error(_pretraining_data(f"--input_file={corpus}", f"--output_file={out},{out}",
                                      f"--vocab_file={vocab}"), out, "twice")
    assert not out.exists() and not list(tmp_path.glob("a.tfrecord*"))


@pytest.mark.parametrize("case", ["directory", "under_a_file"])
def test_unwritable_output_is_refused_before_work(tmp_path, corpus, vocab, case):
    if case == "directory":
        out = tmp_path / "adir"
        out.mkdir()
    else:
        out = corpus / "x.tfrecord"
    _one_line_error(_pretraining_data(f"--input_file={corpus}", f"--output_file={out}",
                                      f"--vocab_file={vocab}"), out)
    assert not list(tmp_path.rglob("*.tmp-*"))


def test_rerun_removes_the_stale_temporaries_of_its_outputs(tmp_path, corpus, vocab):
    out = tmp_path / "out.tfrecord"
    dead = dead_pid()
    stale = [tmp_path / f"out.tfrecord.tmp-{dead}-final", tmp_path / f"out.tfrecord.tmp-{dead}-shard0"]
    other = tmp_path / f"other.tfrecord.tmp-{dead}-final"  # not this run's output: kept
    for path in stale + [other]:
        path.write_bytes(b"x" * 100)
    run_script("create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={out}",
               f"--vocab_file={vocab}", "--max_seq_length=16", "--dupe_factor=1")
    assert out.exists() and not any(path.exists() for path in stale) and other.exists()


def test_stale_temporaries_of_live_processes_are_kept(tmp_path):
    live = tmp_path / f"out.txt.tmp-{os.getppid()}"
    live.write_text("a live writer's")
    files.remove_stale_temps(tmp_path / "out.txt")
    files.remove_stale_temps_in(tmp_path)
    assert live.exists()


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with files.atomic_write(target) as writer:
            writer.write("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


# --- Inputs read as real data is: long fields, binary bytes, empty files ---------------------

def test_a_200_kb_field_in_a_tsv_is_read(tmp_path):
    path = tmp_path / "train.tsv"
    long_field = "word " * 40000
    path.write_text(f"a\tb\n{long_field}\tx\n", encoding="utf-8")
    rows = text.read_tsv(path)
    assert rows[1][0] == 2 and rows[1][1][0] == long_field


def test_binary_bytes_in_a_tsv_name_the_file_and_line(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_bytes(b"a\tb\nfine\tline\nbad \xff\xfe bytes\there\n")
    with pytest.raises(ValueError, match=rf"{path}:3: not valid UTF-8"):
        text.read_tsv(path)


def test_empty_extract_features_input_gives_an_empty_output(tmp_path, vocab, config_file):
    config = config_file
    ckpt = _tiny_checkpoint(tmp_path, config)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = tmp_path / "new" / "features.jsonl"  # in a folder to make, as every output may be
    run_script("extract_features.py", f"--input_file={empty}", f"--output_file={out}",
               f"--vocab_file={vocab}", f"--bert_config_file={config}",
               f"--init_checkpoint={ckpt}", "--layers=-1", "--max_seq_length=16")
    assert out.read_text() == "" and not list(tmp_path.glob("*.tmp-*"))


def _tiny_checkpoint(tmp_path, config):
    code = ("import sys; from modeling import BertConfig, BertModel; "
            "from modeling.checkpoints import name_based; "
            "name_based.save_original(BertModel(BertConfig.from_json_file(sys.argv[1])), "
            "sys.argv[2])")
    path = tmp_path / "ckpt" / "bert_model.ckpt"
    subprocess.run([sys.executable, "-c", code, str(config), str(path)], check=True, cwd=ROOT,
                   capture_output=True)
    return path


# --- Flags: refused at start-up with the flag's name -----------------------------------------

def _classifier(tmp_path, vocab, *args):
    config = tmp_path / "config.json"
    if not config.exists():
        settings = json.loads(CONFIG.read_text())
        settings["vocab_size"] = 10
        config.write_text(json.dumps(settings))
    return run_script("run_classifier.py", "--task_name=MRPC", f"--data_dir={tmp_path}",
                      f"--vocab_file={vocab}", f"--bert_config_file={config}",
                      f"--output_dir={tmp_path / 'out'}", *args, check=False)


@pytest.mark.parametrize("flag, value", [
    ("learning_rate", -1e-5), ("learning_rate", 0.0), ("warmup_proportion", 1.5),
    ("warmup_proportion", -0.1), ("num_train_epochs", 0.0), ("train_batch_size", 0),
    ("eval_batch_size", -2), ("predict_batch_size", 0), ("max_seq_length", 0),
    ("max_seq_length", 2), ("max_seq_length", 100000), ("save_checkpoints_steps", 0),
    ("iterations_per_loop", 0), ("keep_checkpoint_max", 0), ("num_accumulation_steps", 0),
    ("precision", "float8"), ("distribution_strategy", "spread"),
])
def test_out_of_range_options_are_refused_naming_the_flag(tmp_path, vocab, config_file, flag,
                                                         value):
    from modeling import BertConfig
    from modeling.tasks.classifier import ClassifierTask
    from modeling.text import tokenization
    from modeling.training import fine_tuning
    options = fine_tuning.FineTuningOptions(
        bert_config_file=str(config_file), vocab_file=str(vocab),
        output_dir=str(tmp_path / "out"), do_train=True, **{flag: value})
    config = BertConfig.from_json_file(config_file)
    with pytest.raises(ValueError, match=f"--{flag}"):
        options.check()
        fine_tuning.check(ClassifierTask(str(tmp_path), "MRPC"), options, config,
                          tokenization.FullTokenizer(str(vocab)))


@pytest.mark.parametrize("flag, value", [("learning_rate", "-1e-5"),
                                         ("max_seq_length", "100000")])
def test_out_of_range_flags_are_refused_at_start_up(tmp_path, vocab, flag, value):
    process = _classifier(tmp_path, vocab, "--do_train", f"--{flag}={value}")
    _one_line_error(process, f"--{flag}")
    assert not (tmp_path / "out").exists()


def test_flag_parse_errors_are_one_line(tmp_path, vocab):
    _one_line_error(_classifier(tmp_path, vocab, "--learning_rate=fast"), "--learning_rate",
                    "fast")
    process = run_script("run_classifier.py", check=False)
    _one_line_error(process, "--data_dir")


def test_extract_features_layers_must_be_integers(tmp_path, vocab):
    process = run_script("extract_features.py", f"--input_file={vocab}",
                         f"--output_file={tmp_path / 'o.jsonl'}", f"--vocab_file={vocab}",
                         f"--bert_config_file={CONFIG}", f"--init_checkpoint={tmp_path}/x",
                         "--layers=abc", check=False)
    _one_line_error(process, "--layers=abc")


def test_evaluating_random_weights_is_refused_unless_asked(tmp_path, vocab):
    (tmp_path / "dev.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                      "1\t1\t2\tthe lamp\ta lamp\n")
    process = _classifier(tmp_path, vocab, "--do_eval")
    _one_line_error(process, "--allow_untrained", "evaluate")
    assert not (tmp_path / "out" / "eval_results.txt").exists()
    _classifier_ok = _classifier(tmp_path, vocab, "--do_eval", "--allow_untrained",
                                 "--max_seq_length=16")
    assert _classifier_ok.returncode == 0, _classifier_ok.stderr[-2000:]
    assert (tmp_path / "out" / "eval_results.txt").exists()


def test_an_unknown_dev_label_is_found_before_training(tmp_path, vocab):
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    (tmp_path / "train.tsv").write_text(header + "1\t1\t2\tthe lamp\ta lamp\n" * 8)
    (tmp_path / "dev.tsv").write_text(header + "7\t1\t2\tthe lamp\ta lamp\n")
    process = _classifier(tmp_path, vocab, "--do_train", "--do_eval", "--max_seq_length=16",
                          "--train_batch_size=2")
    _one_line_error(process, "dev.tsv")
    assert not list((tmp_path / "out").glob("ckpt-*"))


def test_header_only_test_file_gives_empty_predictions(tmp_path, vocab):
    (tmp_path / "test.tsv").write_text("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    process = _classifier(tmp_path, vocab, "--do_predict", "--allow_untrained",
                          "--max_seq_length=16")
    assert process.returncode == 0, process.stderr[-2000:]
    assert (tmp_path / "out" / "test_results.tsv").read_text() == ""


# --- Damaged files: one line naming the file (and where in it) -------------------------------

def _pretraining_records(path, count, bad_at=None, seq=16, predictions=3):
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    with tf.io.TFRecordWriter(str(path)) as writer:
        for index in range(count):
            ids = [2] + [5] * (seq - 2) + [3]
            if index == bad_at:
                ids[1] = 9999
            features = {"input_ids": ints(ids), "input_mask": ints([1] * seq),
                        "segment_ids": ints([0] * seq),
                        "masked_lm_positions": ints([1, 2, 3]), "masked_lm_ids": ints([5, 5, 5]),
                        "masked_lm_weights": tf.train.Feature(
                            float_list=tf.train.FloatList(value=[1.0] * predictions)),
                        "next_sentence_labels": ints([0])}
            writer.write(tf.train.Example(features=tf.train.Features(
                feature=features)).SerializeToString())
    return path


def _pretrain(tmp_path, config_file, records, *args):
    return run_script("run_pretraining.py", f"--input_file={records}",
                      f"--output_dir={tmp_path / 'out'}", f"--bert_config_file={config_file}",
                      "--max_seq_length=16", "--max_predictions_per_seq=3",
                      "--train_batch_size=8", "--num_train_steps=12", "--num_warmup_steps=1",
                      "--iterations_per_loop=4", "--save_checkpoints_steps=4", *args,
                      check=False)


@pytest.mark.parametrize("damage", ["text", "truncated", "flipped"])
def test_damaged_pretraining_records_are_named_before_training(tmp_path, config_file, damage):
    records = _pretraining_records(tmp_path / "data.tfrecord", 40)
    content = records.read_bytes()
    if damage == "text":
        records.write_text("this is a text file, not TFRecords\n" * 20)
    elif damage == "truncated":
        records.write_bytes(content[:len(content) - 37])
    else:
        records.write_bytes(content[:900] + bytes([content[900] ^ 0x10]) + content[901:])
    line = _one_line_error(_pretrain(tmp_path, config_file, records, "--do_train"),
                           records, "byte")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("ckpt-*")), line


def test_ids_beyond_the_vocabulary_late_in_the_input_are_one_line(tmp_path, config_file):
    records = _pretraining_records(tmp_path / "data.tfrecord", 90, bad_at=80)
    _one_line_error(_pretrain(tmp_path, config_file, records, "--do_train"),
                    f"--input_file={records}", "vocab_size")


def test_a_damaged_init_checkpoint_is_one_line(tmp_path, vocab, config_file):
    ckpt = _tiny_checkpoint(tmp_path, config_file)
    index = pathlib.Path(f"{ckpt}.index")
    index.write_bytes(index.read_bytes()[:20])
    (tmp_path / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                        + "1\t1\t2\tthe lamp\ta lamp\n" * 4)
    process = _classifier(tmp_path, vocab, "--do_train", f"--init_checkpoint={ckpt}",
                          "--max_seq_length=16", "--train_batch_size=2")
    _one_line_error(process, "--init_checkpoint", "not a readable checkpoint")


@pytest.mark.parametrize("script", ["extract_features.py", "build_vocab.py"])
def test_every_script_refuses_to_write_over_its_input(tmp_path, vocab, corpus, script):
    before = corpus.read_bytes()
    args = [f"--input_file={corpus}", f"--output_file={corpus}"]
    if script == "extract_features.py":
        args += [f"--vocab_file={vocab}", f"--bert_config_file={CONFIG}",
                 f"--init_checkpoint={tmp_path / 'none'}"]
    _one_line_error(run_script(script, *args, check=False), corpus)
    assert corpus.read_bytes() == before


def test_workers_die_with_a_killed_parent(tmp_path, vocab):
    import signal
    import time
    corpus = tmp_path / "big.txt"
    with corpus.open("w") as writer:
        for index in range(80000):  # seconds of work for each worker
            writer.write("the keeper lit the lamp and a lamp lit the keeper .\n")
            if index % 10 == 9:
                writer.write("\n")
    out = tmp_path / "out.tfrecord"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "create_pretraining_data.py"), f"--input_file={corpus}",
         f"--output_file={out}", f"--vocab_file={vocab}", "--num_workers=2", "--dupe_factor=20",
         "--max_seq_length=32"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while True:  # until both workers are at work on their shards, as in a run killed midway
        # (the script's other child, its stderr filter, does next to nothing)
        workers = [pid for pid in _children(process.pid) if _cpu_seconds(pid) >= 1.0]
        if len(workers) >= 2:
            break
        assert process.poll() is None and time.time() < deadline, "no two workers at work"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.time() + 3
    while any(_running(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_running(pid) for pid in workers)
    assert not out.exists()


def _children(parent):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = pathlib.Path(f"/proc/{entry}/status").read_text()
                command = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            # The pool's workers (forked or spawned), not multiprocessing's resource tracker.
            if (f"\nPPid:\t{parent}\n" in status and b"resource_tracker" not in command
                    and _running(int(entry))):
                found.append(int(entry))
    return found


def _cpu_seconds(pid):
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _running(pid):
    try:
        state = pathlib.Path(f"/proc/{pid}/status").read_text().split("\nState:\t", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("kind, damage", [(".keras", "truncated"), (".keras", "text"),
                                          (".weights.h5", "truncated")])
def test_a_damaged_keras_file_is_one_line(tmp_path, config_file, kind, damage):
    path = tmp_path / f"model{kind}"
    code = ("import sys; from modeling import BertConfig, BertModel; "
            "model = BertModel(BertConfig.from_json_file(sys.argv[1])); "
            "model.save(sys.argv[2]) if sys.argv[2].endswith('.keras') "
            "else model.save_weights(sys.argv[2])")
    subprocess.run([sys.executable, "-c", code, str(config_file), str(path)], check=True,
                   cwd=ROOT, capture_output=True)
    content = path.read_bytes()
    path.write_bytes(content[:len(content) // 2] if damage == "truncated" else b"not a model\n")
    process = run_script("convert_checkpoint.py", f"--input={path}",
                         f"--output={tmp_path / 'out' / 'bert_model.ckpt'}",
                         f"--bert_config_file={config_file}", check=False)
    line = _one_line_error(process, path)
    assert "not found" not in line.lower() and "exist" not in line, line  # it does exist


# --- Checkpoints and output folders (issue 27) -----------------------------------------------

@pytest.fixture(scope="module")
def tiny_model_files(tmp_path_factory):
    """A tiny `BertModel` for the 10-token vocabulary, written once: config.json,
    ckpt/bert_model.ckpt (original format) and model.keras."""
    from modeling import BertConfig, BertModel
    from modeling.checkpoints import name_based
    directory = tmp_path_factory.mktemp("tiny_model")
    settings = json.loads(CONFIG.read_text())
    settings["vocab_size"] = 10
    (directory / "config.json").write_text(json.dumps(settings))
    model = BertModel(BertConfig.from_json_file(directory / "config.json"))
    name_based.save_original(model, str(directory / "ckpt" / "bert_model.ckpt"))
    model.save(directory / "model.keras")
    return directory


@pytest.mark.parametrize("script, damaged", [("extract_features.py", ".data-00000-of-00001"),
                                             ("convert_checkpoint.py", ".index")])
def test_a_truncated_checkpoint_is_named_by_every_reader(tmp_path, vocab, tiny_model_files,
                                                         script, damaged):
    ckpt = tmp_path / "bert_model.ckpt"
    for source in (tiny_model_files / "ckpt").glob("bert_model.ckpt.*"):
        content = source.read_bytes()
        half = source.name.endswith(damaged)
        (tmp_path / source.name).write_bytes(content[:len(content) // 2] if half else content)
    if script == "extract_features.py":
        (tmp_path / "in.txt").write_text("the keeper lit the lamp\n")
        args = [f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
                f"--vocab_file={vocab}", f"--init_checkpoint={ckpt}", "--max_seq_length=16"]
    else:
        args = [f"--input={ckpt}", f"--output={tmp_path / 'out.keras'}"]
    process = run_script(script, f"--bert_config_file={tiny_model_files / 'config.json'}", *args,
                         check=False)
    _one_line_error(process, f"{ckpt}{damaged}", "not a readable checkpoint")
    assert not list(tmp_path.glob("out*"))


def test_a_keras_file_as_init_checkpoint_says_to_convert_it(tmp_path, vocab, tiny_model_files):
    keras_file = tiny_model_files / "model.keras"
    (tmp_path / "in.txt").write_text("the keeper lit the lamp\n")
    process = run_script("extract_features.py", f"--input_file={tmp_path / 'in.txt'}",
                         f"--output_file={tmp_path / 'out.jsonl'}", f"--vocab_file={vocab}",
                         f"--bert_config_file={tiny_model_files / 'config.json'}",
                         f"--init_checkpoint={keras_file}", check=False)
    line = _one_line_error(process, f"--init_checkpoint={keras_file}", "is a Keras file",
                           f"convert_checkpoint.py --input={keras_file}")
    assert "not found" not in line
    assert not list(tmp_path.glob("out*"))


@pytest.mark.parametrize("script, output", [("extract_features.py", "out.jsonl"),
                                            ("convert_checkpoint.py", "out.keras"),
                                            ("convert_checkpoint.py", "out_hf")])
def test_a_flipped_byte_in_a_skipped_adam_slot_is_named(tmp_path, vocab, tiny_model_files,
                                                        script, output):
    """The scripts read no Adam slot, but the checkpoint's checksums are checked for all."""
    config = tiny_model_files / "config.json"
    slot = "bert/pooler/dense/bias/adam_m"
    code = ("import sys, numpy as np; from modeling import BertConfig, BertModel; "
            "from modeling.checkpoints import name_based; "
            "name_based.save_original(BertModel(BertConfig.from_json_file(sys.argv[1])), "
            f"sys.argv[2], extra_tensors={{'{slot}': np.full([64], 7.0, np.float32)}})")
    ckpt = tmp_path / "ckpt" / "bert_model.ckpt"
    subprocess.run([sys.executable, "-c", code, str(config), str(ckpt)], check=True, cwd=ROOT,
                   capture_output=True)
    data = pathlib.Path(f"{ckpt}.data-00000-of-00001")
    content = bytearray(data.read_bytes())
    at = content.index(struct.pack("<64f", *[7.0] * 64))
    content[at + 100] ^= 0x01
    data.write_bytes(bytes(content))
    out = tmp_path / output
    if script == "extract_features.py":
        (tmp_path / "in.txt").write_text("the keeper lit the lamp\n")
        args = [f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}",
                f"--vocab_file={vocab}", f"--init_checkpoint={ckpt}", "--max_seq_length=16"]
    else:
        args = [f"--input={ckpt}", f"--output={out}", f"--vocab_file={vocab}"]
    process = run_script(script, f"--bert_config_file={config}", *args, check=False)
    _one_line_error(process, data, "Checksum does not match", slot)
    assert not out.exists()


def _one_layer_config(tmp_path, tiny_model_files):
    settings = json.loads((tiny_model_files / "config.json").read_text())
    assert settings["num_hidden_layers"] == 2
    settings["num_hidden_layers"] = 1
    (tmp_path / "config.json").write_text(json.dumps(settings))
    return tmp_path / "config.json"


def _extract(tmp_path, vocab, config, ckpt, output, *args):
    (tmp_path / "in.txt").write_text("the keeper lit the lamp\n")
    return run_script("extract_features.py", f"--input_file={tmp_path / 'in.txt'}",
                      f"--output_file={tmp_path / output}", f"--vocab_file={vocab}",
                      f"--bert_config_file={config}", f"--init_checkpoint={ckpt}",
                      "--max_seq_length=16", *args, check=False)


def test_a_config_of_fewer_layers_than_the_checkpoint_is_refused_unless_asked_for(
        tmp_path, vocab, tiny_model_files):
    ckpt = tiny_model_files / "ckpt" / "bert_model.ckpt"  # 2 layers
    config = _one_layer_config(tmp_path, tiny_model_files)
    process = _extract(tmp_path, vocab, config, ckpt, "out.jsonl")
    _one_line_error(process, ckpt, "has 2 encoder layers", "has 1", "num_hidden_layers",
                    "--allow_fewer_layers")
    assert not list(tmp_path.glob("out*"))

    process = _extract(tmp_path, vocab, config, ckpt, "out.jsonl", "--allow_fewer_layers",
                       "--layers=-1")
    assert process.returncode == 0, process.stderr[-2000:]
    assert "loaded layers 0 to 0, dropped layers 1 to 1" in process.stderr
    assert "not used" not in process.stderr  # the dropped layer is said once, not twice
    # The cut model's last layer is the whole model's first.
    whole = _extract(tmp_path, vocab, tiny_model_files / "config.json", ckpt, "whole.jsonl",
                     "--layers=-2")
    assert whole.returncode == 0, whole.stderr[-2000:]
    cut = json.loads((tmp_path / "out.jsonl").read_text())["features"]
    first = json.loads((tmp_path / "whole.jsonl").read_text())["features"]
    np.testing.assert_allclose([t["layers"][0]["values"] for t in cut],
                               [t["layers"][0]["values"] for t in first], atol=1e-5)


def test_fine_tuning_from_a_checkpoint_of_more_layers_takes_the_opt_in(tmp_path, vocab,
                                                                       tiny_model_files):
    ckpt = tiny_model_files / "ckpt" / "bert_model.ckpt"
    config = _one_layer_config(tmp_path, tiny_model_files)
    (tmp_path / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                        + "1\t1\t2\tthe lamp\ta lamp\n" * 4)

    def train(*args):
        return run_script("run_classifier.py", "--task_name=MRPC", f"--data_dir={tmp_path}",
                          f"--vocab_file={vocab}", f"--bert_config_file={config}",
                          f"--init_checkpoint={ckpt}", f"--output_dir={tmp_path / 'out'}",
                          "--do_train", "--max_seq_length=16", "--train_batch_size=4",
                          "--num_train_epochs=1", *args, check=False)

    _one_line_error(train(), ckpt, "has 2 encoder layers", "--allow_fewer_layers")
    process = train("--allow_fewer_layers")
    assert process.returncode == 0, process.stderr[-2000:]
    assert "dropped layers 1 to 1" in process.stderr


def _tiny_pretrainer(config):
    from modeling.tasks import pretraining
    from modeling.training import distribution
    from modeling.training.trainer import Trainer
    return Trainer(pretraining.MaskedLMNextSentenceObjective(),
                   distribution.get_strategy("one_device"), config, 1e-3, 100, 0)


def _tiny_checkpoints(config, directory, steps):
    """ckpt-1 to ckpt-<steps> in `directory`, as a run saving each step writes them (without
    its training, which takes seconds to compile)."""
    import tensorflow as tf
    pretrainer = _tiny_pretrainer(config)
    manager = tf.train.CheckpointManager(pretrainer.checkpoint, str(directory), max_to_keep=5,
                                         checkpoint_name="ckpt")
    for step in range(1, steps + 1):
        pretrainer.optimizer.iterations.assign(step)
        manager.save(checkpoint_number=step)


def _rerun(config, directory, steps):
    """A rerun to `steps` of the run that wrote `directory`: it resumes, and has nothing left
    to train if it resumes from step `steps`."""
    pretrainer = _tiny_pretrainer(config)
    pretrainer.train(lambda skip: pytest.fail(f"training again from step {skip}"), 4,
                     str(directory), steps, 1, 1)
    return pretrainer


def test_a_run_resumes_from_the_newest_checkpoint_on_disk_whatever_the_state_file_says(
        tmp_path, tiny_config, caplog):
    import tensorflow as tf
    _tiny_checkpoints(tiny_config, tmp_path, 3)
    kept = {path.name: path.read_bytes() for path in tmp_path.glob("ckpt-*")}
    for state in (b'model_checkpoint_path: "ckpt-999"\nall_model_checkpoint_paths: "ckpt-999"\n',
                  b"\xff\xfe not a state file \x00"):
        (tmp_path / "checkpoint").write_bytes(state)
        caplog.clear()
        with caplog.at_level("INFO", logger="absl"):
            assert _rerun(tiny_config, tmp_path, 3).global_step == 3
        messages = [record.getMessage() for record in caplog.records]
        said = [m for m in messages if str(tmp_path / "checkpoint") in m
                and "ckpt-3" in m and "on disk" in m]
        assert len(said) == 1, messages
        assert f"Resumed from {tmp_path / 'ckpt-3'} at step 3" in messages
        # The state file is made to list what is on disk, for the CheckpointManager.
        assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-3")
    assert {path.name: path.read_bytes() for path in tmp_path.glob("ckpt-*")} == kept


def test_resuming_the_checkpoints_of_another_model_says_so(tmp_path, tiny_config):
    from modeling import BertConfig
    _tiny_checkpoints(tiny_config, tmp_path, 1)
    other = BertConfig.from_dict(dict(tiny_config.to_dict(), intermediate_size=41))
    with pytest.raises(ValueError) as raised:
        _rerun(other, tmp_path, 2)
    message = str(raised.value)
    assert "another model" in message and "damaged" not in message, message
    assert "intermediate/dense/kernel is (32, 37) there, (32, 41) here" in message, message
    assert (tmp_path / "ckpt-1.index").exists()


def test_training_into_the_output_dir_of_another_config_is_refused_before_writing(
        tmp_path, vocab, config_file):
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    rows = "".join(f"{i % 2}\t{i}\t{i + 1}\tthe keeper\ta lamp\n" for i in range(8))
    (tmp_path / "train.tsv").write_text(header + rows)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(json.loads(config_file.read_text()), intermediate_size=41)))
    out = tmp_path / "out"

    def train(config):
        return run_script("run_classifier.py", "--task_name=MRPC", f"--data_dir={tmp_path}",
                          f"--vocab_file={vocab}", f"--bert_config_file={config}",
                          f"--output_dir={out}", "--do_train", "--max_seq_length=16",
                          "--train_batch_size=4", "--num_train_epochs=1", check=False)

    assert train(config_file).returncode == 0
    (out / "train.tf_record").unlink()
    process = train(other)
    line = _one_line_error(process, out / "ckpt-2", "another model",
                           "intermediate/dense/kernel is (64, 256) there, (64, 41) here")
    assert process.stderr.strip().splitlines()[-1] == line  # no TensorFlow warnings after it
    assert not (out / "train.tf_record").exists()


def test_a_rerun_with_another_batch_size_is_refused_before_work(tmp_path, config_file):
    """Its steps count other batches: resumed, it would read from the wrong place, or stop at
    once past its fewer steps (as a finished run rerun with a larger batch did, silently)."""
    records = _pretraining_records(tmp_path / "data.tfrecord", 40)
    first = _pretrain(tmp_path, config_file, records, "--do_train")
    assert first.returncode == 0, first.stderr[-2000:]
    kept = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()
            if path.is_file()}
    line = _one_line_error(_pretrain(tmp_path, config_file, records, "--do_train",
                                     "--train_batch_size=16"),
                           "--train_batch_size=16, but", "ckpt-12 was trained with "
                           "--train_batch_size=8", "another --output_dir")
    assert {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()
            if path.is_file()} == kept, line


def test_a_second_training_run_in_a_live_runs_output_dir_is_refused(tmp_path, vocab,
                                                                    config_file):
    from modeling.runtime import output_lock
    from modeling.tasks import pretraining
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                        + "1\t1\t2\tthe lamp\ta lamp\n" * 4)
    with output_lock.held(str(out)):
        # Every fine-tuning script trains through fine_tuning.run, as run_classifier does.
        process = _classifier(tmp_path, vocab, "--do_train", "--max_seq_length=16",
                              "--train_batch_size=2")
        options = pretraining.PretrainingOptions(
            output_dir=str(out), bert_config_file=str(config_file), do_train=True,
            input_file=str(tmp_path / "absent.tfrecord"))
        with pytest.raises(ValueError, match=f"pid {os.getpid()} "):
            pretraining.run(options)
    _one_line_error(process, f"--output_dir={out}", f"pid {os.getpid()} ")
    assert os.listdir(out) == []


def test_the_lock_of_a_killed_run_is_taken_over(tmp_path, caplog):
    import signal
    from modeling.runtime import output_lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from modeling.runtime import output_lock; "
         "lock = output_lock.held(sys.argv[1]); lock.__enter__(); print('held', flush=True); "
         "time.sleep(60)",
         str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(ValueError, match=f"pid {holder.pid} "):
        with output_lock.held(str(tmp_path)):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdout.close()
    with caplog.at_level("WARNING", logger="absl"):
        with output_lock.held(str(tmp_path)):
            assert f"pid {os.getpid()} " in (tmp_path / "training.lock").read_text()
    assert [r for r in caplog.records if "Took over" in r.getMessage()
            and f"pid {holder.pid} " in r.getMessage()]
    assert not (tmp_path / "training.lock").exists()


def _on_a_small_disk(mount, size, command, listed):
    """Runs `command` (argv) with a `size` tmpfs mounted at `mount`: a real full disk, in a user
    and mount namespace of its own (where the kernel lets unprivileged users make one; else the
    test is skipped). Returns the CompletedProcess; its stdout lists what the folder `listed`
    holds at the end, read inside the namespace, which its tmpfs goes with."""
    import shlex
    mount.mkdir()
    mount_command = f"mount -t tmpfs -o size={size} none {shlex.quote(str(mount))}"
    if subprocess.run(["unshare", "-r", "-m", "sh", "-c", mount_command],
                      capture_output=True).returncode != 0:
        pytest.skip("no unprivileged user and mount namespaces here (unshare -r -m)")
    return subprocess.run(
        ["unshare", "-r", "-m", "sh", "-c", f"{mount_command} && {shlex.join(command)}; "
         f"status=$?; ls -A {shlex.quote(str(listed))}; exit $status"],
        capture_output=True, text=True, env=script_env(), timeout=600)


def test_a_full_disk_while_saving_a_checkpoint_is_one_line_and_leaves_nothing(tmp_path, vocab):
    """--output_dir on a 300 KB disk: the records fit; the first checkpoint (1.4 MB with its
    Adam slots) does not."""
    (tmp_path / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                        + "1\t1\t2\tthe lamp\ta lamp\n" * 4)
    (tmp_path / "config.json").write_text(json.dumps(dict(json.loads(CONFIG.read_text()),
                                                          vocab_size=10)))
    out = tmp_path / "small" / "out"
    process = _on_a_small_disk(tmp_path / "small", "300k", script_command(
        "run_classifier.py", "--task_name=MRPC", f"--data_dir={tmp_path}",
        f"--vocab_file={vocab}", f"--bert_config_file={tmp_path / 'config.json'}",
        f"--output_dir={out}", "--do_train", "--max_seq_length=16", "--train_batch_size=2",
        "--num_train_epochs=0.5"), out)
    _one_line_error(process, f"{out / 'ckpt-1'}: no space left on device", "MB needed")
    assert sorted(process.stdout.split()) == ["train", "train.tf_record"], process.stdout


@pytest.mark.parametrize("workers", [1, 2])
def test_a_full_disk_under_create_pretraining_data_is_one_line_and_leaves_nothing(
        tmp_path, vocab, workers):
    """Records of about 680 KB onto a 200 KB disk; with two workers, each shard's alone is more
    than the disk holds."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the keeper lit the lamp.\na lamp lit a keeper.\nthe lamp.\n\n" * 200)
    out = tmp_path / "small" / "out.tfrecord"
    process = _on_a_small_disk(tmp_path / "small", "200k", script_command(
        "create_pretraining_data.py", f"--input_file={corpus}", f"--output_file={out}",
        f"--vocab_file={vocab}", "--max_seq_length=32", "--dupe_factor=5",
        f"--num_workers={workers}"), out.parent)
    _one_line_error(process, f"{out}: no space left on device", "KB needed", "free in")
    assert process.stdout.split() == [], process.stdout


def test_converting_a_keras_file_onto_itself_is_refused(tmp_path, tiny_model_files):
    model = tmp_path / "model.keras"
    model.write_bytes((tiny_model_files / "model.keras").read_bytes())
    process = run_script("convert_checkpoint.py", f"--input={model}", f"--output={model}",
                         check=False)
    _one_line_error(process, f"--output={model}")
    assert model.read_bytes() == (tiny_model_files / "model.keras").read_bytes()
    assert os.listdir(tmp_path) == ["model.keras"]

# --- Inputs and outputs checked up front (issue 27) ------------------------------------------

def _squad_file(path, ids):
    """A SQuAD file of one article, a paragraph per id; its questions have these ids."""
    paragraphs = [{"context": "the keeper lit the lamp.",
                   "qas": [{"id": qid, "question": "who lit the lamp?",
                            "answers": [{"text": "the keeper", "answer_start": 0}]}]}
                  for qid in ids]
    path.write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": paragraphs}]}))
    return path


def test_run_squad_refuses_two_questions_of_one_id_before_predicting(tmp_path, vocab,
                                                                     config_file):
    predict = _squad_file(tmp_path / "dev.json", ["q0", "q1", "q2", "q1"])
    process = run_script("run_squad.py", f"--vocab_file={vocab}",
                         f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
                         "--do_predict", f"--predict_file={predict}", "--allow_untrained",
                         "--max_seq_length=32", "--max_query_length=8", check=False)
    _one_line_error(process, predict, "'q1'", "data[0].paragraphs[1].qas[0]",
                    "data[0].paragraphs[3].qas[0]")
    assert not (tmp_path / "out" / "predictions.json").exists()


def test_run_squad_refuses_an_id_that_is_no_string_before_predicting(tmp_path, vocab,
                                                                     config_file):
    predict = _squad_file(tmp_path / "dev.json", ["q0", 7])
    process = run_script("run_squad.py", f"--vocab_file={vocab}",
                         f"--bert_config_file={config_file}", f"--output_dir={tmp_path / 'out'}",
                         "--do_predict", f"--predict_file={predict}", "--allow_untrained",
                         "--max_seq_length=32", "--max_query_length=8", check=False)
    _one_line_error(process, f"{predict}: data[0].paragraphs[1].qas[0]: 'id' is 7, expected "
                             f"type str")
    assert not (tmp_path / "out" / "predictions.json").exists()


def test_two_swag_examples_of_one_id_are_refused_naming_both_lines(tmp_path):
    from modeling.data import multiple_choice
    header = ",sent1,sent2,ending0,ending1,ending2,ending3\n"  # the index column, unnamed
    row = "{},a,b,w,x,y,z\n"
    path = tmp_path / "test.csv"
    path.write_text(header + row.format(7) + row.format(8) + row.format(7))
    with pytest.raises(ValueError, match=rf"{path}: id '7' is used twice, at line 2 and at "
                                         rf"line 4"):
        multiple_choice.read_swag(path, has_labels=False)


def _fine_tuning_options(tmp_path, vocab, config_file, **changes):
    from modeling.training import fine_tuning
    options = {"bert_config_file": str(config_file), "vocab_file": str(vocab),
               "output_dir": str(tmp_path / "out"), **changes}
    return fine_tuning.FineTuningOptions(**options)


@pytest.mark.parametrize("flag, case", [
    ("export_dir", "a_file"), ("export_dir", "under_a_file"), ("output_dir", "under_proc"),
    ("output_dir", "export_is_a_file"),
])
def test_outputs_that_cannot_be_written_are_refused_by_the_options(tmp_path, vocab, config_file,
                                                                  flag, case):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    path = {"a_file": a_file, "under_a_file": a_file / "serving",
            "under_proc": pathlib.Path("/proc/bert_out"), "export_is_a_file": tmp_path / "out"}
    if case == "export_is_a_file":  # where training writes the original-format checkpoint
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "export").write_text("")
    options = _fine_tuning_options(tmp_path, vocab, config_file, do_train=True,
                                   **{flag: str(path[case])})
    with pytest.raises(ValueError, match=f"--{flag}={path[case]}: "):
        options.check()


@pytest.mark.parametrize("direction", ["to_checkpoint", "to_hugging_face"])
def test_convert_checkpoint_output_that_cannot_be_written_is_refused_first(tmp_path,
                                                                          direction):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    # Neither input exists: the output is checked before anything is read.
    source, output = {"to_checkpoint": ("model.keras", a_file / "bert_model.ckpt"),
                      "to_hugging_face": ("bert_model.ckpt", a_file)}[direction]
    process = run_script("convert_checkpoint.py", f"--input={tmp_path / source}",
                         f"--output={output}", check=False)
    _one_line_error(process, f"--output={output}", "is a file, not a directory")


def test_a_train_tsv_that_is_a_directory_is_named(tmp_path):
    from modeling.data import classifier
    (tmp_path / "train.tsv").mkdir()
    with pytest.raises(ValueError, match=f"--data_dir={tmp_path}: {tmp_path / 'train.tsv'} is "
                                         f"a directory, not a file"):
        classifier.get_processor("MRPC").get_train_examples(str(tmp_path))


@pytest.mark.parametrize("flag", ["vocab_file", "bert_config_file"])
def test_input_files_that_cannot_be_read_are_refused_by_the_options(tmp_path, vocab,
                                                                   config_file, flag):
    folder = tmp_path / "folder"
    folder.mkdir()
    options = _fine_tuning_options(tmp_path, vocab, config_file, do_train=True,
                                   **{flag: str(folder)})
    with pytest.raises(ValueError, match=f"--{flag}={folder} is a directory, not a file"):
        options.check()
    missing = tmp_path / "missing.txt"
    options = _fine_tuning_options(tmp_path, vocab, config_file, **{flag: str(missing)})
    with pytest.raises(ValueError, match=f"--{flag}={missing} does not exist"):
        options.check()
    # A pipe (`--vocab_file=<(zcat vocab.txt.gz)`) would be read more than once (the export
    # copies the vocabulary, pre-training the config): refused, and not opened, which would
    # wait for a writer.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    options = _fine_tuning_options(tmp_path, vocab, config_file, **{flag: str(pipe)})
    with pytest.raises(ValueError, match=f"--{flag}={pipe} is a pipe, not a regular file"):
        options.check()


def test_query_savedmodel_names_a_missing_export_dir(tmp_path):
    missing = tmp_path / "serving"
    process = run_script("query_savedmodel.py", missing, "the lamp", check=False)
    _one_line_error(process, f"EXPORT_DIR {missing} does not exist")


def test_build_vocab_refuses_a_negative_count_naming_the_flag(tmp_path, corpus):
    process = run_script("build_vocab.py", f"--input_file={corpus}",
                         f"--output_file={tmp_path / 'vocab.txt'}", "--num_unused=-5",
                         check=False)
    _one_line_error(process, "--num_unused must not be negative, got -5")
    assert not (tmp_path / "vocab.txt").exists()


def test_a_tf_config_that_is_not_json_is_named(tmp_path, vocab, config_file, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": ')
    options = _fine_tuning_options(tmp_path, vocab, config_file, do_train=True,
                                   distribution_strategy="multi_worker_mirrored")
    with pytest.raises(ValueError, match=r"^TF_CONFIG is not JSON: Expecting value at line 1 "
                                         r"column 13 \(char 12\)$"):
        options.check()


# --- A diverging run is stopped, not published -----------------------------------------------

@pytest.mark.parametrize("script", ["run_classifier.py", "run_pretraining.py"])
def test_a_diverging_run_stops_at_its_first_non_finite_loss(tmp_path, vocab, config_file,
                                                           script):
    import numpy as np
    import re
    import tensorflow as tf
    every_step = ["--learning_rate=1e10", "--iterations_per_loop=3", "--save_checkpoints_steps=1",
                  "--keep_checkpoint_max=100", "--do_train", "--do_eval"]
    if script == "run_classifier.py":
        header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        rows = "1\t1\t2\tthe lamp\ta lamp\n0\t3\t4\tthe keeper\ta lit lamp\n"
        (tmp_path / "train.tsv").write_text(header + rows * 10)
        (tmp_path / "dev.tsv").write_text(header + rows)
        process = _classifier(tmp_path, vocab, *every_step, "--max_seq_length=16",
                              "--train_batch_size=2", f"--export_dir={tmp_path / 'serving'}")
    else:
        records = _pretraining_records(tmp_path / "data.tfrecord", 40)
        process = _pretrain(tmp_path, config_file, records, *every_step)
    line = _one_line_error(process, "the loss is nan", "--learning_rate=1e+10",
                           "--warmup_proportion", "--precision=float32")
    step = int(re.search(r"error: step (\d+): ", line).group(1))
    out = tmp_path / "out"
    saved = sorted(int(path.name[5:-6]) for path in out.glob("ckpt-*.index"))
    assert step > 1 and saved == list(range(1, step)), (line, saved)
    assert f"ckpt-{step - 1}, the newest checkpoint, is the last finite one" in line
    assert tf.train.latest_checkpoint(str(out)) == str(out / f"ckpt-{step - 1}")
    reader = tf.train.load_checkpoint(str(out / f"ckpt-{step - 1}"))
    for name, dtype in reader.get_variable_to_dtype_map().items():
        assert not dtype.is_floating or np.isfinite(reader.get_tensor(name)).all(), name
    assert not (out / "export").exists() and not (out / "eval_results.txt").exists()
    assert not (tmp_path / "serving").exists()


@pytest.mark.parametrize("tf_config, problem", [
    ("[]", "a JSON list, not an object"),
    ('{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}}',
     'a cluster but no "task" for this process'),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 1}}',
     "the task's index 1 is not one of the 1 worker addresses"),
    ('{"task": {"type": "worker", "index": 0}}', "a task but no cluster"),
])
def test_a_tf_config_that_names_no_cluster_to_join_is_named(tmp_path, vocab, config_file,
                                                           monkeypatch, tf_config, problem):
    """TensorFlow itself takes `[]` as one worker, and names neither TF_CONFIG nor the task."""
    monkeypatch.setenv("TF_CONFIG", tf_config)
    options = _fine_tuning_options(tmp_path, vocab, config_file, do_train=True,
                                   distribution_strategy="multi_worker_mirrored")
    with pytest.raises(ValueError) as raised:
        options.check()
    assert str(raised.value).startswith(f"TF_CONFIG={tf_config}: {problem}"), raised.value


def test_an_export_keeps_its_version_against_one_of_the_same_second_and_cleans_up(
        tmp_path, vocab, config_file, monkeypatch):
    """Another export finishing the same second's version while this one is written (as two
    runs exporting into one --export_dir at once) leaves this one the next version; the
    temporary directory of an export killed earlier (SIGTERM), of another version, is gone."""
    import types
    from modeling import BertConfig, export
    from modeling.export import base
    from modeling.models.classifier import BertClassifier
    serving, second = tmp_path / "serving", 1_700_000_000
    stale = serving / f"{second - 60}.tmp-{dead_pid()}"
    stale.mkdir(parents=True)
    (stale / "saved_model.pb").write_bytes(b"half")
    monkeypatch.setattr(base, "time", types.SimpleNamespace(time=lambda: second))
    write_requests = base.warmup.write_requests

    def meanwhile_another_export(*args):
        (serving / str(second)).mkdir()
        (serving / str(second) / "saved_model.pb").write_bytes(b"the other export's")
        write_requests(*args)
    monkeypatch.setattr(base.warmup, "write_requests", meanwhile_another_export)
    model = BertClassifier(BertConfig.from_json_file(config_file), num_labels=2)
    module = export.ClassifierExport(model, str(vocab), True, 16, ["0", "1"], True)
    assert export.save_versioned(module, str(serving)) == str(serving / str(second + 1))
    assert (serving / str(second) / "saved_model.pb").read_bytes() == b"the other export's"
    assert sorted(os.listdir(serving)) == [str(second), str(second + 1)]
    assert (serving / str(second + 1) / "assets.extra" / "tf_serving_warmup_requests").exists()


# --- Streams: refused up front, since every script reads its inputs more than once -----------

def test_run_pretraining_refuses_a_named_pipe_without_reading_it(tmp_path, config_file):
    records = _pretraining_records(tmp_path / "data.tfrecord", 40)
    fifo = tmp_path / "tr.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f'cat "{records}" > "{fifo}"'])
    try:
        process = subprocess.run(script_command(
            "run_pretraining.py", f"--input_file={fifo}", f"--output_dir={tmp_path / 'out'}",
            f"--bert_config_file={config_file}", "--max_seq_length=16",
            "--max_predictions_per_seq=3", "--train_batch_size=8", "--num_train_steps=2",
            "--do_train"), capture_output=True, text=True, env=script_env(), timeout=120)
        line = _one_line_error(process, f"--input_file={fifo} is a pipe", "write it to a file")
        assert writer.poll() is None, line  # the pipe was never opened: its writer still waits
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.parametrize("stdin", ["pipe", "null_device"])
def test_create_pretraining_data_refuses_stdin_naming_it(tmp_path, vocab, corpus, stdin):
    out = tmp_path / "out.tfrecord"
    process = subprocess.run(
        script_command("create_pretraining_data.py", "--input_file=/dev/stdin",
                       f"--output_file={out}", f"--vocab_file={vocab}"),
        input=corpus.read_text() if stdin == "pipe" else None,
        stdin=None if stdin == "pipe" else subprocess.DEVNULL, capture_output=True, text=True,
        env=script_env(), timeout=120)
    kind = "a pipe" if stdin == "pipe" else "a character device"
    _one_line_error(process, f"--input_file=/dev/stdin is {kind}, not a regular file")
    assert not list(tmp_path.glob("out*"))


# --- A UTF-8 byte order mark reads as no mark ------------------------------------------------

def _with_bom(path):
    marked = path.with_name("bom-" + path.name)
    marked.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    return marked


def test_a_squad_file_with_a_bom_reads_as_without(tmp_path):
    import types
    from modeling.tasks.squad import SquadTask
    plain = _squad_file(tmp_path / "dev.json", ["q0", "q1"])
    options = types.SimpleNamespace(do_train=False, do_predict=True)
    read = []
    for path in (plain, _with_bom(plain)):
        task = SquadTask(predict_file=str(path))
        task.read(options, None)
        read.append(([example.qas_id for example in task.test], task.answered))
    assert read[0] == read[1] == (["q0", "q1"], True)


def test_a_conll_file_with_a_bom_reads_as_without(tmp_path):
    from modeling.data import ner
    plain = tmp_path / "train.txt"
    plain.write_text("-DOCSTART- -X- O O\n\nthe DT B-NP O\nkeeper NN I-NP B-PER\n")
    sentences = [ner.read_conll(path) for path in (plain, _with_bom(plain))]
    assert [(s.words, s.tags) for s in sentences[0]] == [(s.words, s.tags) for s in sentences[1]]
    assert sentences[1][0].words == ["the", "keeper"]


@pytest.mark.parametrize("name, content, read", [
    ("vocab.txt", "[PAD]\n[UNK]\n", lambda path: list(tokenization.load_vocab(str(path)))),
    ("input.txt", "the lamp ||| a keeper\n", lambda path: [
        (example.text_a, example.text_b) for example in text.read_examples(str(path))]),
    ("config.json", '{"hidden_size": 32}', lambda path: encoder_config.read_json_object(path)),
])
def test_other_text_inputs_with_a_bom_read_as_without(tmp_path, name, content, read):
    plain = tmp_path / name
    plain.write_text(content)
    assert read(plain) == read(_with_bom(plain))
