import json
import re

import pytest
import tensorflow as tf

from modeling.data import classifier
from modeling.text import tokenization


def _golden_examples(refs):
    rows = [json.loads(line) for line in open(refs / "classifier/features_len32.jsonl")]
    examples = [classifier.PaddingInputExample() if row["padding_example"] else
                classifier.InputExample(row["guid"], row["text_a"], row["text_b"],
                                             row["label"]) for row in rows]
    return rows, examples


def test_features_equal_the_originals(refs):
    meta = json.loads((refs / "classifier/meta.json").read_text())
    tokenizer = tokenization.FullTokenizer(str(refs / "vocab/uncased_vocab.txt"), True)
    rows, examples = _golden_examples(refs)
    assert len(rows) == 21 and sum(row["padding_example"] for row in rows) == 1
    for row, example in zip(rows, examples):
        features = classifier.convert_single_example(
            example, meta["label_list"], meta["max_seq_length"], tokenizer)
        assert (features.input_ids, features.input_mask, features.segment_ids,
                features.label_id, features.is_real_example) == (
            row["input_ids"], row["input_mask"], row["segment_ids"], row["label_id"],
            row["is_real_example"]), row["index"]


def test_tfrecords_equal_the_originals(refs, tmp_path):
    meta = json.loads((refs / "classifier/meta.json").read_text())
    tokenizer = tokenization.FullTokenizer(str(refs / "vocab/uncased_vocab.txt"), True)
    _, examples = _golden_examples(refs)
    output = tmp_path / "eval.tf_record"
    assert classifier.write_features(examples, meta["label_list"],
                                          meta["max_seq_length"], tokenizer, str(output)) == 21

    def parse(path):
        return [{name: list(feature.int64_list.value or feature.float_list.value)
                 for name, feature in tf.train.Example.FromString(raw).features.feature.items()}
                for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]
    assert parse(output) == parse(refs / "classifier/features_len32.tfrecord")


@pytest.mark.parametrize("task, split, count, first", [
    ("CoLA", "train", 8551, ("Our friends won't buy this analysis, let alone the next one we "
                             "propose.", None, "1")),
    ("cola", "dev", 1043, ("The sailors rode the breeze clear of the rocks.", None, "1")),
    ("cola", "test", 1063, ("Bill whistled past the house.", None, None)),
    ("SST-2", "dev", 872, None),
    ("sst-2", "test", 1821, ("uneasy mishmash of styles and genres .", None, None)),
    ("MRPC", "dev", 408, None),
    ("mrpc", "test", 1725, None),
    ("STS-B", "dev", 1500, ("A man with a hard hat is dancing.",
                            "A man wearing a hard hat is dancing.", 5.0)),
    ("QNLI", "dev", 5463, None),
    ("RTE", "dev", 277, None),
    ("WNLI", "dev", 71, None),
])
def test_real_glue_files(data, task, split, count, first):
    directory = {"cola": "CoLA", "sst-2": "SST-2", "sts-b": "STS-B"}.get(task.lower(),
                                                                         task.upper())
    processor = classifier.get_processor(task)
    examples = processor.read(str(data / "glue" / directory), split)
    assert len(examples) == count
    if first:
        assert (examples[0].text_a, examples[0].text_b, examples[0].label) == first
    if split != "test":
        labels = {e.label for e in examples}
        assert labels <= set(processor.get_labels()) if not processor.is_regression else \
            all(0.0 <= label <= 5.0 for label in labels)


def test_mrpc_reads_through_the_bom(data):
    examples = classifier.get_processor("mrpc").get_dev_examples(str(data / "glue/MRPC"))
    assert {e.label for e in examples} == {"0", "1"}
    assert sum(e.label == "1" for e in examples) == 279


@pytest.mark.parametrize("content, message", [
    ("index\tsentence1\tsentence2\tlabel\n0\tonly two\n", r"dev.tsv:2: expected at least 4"),
    ("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n", r"dev.tsv:2: unknown label 'maybe'"),
])
def test_bad_rows_name_file_and_line(tmp_path, content, message):
    (tmp_path / "dev.tsv").write_text(content)
    with pytest.raises(ValueError, match=message):
        classifier.get_processor("rte").get_dev_examples(str(tmp_path))


