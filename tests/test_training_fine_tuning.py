"""`fine_tuning.run` with dynamic padding (the default) gives fixed padding's results, in-process
on a tiny model without dropout: every task's evaluation and predictions from the same weights,
under float32, mixed_bfloat16 and mixed_float16, and the classifier's training under XLA and
mixed_float16; and the options' checks. (Each run traces its own model: these are the slow tests
of this file.)"""
import csv
import json

import numpy as np
import pytest

from modeling.data import ner as ner_data
from modeling.evaluation import squad_answers
from modeling.tasks.classifier import ClassifierTask
from modeling.tasks.multiple_choice import MultipleChoiceTask
from modeling.tasks.ner import NerTask
from modeling.tasks.squad import SquadTask
from modeling.training import fine_tuning, trainer
from modeling.training.fine_tuning import FineTuningOptions
from modeling.training.input_pipeline import DynamicPadding, FixedPadding, LengthBuckets

SEQ = 40
MULTIPLE = 8  # small, so that batches come in several lengths below SEQ
WORDS = ("the keeper lit lamp at dusk boat left harbour early market closed before noon river "
         "rose in spring storm broke old mast children carried stones to wall baker sold bread "
         "square library kept maps of coast fish were heavy nets").split()
NAMES = ["Mara", "Quill", "Tobias", "Elwin", "Lisbon", "Oslo", "Guild", "Harbour"]


def sentence(rng, low, high):
    return " ".join(rng.choice(WORDS, size=int(rng.integers(low, high + 1))))


