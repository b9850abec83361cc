"""The paper's Table 5 ablations end to end, as a user runs them: records of real Wikipedia
for "No NSP" (--pretraining_objective=mlm) and "LTR & No NSP" (ltr), pre-training on them,
and fine-tuning and exporting from the left-to-right checkpoint."""
import json

import numpy as np
import pytest
import tensorflow as tf

from conftest import REFS
from scripts import run_script, wikipedia_text
from serving import serve
from test_data_pretraining import parse
from test_run_classifier import TEST_ROWS, classifier_flags, read_test_results, write_mrpc

SEQ = 32


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three real articles, converted by wikiextractor_to_text.py."""
    root = tmp_path_factory.mktemp("corpus")
    articles = wikipedia_text(root, "AA/wiki_04").split("\n\n")
    (root / "three.txt").write_text("\n\n".join(articles[:3]) + "\n\n", encoding="utf-8")
    return root / "three.txt"


def make_records(corpus, output, objective, *extra, check=True):
    return run_script("create_pretraining_data.py", f"--input_file={corpus}",
                      f"--output_file={output}", f"--vocab_file={REFS / 'vocab/uncased_vocab.txt'}",
                      f"--max_seq_length={SEQ}", "--max_predictions_per_seq=5", "--dupe_factor=1",
                      f"--pretraining_objective={objective}", *extra, check=check)


@pytest.fixture(scope="module")
def records(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("records")
    for objective in ("mlm", "ltr"):
        make_records(corpus, root / f"{objective}.tfrecord", objective)
    return root


def write_config(path, **extra):
    path.write_text(json.dumps({
        "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 64,
        "type_vocab_size": 2, **extra}))
    return path


def pretrain(records, config, output_dir, objective, *extra, check=True):
    return run_script("run_pretraining.py", f"--input_file={records}",
                      f"--bert_config_file={config}", f"--output_dir={output_dir}",
                      f"--max_seq_length={SEQ}", "--max_predictions_per_seq=5",
                      "--train_batch_size=8", "--num_train_steps=6", "--num_warmup_steps=1",
                      "--learning_rate=1e-3", "--iterations_per_loop=3", "--do_train",
                      f"--pretraining_objective={objective}", *extra, check=check)


def test_no_nsp_records_are_contiguous_text_without_next_sentence_labels(records, corpus):
    from modeling.text import tokenization
    tokenizer = tokenization.FullTokenizer(str(REFS / "vocab/uncased_vocab.txt"), True)
    text = " ".join(str(i) for i in tokenizer.convert_tokens_to_ids(
        tokenizer.tokenize(corpus.read_text(encoding="utf-8"))))
    ltr, mlm = parse(records / "ltr.tfrecord"), parse(records / "mlm.tfrecord")
    assert sorted(ltr[0]) == ["input_ids", "input_mask", "segment_ids"]
    assert sorted(mlm[0]) == ["input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions",
                              "masked_lm_weights", "segment_ids"]
    assert not any(103 in record["input_ids"] for record in ltr)  # nothing masked
    assert sum(103 in record["input_ids"] for record in mlm) > 0.9 * len(mlm)
    for record in ltr:  # [CLS] A [SEP] B [SEP], A and B from the corpus in this order
        length = sum(record["input_mask"])
        ids, segments = record["input_ids"][:length], record["segment_ids"][:length]
        a_end = segments.index(1) if 1 in segments else length
        a, b = ids[1:a_end - 1], ids[a_end:length - 1]
        a_text, b_text = " ".join(map(str, a)), " ".join(map(str, b))
        assert f" {a_text} " in f" {text} "
        if b:
            assert text.index(b_text, text.index(a_text)) >= text.index(a_text)


def test_ltr_records_refuse_masking_flags(corpus, tmp_path):
    process = make_records(corpus, tmp_path / "out.tfrecord", "ltr", "--mask_proportions=80,0,20",
                           "--do_whole_word_mask", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines() == [
        "create_pretraining_data.py: error: --pretraining_objective=ltr predicts every next token "
        "and masks none: --do_whole_word_mask, --mask_proportions do not apply"]


def test_no_nsp_pretraining_has_no_next_sentence_part(records, tmp_path):
    config = write_config(tmp_path / "config.json")
    process = pretrain(records / "mlm.tfrecord", config, tmp_path / "out", "mlm", "--do_eval")
    assert "next_sentence" not in process.stderr
    lines = (tmp_path / "out/eval_results.txt").read_text().splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "global_step", "loss", "masked_lm_accuracy", "masked_lm_loss"]
    names = tf.train.load_checkpoint(str(tmp_path / "out/export/bert_model.ckpt")) \
        .get_variable_to_shape_map()
    assert "cls/predictions/output_bias" in names and "bert/pooler/dense/kernel" in names
    assert not any(name.startswith("cls/seq_relationship") for name in names)


def test_left_to_right_model_pretrains_fine_tunes_and_exports_left_to_right(records, tmp_path):
    config = write_config(tmp_path / "config.json")
    process = pretrain(records / "ltr.tfrecord", config, tmp_path / "ltr", "ltr", "--do_eval")
    assert "next_token_accuracy" in process.stderr and "masked_lm" not in process.stderr
    exported = tmp_path / "ltr/export"
    assert json.loads((exported / "bert_config.json").read_text())["causal_attention"] is True
    data = write_mrpc(tmp_path / "mrpc")
    run_script("run_classifier.py", *classifier_flags(
        data, exported / "bert_config.json", tmp_path / "mrpc_out", "--do_train", "--do_predict",
        f"--init_checkpoint={exported / 'bert_model.ckpt'}",
        f"--export_dir={tmp_path / 'serving'}"))
    version = next(p for p in (tmp_path / "serving").iterdir() if p.name.isdigit())
    (served,) = serve(version, [("serving_default", {"text_a": [a for a, _ in TEST_ROWS],
                                                     "text_b": [b for _, b in TEST_ROWS]})])
    expected = read_test_results(tmp_path / "mrpc_out/test_results.tsv")
    np.testing.assert_allclose(served["session"]["probabilities"], expected, atol=1e-5, rtol=0)


def test_contradictory_objectives_are_refused_in_one_line(records, tmp_path):
    config = write_config(tmp_path / "config.json")
    process = pretrain(records / "ltr.tfrecord", config, tmp_path / "a", "mlm_nsp", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1] == (
        f"run_pretraining.py: error: {records / 'ltr.tfrecord'} holds records for "
        f"--pretraining_objective=ltr (features input_ids, input_mask, segment_ids), not for "
        f"--pretraining_objective=mlm_nsp: make them with create_pretraining_data.py "
        f"--pretraining_objective=mlm_nsp")
    causal = write_config(tmp_path / "causal.json", causal_attention=True)
    process = pretrain(records / "mlm.tfrecord", causal, tmp_path / "b", "mlm", check=False)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1] == (
        f"run_pretraining.py: error: {causal} says causal_attention (a left-to-right model), "
        f"which only --pretraining_objective=ltr trains, not --pretraining_objective=mlm")
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").glob("ckpt-*"))