GLUE_FOLDERS = {"cola": "CoLA", "sst-2": "SST-2", "mrpc": "MRPC", "sts-b": "STS-B",
                "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


@pytest.mark.parametrize("task", sorted(GLUE_FOLDERS))
def test_another_tasks_file_is_refused_at_its_header(data, task):
    """Each task on the real dev file of every other: refused at line 1 as not the task's file,
    by its header, or for CoLA, whose train and dev have none, by the first row's columns;
    but where the layout is one (RTE and WNLI differ in labels only, refused at the first
    row's)."""
    processor = classifier.get_processor(task)
    for other, folder in GLUE_FOLDERS.items():
        if other == task:
            continue
        with pytest.raises(ValueError) as error:
            processor.get_dev_examples(str(data / "glue" / folder))
        if task == "cola":
            assert f"{folder}/dev.tsv:1: does not look like CoLA's dev.tsv: its rows have 4 " \
                   f"tab-separated columns, the label 0 or 1 in column 2" in str(error.value)
        elif {task, other} == {"rte", "wnli"}:
            assert f"{folder}/dev.tsv:2: unknown label" in str(error.value)
        else:
            assert f"{folder}/dev.tsv:1: does not look like {processor.name}'s dev.tsv: its " \
                   f"header names " in str(error.value)


def test_sst2_on_mrpcs_folder_names_the_header_it_expected(data):
    with pytest.raises(ValueError, match=re.escape(
            "MRPC/train.tsv:1: does not look like SST-2's train.tsv: its header names column 1 "
            "'sentence', column 2 'label'; this one reads 'Quality\\t#1 ID\\t#2 ID")):
        classifier.get_processor("sst-2").get_train_examples(str(data / "glue/MRPC"))


def test_a_header_is_compared_by_the_columns_read_whatever_their_case(tmp_path):
    (tmp_path / "dev.tsv").write_text("Sentence\tLabel\textra\nthe lamp\t1\tx\n")
    assert [e.label for e in classifier.get_processor("sst-2").get_dev_examples(
        str(tmp_path))] == ["1"]
    (tmp_path / "XNLI-1.0").mkdir()
    (tmp_path / "XNLI-1.0/xnli.dev.tsv").write_text("language\tgold_label\tsentence1\n")
    with pytest.raises(ValueError, match=r"xnli.dev.tsv:1: does not look like XNLI's "
                                         r"xnli.dev.tsv: its header names column 7 'sentence1', "
                                         r"column 8 'sentence2', column 2 'gold_label'; this "):
        classifier.get_processor("xnli").get_dev_examples(str(tmp_path))


def test_non_numeric_score_names_file_and_line(tmp_path):
    header = "\t".join(["index", "genre", "filename", "year", "old_index", "source1",
                        "source2", "sentence1", "sentence2", "score"])
    row = "\t".join(["0", "g", "f", "y", "o", "s", "s", "a", "b", "high"])
    (tmp_path / "dev.tsv").write_text(f"{header}\n{row}\n")
    with pytest.raises(ValueError, match=r"dev.tsv:2: score 'high' is not a number"):
        classifier.get_processor("STS-B").get_dev_examples(str(tmp_path))


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Task not found: 'glue'.*'cola'.*'xnli'"):
        classifier.get_processor("glue")


def test_xnli_in_the_originals_layout(tmp_path):
    (tmp_path / "XNLI-1.0").mkdir()
    rows = ["language\tgold_label\ta\tb\tc\td\tsentence1\tsentence2",
            "zh\tneutral\t\t\t\t\t他在睡觉。\t他在做梦。",
            "en\tentailment\t\t\t\t\tHe sleeps.\tHe rests.",
            "zh\tcontradiction\t\t\t\t\t天很冷。\t天很热。"]
    (tmp_path / "XNLI-1.0/xnli.dev.tsv").write_text("\n".join(rows) + "\n")
    (tmp_path / "multinli").mkdir()
    (tmp_path / "multinli/multinli.train.zh.tsv").write_text(
        "premise\thypo\tlabel\n前提\t假设\tcontradictory\n")
    processor = classifier.get_processor("XNLI")
    dev = processor.get_dev_examples(str(tmp_path))
    assert [(e.text_a, e.text_b, e.label) for e in dev] == [
        ("他在睡觉。", "他在做梦。", "neutral"), ("天很冷。", "天很热。", "contradiction")]
    train = processor.get_train_examples(str(tmp_path))
    assert [(e.text_a, e.text_b, e.label) for e in train] == [("前提", "假设", "contradiction")]


def test_real_xnli_dev_rewritten_in_the_originals_layout(data, tmp_path):
    """XTREME's per-language files (premise, hypothesis, label; CRLF) as XNLI-1.0/xnli.dev.tsv
    rows: language, gold_label, four unused columns, sentence1, sentence2."""
    rows = ["language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\t"
            "sentence1_parse\tsentence2_parse\tsentence1\tsentence2"]
    source = {}
    for language in ("en", "zh"):
        with open(data / f"xnli_xtreme/dev-{language}.tsv", encoding="utf-8", newline="") as f:
            lines = f.read().split("\r\n")
        source[language] = [line.split("\t") for line in lines if line]
        rows += [f"{language}\t{label}\t\t\t\t\t{a}\t{b}" for a, b, label in source[language]]
    (tmp_path / "XNLI-1.0").mkdir()
    (tmp_path / "XNLI-1.0/xnli.dev.tsv").write_text("\n".join(rows) + "\n", "utf-8")
    dev = classifier.get_processor("xnli").get_dev_examples(str(tmp_path))
    assert [(e.text_a, e.text_b, e.label) for e in dev] == [tuple(r) for r in source["zh"]]
    assert len(dev) == 2490
    assert {label: sum(e.label == label for e in dev) for label in
            ("contradiction", "entailment", "neutral")} == dict.fromkeys(
                ("contradiction", "entailment", "neutral"), 830)


def test_a_long_document_becomes_its_windows_each_with_the_documents_label(word_tokenizer):
    text = " ".join(["the keeper lit the lamp"] * 3)  # 15 word pieces
    example = classifier.InputExample("d", text, None, "b", "docs.tsv:4")
    ids = word_tokenizer.convert_tokens_to_ids(word_tokenizer.tokenize(text))
    cls, sep = word_tokenizer.vocab["[CLS]"], word_tokenizer.vocab["[SEP]"]
    features = classifier.document_features(example, ["a", "b"], 8, word_tokenizer,
                                            doc_stride=4)  # windows of 6 pieces, 4 apart
    assert [f.input_ids for f in features] == [
        [cls, *ids[0:6], sep], [cls, *ids[4:10], sep], [cls, *ids[8:14], sep],
        [cls, *ids[12:15], sep, 0, 0, 0]]
    assert [sum(f.input_mask) for f in features] == [8, 8, 8, 5]
    assert all(f.label_id == 1 and f.segment_ids == [0] * 8 for f in features)


def test_one_window_cut_at_the_head_is_the_originals_or_at_head_and_tail(word_tokenizer):
    text = " ".join(["the keeper lit the lamp"] * 3)
    example = classifier.InputExample("d", text, None, "a")
    ids = word_tokenizer.convert_tokens_to_ids(word_tokenizer.tokenize(text))
    [head] = classifier.document_features(example, ["a", "b"], 10, word_tokenizer)
    assert head == classifier.convert_single_example(example, ["a", "b"], 10, word_tokenizer)
    [head_tail] = classifier.document_features(example, ["a", "b"], 10, word_tokenizer,
                                               truncation="head_tail")
    assert head_tail.input_ids[1:-1] == ids[:2] + ids[-6:]  # 8 pieces: round(8 * 128 / 510)


def test_a_document_without_word_pieces_has_no_window_and_names_its_line(word_tokenizer):
    example = classifier.InputExample("d", " \t ", None, "a", "docs.tsv:4")
    with pytest.raises(ValueError, match="docs.tsv:4: the document has no word pieces"):
        classifier.document_features(example, ["a"], 8, word_tokenizer, doc_stride=3)
    # One window cut from it is "[CLS] [SEP]", as the original reads an empty text.
    assert classifier.document_features(example, ["a"], 8, word_tokenizer)[0].input_ids[:3] \
        == [word_tokenizer.vocab["[CLS]"], word_tokenizer.vocab["[SEP]"], 0]


def test_rows_know_their_file_and_line(tmp_path):
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\nthe lamp\t1\nthe ship\t0\n")
    examples = classifier.get_processor("sst-2").get_dev_examples(str(tmp_path))
    assert [e.source for e in examples] == [f"{tmp_path / 'dev.tsv'}:{n}" for n in (2, 3)]