def write_model_files(directory, words, layers=2):
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","]
                               + sorted(set(words))) + "\n", "utf-8")
    config = directory / "bert_config.json"
    config.write_text(json.dumps({
        "vocab_size": len(vocab.read_text("utf-8").split()), "hidden_size": 32,
        "num_hidden_layers": layers, "num_attention_heads": 4, "intermediate_size": 37,
        "max_position_embeddings": SEQ, "type_vocab_size": 2, "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0}))
    return vocab, config


def run(task, directory, name, vocab, config, **options):
    """One in-process run into directory/name; returns that directory."""
    output_dir = directory / name
    defaults = dict(max_seq_length=SEQ, train_batch_size=4, eval_batch_size=3,
                    predict_batch_size=3, learning_rate=1e-3, num_train_epochs=1.0,
                    save_checkpoints_steps=100, iterations_per_loop=3, padding_multiple=MULTIPLE,
                    allow_untrained=True)  # predictions from the seeded initial weights
    defaults.update(options)
    try:
        fine_tuning.run(task, FineTuningOptions(
            output_dir=str(output_dir), bert_config_file=str(config), vocab_file=str(vocab),
            **defaults))
    finally:
        trainer.set_precision("float32")
    return output_dir


def read_results(path):
    return {key: float(value) for key, value in
            (line.split(" = ") for line in path.read_text().splitlines())}


def read_rows(path, skip_columns=0):
    return np.array([[float(v) for v in line.split("\t")[skip_columns:]]
                     for line in path.read_text().splitlines()])


def assert_same_results(fixed, dynamic, atol=1e-5):
    one, other = read_results(fixed), read_results(dynamic)
    assert one.keys() == other.keys()
    for key in one:
        assert other[key] == pytest.approx(one[key], abs=atol), key


def _runs_both(task_factory, tmp_path, vocab, config, **options):
    """(fixed, dynamic) output directories of the same run."""
    return (run(task_factory(), tmp_path, "fixed", vocab, config, dynamic_padding=False,
                **options),
            run(task_factory(), tmp_path, "dynamic", vocab, config, **options))


def write_mrpc(directory, seed):
    rng = np.random.default_rng(seed)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    for split, count in (("train", 8), ("dev", 7), ("test", 5)):
        rows = [f"{i % 2}\t{i}\t{i}\t{sentence(rng, 1, 12)}\t{sentence(rng, 1, 14)}\n"
                for i in range(count)]
        (directory / f"{split}.tsv").write_text(header + "".join(rows), "utf-8")


def test_classifier_trained_under_xla(tmp_path, caplog):
    """Training too: the batches' sequence lengths differ between steps, so XLA compiles the
    step once per length; the weights come out as with fixed padding."""
    write_mrpc(tmp_path, 1)
    vocab, config = write_model_files(tmp_path, WORDS, layers=1)  # XLA compiles it per length
    caplog.set_level("INFO", logger="absl")
    fixed, dynamic = _runs_both(lambda: ClassifierTask(str(tmp_path), "MRPC"), tmp_path, vocab,
                                config, do_train=True, do_eval=True, do_predict=True,
                                use_xla=True)
    assert "Batches: dynamic padding: each batch cut to its longest example" in caplog.text
    assert_same_results(fixed / "eval_results.txt", dynamic / "eval_results.txt")
    np.testing.assert_allclose(read_rows(dynamic / "test_results.tsv"),
                               read_rows(fixed / "test_results.tsv"), atol=1e-5, rtol=0)


def test_classifier_trained_under_mixed_float16(tmp_path):
    """float16 with its loss scaling: the -10000 added to padded keys is still a float16 whose
    exp() is exactly 0, so the training steps and the predictions equal fixed padding's."""
    write_mrpc(tmp_path, 5)
    vocab, config = write_model_files(tmp_path, WORDS)
    fixed, dynamic = _runs_both(lambda: ClassifierTask(str(tmp_path), "MRPC"), tmp_path, vocab,
                                config, do_train=True, do_eval=True, do_predict=True,
                                precision="mixed_float16")
    assert read_results(dynamic / "eval_results.txt")["global_step"] == 2  # no step skipped
    assert_same_results(fixed / "eval_results.txt", dynamic / "eval_results.txt")
    np.testing.assert_allclose(read_rows(dynamic / "test_results.tsv"),
                               read_rows(fixed / "test_results.tsv"), atol=1e-5, rtol=0)


def test_multiple_choice_under_mixed_bfloat16(tmp_path):
    """Bit for bit here. (Trained under mixed_bfloat16, the two differ by about 3e-5 after two
    steps: gradients summed over other shapes round to other bfloat16 values.)"""
    rng = np.random.default_rng(2)
    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3", "label"]
    for split, count in (("train", 8), ("val", 5), ("test", 4)):
        with open(tmp_path / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(header if split != "test" else header[:-1])
            for i in range(count):
                row = [i, "v", "0", "", sentence(rng, 1, 9), sentence(rng, 1, 3), "gold",
                       *(sentence(rng, 1, 12) for _ in range(4))]
                writer.writerow(row + [i % 4] if split != "test" else row)
    vocab, config = write_model_files(tmp_path, WORDS)
    fixed, dynamic = _runs_both(lambda: MultipleChoiceTask(str(tmp_path)), tmp_path, vocab,
                                config, do_eval=True, do_predict=True,
                                precision="mixed_bfloat16")
    assert_same_results(fixed / "eval_results.txt", dynamic / "eval_results.txt")
    np.testing.assert_allclose(read_rows(dynamic / "test_results.tsv", 1),
                               read_rows(fixed / "test_results.tsv", 1), atol=1e-5, rtol=0)


def test_ner_per_token_predictions(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    tags = ["O", "I-PER", "I-LOC", "I-ORG"]

    def text(count):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for index in range(count):  # 1 to 40 words: the longest take two windows
            entities = list(tags[1:]) if index == 0 else []  # every tag in the training file
            for _ in range(int(rng.integers(1, 41))):
                if entities or rng.random() < 0.2:  # two words of a type, then an O
                    tag = entities.pop() if entities else str(rng.choice(tags[1:]))
                    lines += [f"{rng.choice(NAMES)} NNP B-NP {tag}"] * 2
                lines.append(f"{rng.choice(WORDS)} NN B-NP O")
            lines.append("")
        return "\n".join(lines)
    for name, count in (("train", 10), ("valid", 6), ("test", 5)):
        (tmp_path / f"{name}.txt").write_text(text(count), "utf-8")
    vocab, config = write_model_files(tmp_path, WORDS + NAMES)
    predicted = []
    assemble = ner_data.assemble_predictions

    def keep(sentences, features, predicted_ids, labels):
        predicted.append((features, predicted_ids))
        return assemble(sentences, features, predicted_ids, labels)
    monkeypatch.setattr(ner_data, "assemble_predictions", keep)
    fixed, dynamic = _runs_both(lambda: NerTask(str(tmp_path)), tmp_path, vocab, config,
                                do_eval=True, do_predict=True, do_lower_case=False)
    assert_same_results(fixed / "eval_results.txt", dynamic / "eval_results.txt")
    for name in ("eval_predictions.txt", "test_predictions.txt"):
        assert (dynamic / name).read_text("utf-8") == (fixed / name).read_text("utf-8")
    (features, fixed_ids), _, (_, dynamic_ids), _ = predicted  # eval, predict of each run
    assert fixed_ids.shape == dynamic_ids.shape == (len(features), SEQ)
    real = np.array([f.input_mask for f in features], bool)
    assert real.sum(axis=1).min() < SEQ - MULTIPLE  # there is padding to cut
    np.testing.assert_array_equal(dynamic_ids[real], fixed_ids[real])


def test_squad_keeps_fixed_padding_and_its_answers(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    paragraphs = []
    for index in range(4):
        context = sentence(rng, 5, 60)  # the longest need several windows
        words = context.split()
        qas = []
        for q in range(2):
            start = int(rng.integers(0, len(words)))
            answer = " ".join(words[start:start + 2])
            qas.append({"id": f"q{index}{q}", "question": sentence(rng, 2, 6),
                        "answers": [{"text": answer,
                                     "answer_start": len(" ".join(words[:start] + [""]))}],
                        "is_impossible": False})
        paragraphs.append({"context": context, "qas": qas})
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t",
                                                              "paragraphs": paragraphs}]}))
    vocab, config = write_model_files(tmp_path, WORDS)
    results = []
    write_predictions = squad_answers.write_predictions

    def keep(examples, features, raw_results, *args, **kwargs):
        results.append((features, raw_results))
        return write_predictions(examples, features, raw_results, *args, **kwargs)
    monkeypatch.setattr(squad_answers, "write_predictions", keep)
    # n_best_size above SEQ: every position is ranked, so that the answers cannot depend on
    # the fixed padding's logits (the original ranks them, and they are random here).
    fixed, dynamic = _runs_both(
        lambda: SquadTask(predict_file=str(squad), doc_stride=16, max_query_length=8,
                          n_best_size=SEQ + 1, version_2_with_negative=True),
        tmp_path, vocab, config, do_predict=True)
    for name in ("predictions.json", "null_odds.json", "nbest_predictions.json"):
        one, other = (json.loads((d / name).read_text()) for d in (fixed, dynamic))
        assert one.keys() == other.keys()
        if name == "predictions.json":
            assert one == other
        elif name == "null_odds.json":
            for key in one:
                assert other[key] == pytest.approx(one[key], abs=1e-5), key
        else:
            for key in one:
                assert [e["text"] for e in one[key]] == [e["text"] for e in other[key]], key
                np.testing.assert_allclose([e["start_logit"] + e["end_logit"] for e in other[key]],
                                           [e["start_logit"] + e["end_logit"] for e in one[key]],
                                           atol=1e-5)
    (features, fixed_results), (_, dynamic_results) = results
    assert all(len(r.start_logits) == SEQ for r in fixed_results + dynamic_results)
    assert min(len(f.tokens) for f in features) < SEQ - MULTIPLE
    for feature, one, other in zip(features, fixed_results, dynamic_results):
        length = len(feature.tokens)
        np.testing.assert_allclose(other.start_logits[:length], one.start_logits[:length],
                                   atol=1e-5)
        np.testing.assert_allclose(other.end_logits[:length], one.end_logits[:length],
                                   atol=1e-5)
    # The original reads the padded positions (span softmax, n-best): SQuAD keeps them, so
    # --dynamic_padding changes nothing, padding's logits included.
    for one, other in zip(fixed_results, dynamic_results):
        np.testing.assert_array_equal(other.start_logits, one.start_logits)
        np.testing.assert_array_equal(other.end_logits, one.end_logits)


def test_bucketing_needs_dynamic_padding():
    options = FineTuningOptions(output_dir="out", bert_config_file="c", vocab_file="v",
                                do_train=True, dynamic_padding=False, bucket_by_length=True)
    with pytest.raises(ValueError, match="--bucket_by_length needs --dynamic_padding"):
        options.check()
    with pytest.raises(ValueError, match="--padding_multiple must be positive, got 0"):
        FineTuningOptions(output_dir="out", bert_config_file="c", vocab_file="v",
                          padding_multiple=0).check()


@pytest.mark.parametrize("on_tpu, options, expected", [
    (False, {}, DynamicPadding(SEQ, 1)),  # exact: on a CPU the step takes any length
    (False, {"use_xla": True}, DynamicPadding(SEQ, 16)),  # XLA compiles each length
    (False, {"padding_multiple": 8, "bucket_by_length": True}, LengthBuckets(SEQ, 8)),
    (False, {"dynamic_padding": False}, FixedPadding),
    (True, {"bucket_by_length": True}, FixedPadding),  # TPUs need static shapes
])
def test_padding_of_a_run(on_tpu, options, expected, monkeypatch):
    monkeypatch.setattr(fine_tuning.Context, "on_tpu", property(lambda self: on_tpu))
    context = fine_tuning.Context(FineTuningOptions(
        output_dir="out", bert_config_file="c", vocab_file="v", max_seq_length=SEQ, **options),
        None, None, None, True, "out")
    if expected is FixedPadding:
        assert type(context.padding) is FixedPadding
    else:
        assert context.padding == expected and type(context.padding) is type(expected)
