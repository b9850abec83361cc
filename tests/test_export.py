"""Every export, served the ways TF Serving users serve it: the TF1 session loader (MetaGraph
import, the restore op, tensors fed and fetched by name), TF Serving's C++ loader, and
`saved_model_cli run`, each equal to `tf.saved_model.load`; the ops it needs; bad requests."""
import ast
import json
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from modeling import BertConfig
from modeling import export
from modeling.models.classifier import BertClassifier
from modeling.models.multiple_choice import BertMultipleChoice
from modeling.models.squad import BertSpanModel
from modeling.models.ner import BertTokenClassifier
from modeling.data import ner as ner_data
from modeling.text import tokenization
from scripts import script_env
from serving import assert_same_outputs, serve_many, serve_once, warmup_requests

SEQ = 24
WORDS = ("the keeper lit lamp at dusk boat left harbour early market closed before noon storm "
         "broke old mast river rose in spring baker sold bread square ship sea was calm").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", "##ed", "##ing", "."]
TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]

SENTENCES = [
    "the keeper lit the lamp at dusk",
    "",
    "Ünïcödé façade — naïve café 東京 ½",
    " ".join(["the boat left the harbour early"] * 8),  # longer than SEQ
    "storm",
    "the baker sold bread in the square before noon.",
]


def mixed_rows(count, seed):
    """`count` sentences of 0 to 30 words (some beyond SEQ tokens), drawn from WORDS."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(0, 31))) for _ in range(count)]


def ids_inputs(rows, length, seed):
    """int32 `ids` signature inputs [rows, length]: [CLS] ... [SEP], then padding."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, length + 1, size=rows)
    ids = rng.integers(5, len(VOCAB), size=(rows, length))
    mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int32)
    ids[:, 0] = 2
    ids[np.arange(rows), lengths - 1] = 3
    segments = ((np.arange(length)[None] >= lengths[:, None] // 2) & (mask == 1)).astype(np.int32)
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments}


# Each export: (how to build it from the model, the model, its requests).
def _classifier(vocab):
    model = BertClassifier(CONFIG, num_labels=3)
    module = export.ClassifierExport(model, vocab, True, SEQ, ["neg", "neutral", "pos"], True)
    return module, [
        ("serving_default", {"text_a": SENTENCES, "text_b": SENTENCES[::-1]}),
        ("ids", ids_inputs(4, SEQ, seed=1)),
    ]


def _regression(vocab):
    model = BertClassifier(CONFIG, num_labels=1, regression=True)
    module = export.ClassifierExport(model, vocab, True, SEQ, [], False)
    return module, [("serving_default", {"text_a": SENTENCES}),
                    ("ids", ids_inputs(3, 9, seed=2))]


def _squad(vocab):
    module = export.SquadExport(BertSpanModel(CONFIG), vocab, True, SEQ, max_query_length=8,
                                max_answer_length=5, version_2_with_negative=True,
                                null_score_diff_threshold=0.0)
    questions = ["who lit the lamp", "when", "", "what broke the old mast", "where", "x"]
    return module, [
        ("serving_default", {"question": questions, "context": SENTENCES}),
        ("ids", ids_inputs(5, SEQ, seed=3)),
    ]


# Several windows of SEQ - 2 = 22 pieces, NER_STRIDE apart (half a window would be 11): words
# of several pieces, one longer than a window (cut to 22 pieces), one of none (U+200B, [UNK]).
LONG_ROW = " ".join(["the boats sailed at dusk", "lamps lit", "boat" + "s" * 30, "\u200b",
                     "the keeper closed the market early"] * 4)
NER_STRIDE = 5


def _ner(vocab):
    module = export.NerExport(BertTokenClassifier(CONFIG, len(TAGS)), vocab, False, SEQ, TAGS,
                              doc_stride=NER_STRIDE)
    return module, [("serving_default", {"text": SENTENCES + [LONG_ROW]})]


def _multiple_choice(vocab):
    module = export.MultipleChoiceExport(BertMultipleChoice(CONFIG), vocab, True, SEQ)
    endings = [[s, s[::-1], "the sea was calm"] for s in SENTENCES]
    return module, [("serving_default", {"context": SENTENCES[::-1], "endings": endings})]


# The other exports of run_classifier.py: a single text, and long documents read by windows
# (--doc_stride) and by their head and tail (--truncation=head_tail).
def _single_text_classifier(vocab):
    model = BertClassifier(CONFIG, num_labels=2)
    module = export.ClassifierExport(model, vocab, True, SEQ, ["no", "yes"], False)
    return module, [("serving_default", {"text_a": SENTENCES}),
                    ("ids", ids_inputs(3, SEQ, seed=4))]


def _document_windows(vocab):
    module = export.DocumentClassifierExport(_input_sensitive_classifier(3, seed=5), vocab, True,
                                             SEQ, ["a", "b", "c"], doc_stride=7,
                                             aggregation="mean")
    return module, [("serving_default", {"text_a": _documents(9, seed=4)}),
                    ("ids", ids_inputs(4, SEQ, seed=5))]


def _head_tail(vocab):
    module = export.ClassifierExport(_input_sensitive_classifier(2, seed=6), vocab, True, SEQ,
                                     ["a", "b"], False, truncation="head_tail")
    return module, [("serving_default", {"text_a": _documents(5, seed=8) + [""]}),
                    ("ids", ids_inputs(3, SEQ, seed=6))]


CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=37, max_position_embeddings=SEQ,
                    type_vocab_size=2)
EXPORTS = {"classifier": _classifier, "regression": _regression, "squad": _squad,
           "ner": _ner, "multiple_choice": _multiple_choice}
# Saved for the op checks below (`every_export`) and for tests/test_serving_compat.py.
OTHER_EXPORTS = {"single_text_classifier": _single_text_classifier,
                 "document_windows": _document_windows, "head_tail": _head_tail}
# The input of each export's text signature that carries one row per example.
TEXT_INPUTS = {"classifier": ("text_a", "text_b"), "regression": ("text_a",),
               "squad": ("question", "context"), "ner": ("text",),
               "multiple_choice": ("context", "endings")}


def save_exports(root, builders):
    """Each export of `builders` ({name: builder}) of a random tiny model, saved under `root`
    as run_X.py saves it: {name: (version directory, requests)}."""
    vocab = root / "vocab.txt"
    vocab.write_text("".join(f"{token}\n" for token in VOCAB), "utf-8")
    saved = {}
    for name, build in builders.items():
        keras.utils.set_random_seed(len(name))
        module, requests = build(str(vocab))
        saved[name] = (pathlib.Path(export.save_versioned(module, str(root / name))), requests)
    return saved


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every export of EXPORTS: {name: (dir, requests)}."""
    return save_exports(tmp_path_factory.mktemp("exports"), EXPORTS)


@pytest.fixture(scope="module")
def every_export(exported, tmp_path_factory):
    """`exported` and OTHER_EXPORTS: every kind of export the scripts write."""
    return {**exported, **save_exports(tmp_path_factory.mktemp("other_exports"), OTHER_EXPORTS)}


@pytest.fixture(scope="module")
def serving(exported, vocab_file, tmp_path_factory):
    """Every export of EXPORTS and a document classifier's, served in one TF-only process (each
    export loaded once, as a server holds it): the tests' requests, each text signature on a
    row alone and in a batch of 64, the bad requests, and the export's own warm-up requests.

    Returns (served, warmed): served {name: (requests, results, bad results)} for EXPORTS, the
    requests ending with the row alone and the batch, the bad results keyed by the id of their
    BAD_REQUESTS inputs; warmed {name: (directory, warm-up requests, results)} for WARMED.
    """
    keras.utils.set_random_seed(9)
    document = export.DocumentClassifierExport(BertClassifier(CONFIG, 3), vocab_file, True, SEQ,
                                               ["a", "b", "c"], doc_stride=7, aggregation="mean")
    directories = {name: directory for name, (directory, _) in exported.items()}
    directories["document"] = pathlib.Path(export.save_versioned(
        document, str(tmp_path_factory.mktemp("document"))))
    jobs = {}
    for name, directory in directories.items():
        requests = exported[name][1] + batch_requests(name) if name in exported else []
        warmup = warmup_requests(directory)
        bad = [(signature, inputs) for export_name, signature, inputs, _ in BAD_REQUESTS
               if export_name == name]
        jobs[name] = (requests, warmup, bad)
    served, warmed = {}, {}
    answers = serve_many([(directories[name], requests + warmup, bad)
                          for name, (requests, warmup, bad) in jobs.items()])
    for (name, (requests, warmup, bad)), results in zip(jobs.items(), answers):
        ends = len(requests), len(requests) + len(warmup)
        warmed[name] = (directories[name], warmup, results[ends[0]:ends[1]])
        if name in exported:
            bad_results = {id(inputs): answer["session"]
                           for (_, inputs), answer in zip(bad, results[ends[1]:])}
            served[name] = (requests, results[:ends[0]], bad_results)
    return served, warmed


@pytest.fixture(scope="module")
def served(serving):
    return serving[0]


@pytest.fixture(scope="module")
def warmed(serving):
    return serving[1]


def batch_requests(name):
    """The text signature on one row alone, then on that row at index 17 of 64 mixed rows."""
    rows = mixed_rows(64, seed=7)
    rows[17] = "the keeper lit the lamp at dusk"
    inputs = {}
    for field in TEXT_INPUTS[name]:
        column = rows if field != "text_b" else rows[::-1]
        if field == "endings":
            column = [[row, "the sea was calm", row[::-1]] for row in rows]
        inputs[field] = column
    alone = {field: column[17:18] for field, column in inputs.items()}
    return [("serving_default", alone), ("serving_default", inputs)]


@pytest.mark.parametrize("name", EXPORTS)
def test_the_session_loader_answers_every_signature_as_tf_saved_model_load(served, name):
    requests, results, _ = served[name]
    assert {signature for signature, _ in requests} >= (
        {"serving_default", "ids"} if name in ("classifier", "regression", "squad")
        else {"serving_default"})
    for (signature, inputs), result in zip(requests, results):
        assert_same_outputs(result["session"], result["object_loader"])
        rows = len(next(iter(inputs.values())))
        assert all(len(value) == rows for value in result["session"].values()), signature


@pytest.mark.parametrize("name", EXPORTS)
def test_a_row_alone_equals_the_row_inside_a_batch_of_64(served, name):
    _, results, _ = served[name]
    alone, batch = results[-2]["session"], results[-1]["session"]
    assert len(next(iter(batch.values()))) == 64
    row = {key: np.asarray(value)[17:18] for key, value in batch.items()}
    if name == "ner":  # [B, W] outputs are padded to the batch's longest row
        words = alone["num_words"][0]
        row = {key: value if value.ndim == 1 else value[:, :words] for key, value in row.items()}
        alone = {key: np.asarray(value)[:, :words] if np.ndim(value) == 2 else value
                 for key, value in alone.items()}
    assert_same_outputs(row, alone)


@pytest.mark.parametrize("name", ["classifier", "squad", "ner"])
def test_tf_servings_cpp_loader_answers_as_tf_saved_model_load(exported, served, name):
    """serve_once feeds 1-D strings and 2-D int32: every signature but multiple choice's,
    whose `endings` is a 2-D string tensor (its graph is the same kind, proven above)."""
    directory, requests = exported[name]
    for (signature, inputs), result in zip(requests, served[name][1]):
        strings = {k: v for k, v in inputs.items() if isinstance(v[0], str)}
        int32 = {k: v for k, v in inputs.items() if k not in strings}
        status, outputs, stderr = serve_once(directory, signature, strings, int32)
        assert status == 0, stderr[-3000:]
        assert_same_outputs(outputs, result["object_loader"])


def exported_token_classifier(directory):
    """A `BertTokenClassifier` with the NER export's weights."""
    model = BertTokenClassifier(CONFIG, len(TAGS))
    saved = tf.saved_model.load(str(directory)).model_variables
    assert len(model.variables) == len(saved)
    for variable, value in zip(model.variables, saved):
        variable.assign(value)
    return model


def run_ner_tags(model, vocab, rows, stride):
    """run_ner.py's tags of each row: its windows (`convert_sentences`), the model on them,
    `assemble_predictions`. Returns (tags of each row, windows of each row)."""
    tokenizer = tokenization.FullTokenizer(str(vocab), False)
    sentences = [ner_data.Sentence(row.split(), ["O"] * len(row.split()), row.split())
                 for row in rows]
    features = ner_data.convert_sentences(sentences, TAGS, SEQ, tokenizer, stride)
    ids, mask = (np.array([getattr(f, name) for f in features], np.int32)
                 for name in ("input_ids", "input_mask"))
    predicted = model({"input_ids": ids, "input_mask": mask, "token_type_ids": 0 * ids},
                      training=False)["predictions"]
    windows = np.bincount([f.sentence_index for f in features], minlength=len(rows))
    return ner_data.assemble_predictions(sentences, features, predicted, TAGS), windows


def served_tags(outputs):
    """Each row's tags, cut at its `num_words`."""
    return [list(tags[:count]) for tags, count in zip(outputs["tags"], outputs["num_words"])]


def test_the_ner_export_tags_every_word_of_any_length_as_run_ner(exported, served):
    directory, _ = exported["ner"]
    model, vocab = exported_token_classifier(directory), directory / "assets/vocab.txt"
    requests, results, _ = served["ner"]
    rows = [row for _, inputs in requests for row in inputs["text"]]
    expected, windows = run_ner_tags(model, vocab, rows, NER_STRIDE)
    assert [tags for result in results for tags in served_tags(result["session"])] == expected
    assert windows[len(SENTENCES)] >= 6  # LONG_ROW, read in many windows
    # The stride is the export's own: windows half a window apart tag these rows otherwise.
    assert run_ner_tags(model, vocab, rows, None)[0] != expected
    # And TF Serving's C++ loader, on rows of many windows.
    status, outputs, stderr = serve_once(directory, "serving_default",
                                         {"text": [LONG_ROW, SENTENCES[3], "storm"]})
    assert status == 0, stderr[-3000:]
    assert served_tags({k: v.tolist() for k, v in outputs.items()}) == [
        expected[len(SENTENCES)], expected[3], expected[4]]


def readme_saved_model_cli_command():
    """The `saved_model_cli run` command of docs/serving.md (a backslash-continued block)."""
    text = (ROOT / "docs/serving.md").read_text("utf-8")
    match = re.search(r"^(python -c '[^\n]*saved_model_cli[^\n]*\\\n(?:[^\n]*\\\n)*[^\n]*)$",
                      text, re.MULTILINE)
    assert match, "docs/serving.md shows no saved_model_cli run command"
    return match.group(1).replace("\\\n", " ")


def test_saved_model_cli_run_answers_as_the_docs_show(exported, tmp_path):
    command = readme_saved_model_cli_command()
    directory = exported["classifier"][0]
    command = re.sub(r"--dir \S+", f"--dir {directory}", command)
    command = command.replace("python ", f"{sys.executable} ", 1)
    process = subprocess.run(["bash", "-c", f"{command} --outdir {tmp_path}"],
                             capture_output=True, text=True, env=script_env(), timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    inputs = dict(assignment.split("=", 1) for assignment in
                  re.search(r"--input_exprs '([^']*)'", command).group(1).split(";"))
    expected = tf.saved_model.load(str(directory)).signatures["serving_default"](
        **{name: tf.constant(ast.literal_eval(value)) for name, value in inputs.items()})
    for name, value in expected.items():
        printed = np.load(tmp_path / f"{name}.npy", allow_pickle=True)
        if value.dtype == tf.string:
            assert printed.tolist() == value.numpy().tolist(), name
        else:
            np.testing.assert_allclose(printed, value.numpy(), atol=1e-6, err_msg=name)


# tensorflow-text ops that TF Serving's model server links in (tensorflow-text ops are in
# the server from 2.2; FastWordpieceTokenizeWithOffsets is absent from 2.8 and 2.9).
SERVED_TEXT_OPS = {"FastWordpieceTokenizeWithOffsets", "RegexSplitWithOffsets"}
# Ops never to use: the RoundRobinTrim* ops are absent from TF Serving 2.12 to 2.19.
UNSERVED_OPS = re.compile(r"RoundRobin")

_CORE_OPS = r"""
import json, sys
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
print(json.dumps([op for op in json.loads(sys.argv[1]) if op_def_registry.get(op) is None]))
"""


def saved_model_proto(directory):
    from tensorflow.core.protobuf import saved_model_pb2
    return saved_model_pb2.SavedModel.FromString((directory / "saved_model.pb").read_bytes())


def signature_defs(directory):
    """The SignatureDefs of the `serve` MetaGraph, as TF Serving reads them."""
    return next(meta.signature_def for meta in saved_model_proto(directory).meta_graphs
                if "serve" in meta.meta_info_def.tags)


def exported_nodes(directory):
    """Every node (NodeDef) of the SavedModel's graphs, inside functions too, but the calls of
    its own functions."""
    saved = saved_model_proto(directory)
    nodes = []
    for meta in saved.meta_graphs:
        library = meta.graph_def.library
        functions = {function.signature.name for function in library.function}
        graph_nodes = [*meta.graph_def.node,
                       *(node for function in library.function for node in function.node_def)]
        nodes += [node for node in graph_nodes if node.op not in functions]
    return nodes


def exported_ops(directory):
    """Every op type in the SavedModel's graphs, inside functions too."""
    return {node.op for node in exported_nodes(directory)}


def test_every_exported_op_is_core_tensorflow_or_a_served_text_op(every_export):
    ops = set().union(*(exported_ops(directory) for directory, _ in every_export.values()))
    # Core: registered in a process that has imported only tensorflow.
    process = subprocess.run([sys.executable, "-c", _CORE_OPS, json.dumps(
        sorted(ops))], capture_output=True, text=True, env=script_env(PYTHONPATH=""),
        timeout=300)
    assert process.returncode == 0, process.stderr[-2000:]
    not_core = set(json.loads(process.stdout.splitlines()[-1]))
    assert not_core <= SERVED_TEXT_OPS, sorted(not_core - SERVED_TEXT_OPS)
    assert not [op for op in ops if UNSERVED_OPS.search(op)]
    assert "FastWordpieceTokenizeWithOffsets" in ops and len(ops) > 50


# The ops of TF Serving 2.20: tools/list_registered_ops.py, run with TensorFlow 2.20.0 and
# tensorflow-text 2.20.1 (its header says how).
TF_SERVING_2_20_OPS = ROOT / "tests/golden/tf2.20_registered_ops.txt"


def registered_ops(path):
    """{op name: set of its attr names} of a file written by tools/list_registered_ops.py."""
    lines = path.read_text("utf-8").splitlines()
    return {name: set(attrs) for name, *attrs in
            (line.split() for line in lines if not line.startswith("#"))}


def unregistered(nodes, registered):
    """What of `nodes` (NodeDefs) a TensorFlow that registers `registered` ({op: attr names})
    cannot import: each op it lacks ("Op"), each attr set on a node that the op lacks
    ("Op.attr"; attrs starting with "_" are the runtime's own). Sorted."""
    missing = set()
    for node in nodes:
        if node.op not in registered:
            missing.add(node.op)
            continue
        missing |= {f"{node.op}.{attr}" for attr in node.attr
                    if not attr.startswith("_") and attr not in registered[node.op]}
    return sorted(missing)


def test_tf_serving_2_20_registers_every_exported_op_and_attr(every_export):
    """TF Serving 2.20 (TensorFlow 2.20 and tensorflow-text 2.20's ops) imports every node of
    every export: an op of 2.21 only would fail ("Op type not registered"), and so would an attr
    that an op gained in 2.21 ("NodeDef mentions attr ... not in Op"). .ci/serving-compat
    serves every export in TensorFlow 2.20 itself."""
    assert set(every_export) == set(EXPORTS) | set(OTHER_EXPORTS)
    header = TF_SERVING_2_20_OPS.read_text("utf-8").splitlines()[0]
    assert "TensorFlow 2.20.0 with tensorflow-text 2.20.1's" in header, header
    registered = registered_ops(TF_SERVING_2_20_OPS)
    problems = [f"{name}: {', '.join(found)}" for name, found in (
        (name, unregistered(exported_nodes(directory), registered))
        for name, (directory, _) in every_export.items()) if found]
    assert not problems, "not in TensorFlow 2.20: " + "; ".join(problems)
    # The attrs are checked: TensorListGetItem has an attr of 2.21 that 2.20 lacks.
    node = tf.compat.v1.NodeDef(op="TensorListGetItem",
                                attr={"Tshape": tf.compat.v1.AttrValue(type="DT_INT32")})
    assert unregistered([node, tf.compat.v1.NodeDef(op="DecodeJxl")], registered) == [
        "DecodeJxl", "TensorListGetItem.Tshape"]


BAD_REQUESTS = [
    # (export, signature, inputs, the error's words, or None: answers with 0 rows)
    ("classifier", "serving_default", {"text_a": [], "text_b": []}, None),
    ("classifier", "ids", {name: np.zeros([0, 0], np.int32)
                           for name in ("input_ids", "input_mask", "segment_ids")}, None),
    ("regression", "serving_default", {"text_a": np.array([], object)}, None),
    ("squad", "serving_default", {"question": [], "context": []}, None),
    ("squad", "ids", {name: np.zeros([0, 0], np.int32)
                      for name in ("input_ids", "input_mask", "segment_ids")}, None),
    ("ner", "serving_default", {"text": []}, None),
    ("multiple_choice", "serving_default", {"context": [], "endings": np.zeros([0, 4], object)},
     None),
    ("multiple_choice", "serving_default", {"context": [], "endings": []}, None),
    ("classifier", "serving_default", {"text_a": [["a", "b"], ["c", "d"]], "text_b": ["a", "b"]},
     "input 'text_a' must be a 1-D tensor of strings [batch]; got shape] [2 2]"),
    ("classifier", "serving_default", {"text_a": "the lamp", "text_b": "the boat"},
     "input 'text_a' must be a 1-D tensor of strings [batch]; got shape] []"),
    ("classifier", "serving_default", {"text_a": ["a", "b"], "text_b": ["a"]},
     "inputs 'text_a' and 'text_b' must have the same number of rows; got] [2] [and] [1]"),
    ("regression", "serving_default", {"text_a": [["a"], ["b"], ["c"]]}, None),  # [3, 1]: 3 rows
    ("squad", "serving_default", {"question": ["who"], "context": ["the", "keeper"]},
     "inputs 'question' and 'context' must have the same number of rows"),
    ("squad", "serving_default", {"question": "who", "context": "the keeper"},
     "input 'question' must be a 1-D tensor of strings [batch]; got shape] []"),
    ("ner", "serving_default", {"text": [["the", "lamp"]]},
     "input 'text' must be a 1-D tensor of strings [batch]; got shape] [1 2]"),
    ("multiple_choice", "serving_default", {"context": ["a", "b"], "endings": [["x", "y"]]},
     "inputs 'context' and 'endings' must have the same number of rows; got] [2] [and] [1]"),
    ("multiple_choice", "serving_default", {"context": ["a"], "endings": ["x", "y"]},
     "input 'endings' must be a 2-D tensor of strings [batch, choices]; got shape] [2]"),
    ("multiple_choice", "serving_default", {"context": ["a"], "endings": np.zeros([1, 0], object)},
     "input 'endings' must hold at least one ending per row"),
    ("classifier", "ids", {"input_ids": [[2, 7, 3]], "input_mask": [[1, 0]],
                           "segment_ids": [[0, 0, 0]]},
     "input 'input_mask' must have the shape of 'input_ids'; got] [1 2] [and] [1 3]"),
    ("classifier", "ids", {"input_ids": [[2, 7, 3]], "input_mask": [[1, 1, 1, 1, 1]],
                           "segment_ids": [[0, 0, 0]]},
     "input 'input_mask' must have the shape of 'input_ids'; got] [1 5] [and] [1 3]"),
    ("squad", "ids", {"input_ids": [[2, 7, 3]], "input_mask": [[1, 1, 1]],
                      "segment_ids": [[0, 0]]},
     "input 'segment_ids' must have the shape of 'input_ids'; got] [1 2] [and] [1 3]"),
    ("classifier", "ids", {name: np.zeros([2, 0], np.int32)
                           for name in ("input_ids", "input_mask", "segment_ids")},
     "input_ids has rows without tokens"),
    ("classifier", "ids", {"input_ids": [[2, 99, 3]], "input_mask": [[1, 1, 1]],
                           "segment_ids": [[0, 0, 0]]}, "input_ids contains an id >= vocab_size"),
    ("classifier", "ids", {name: np.ones([1, SEQ + 1], np.int32)
                           for name in ("input_ids", "input_mask", "segment_ids")},
     "sequence length exceeds max_position_embeddings"),
]


@pytest.mark.parametrize("name, signature, inputs, error", BAD_REQUESTS,
                         ids=[f"{case[0]}-{case[1]}-{i}" for i, case in enumerate(BAD_REQUESTS)])
def test_a_bad_request_gets_a_clear_error_or_empty_outputs(served, name, signature, inputs,
                                                           error):
    result = served[name][2][id(inputs)]
    if error is None:
        assert "error" not in result, result.get("error")
        rows = np.asarray(inputs[next(iter(inputs))], dtype=object).shape[0]
        assert all(len(value) == rows for value in result.values()), result
    else:
        assert error in result.get("error", "").replace("\\'", "'"), result


def test_a_loaded_signature_given_a_scalar_names_that_input(exported):
    """`tf.saved_model.load`'s signatures run a request of another shape too: a scalar for a
    [batch] input of a pair is named, as in a single-text signature (by the one check of every
    text signature; the pair's rows were read off a scalar `text_b` before its check ran)."""
    serve = tf.saved_model.load(str(exported["classifier"][0])).signatures["serving_default"]
    for inputs, named in [({"text_a": ["the lamp"], "text_b": "a boat"}, "text_b"),
                          ({"text_a": "the lamp", "text_b": ["a boat"]}, "text_a")]:
        with pytest.raises(tf.errors.InvalidArgumentError) as error:
            serve(**{field: tf.constant(value) for field, value in inputs.items()})
        assert (f"input '{named}' must be a 1-D tensor of strings [batch]; got shape] []"
                in error.value.message.replace("\\'", "'")), error.value.message


def test_tf_servings_cpp_loader_answers_an_empty_batch_and_refuses_a_mismatched_mask(exported):
    directory = exported["classifier"][0]
    status, outputs, stderr = serve_once(directory, "serving_default",
                                         {"text_a": [], "text_b": []})
    assert status == 0, stderr[-2000:]
    assert outputs["probabilities"].shape == (0, 3) and outputs["labels"].shape == (0,)
    status, outputs, stderr = serve_once(directory, "ids", int32={
        "input_ids": [[2, 7, 3]], "input_mask": [[1, 0]], "segment_ids": [[0, 0, 0]]})
    assert status == 1
    assert "input 'input_mask' must have the shape of 'input_ids'" in stderr.replace("\\'", "'")


def _documents(count, seed):
    """`count` documents of 1 to 80 words (up to 4 windows of SEQ - 2 pieces, 7 apart)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(1, 81))) for _ in range(count)]


def _python_probabilities(model, vocab, documents, **reading):
    """run_classifier's answer: `document_features`, the model on each window, aggregated."""
    from modeling.data import classifier as classifier_data, windows
    from modeling.text import tokenization
    tokenizer = tokenization.FullTokenizer(vocab, True)
    aggregation = reading.pop("aggregation", "mean")
    per_document = [classifier_data.document_features(
        classifier_data.InputExample(str(i), text), [], SEQ, tokenizer, **reading)
        for i, text in enumerate(documents)]
    features = [window for document in per_document for window in document]
    logits = model({"input_ids": np.array([f.input_ids for f in features], np.int32),
                    "input_mask": np.array([f.input_mask for f in features], np.int32),
                    "token_type_ids": np.array([f.segment_ids for f in features], np.int32)},
                   training=False)["logits"]
    return windows.document_probabilities(logits, [len(d) for d in per_document], aggregation)


def _input_sensitive_classifier(num_labels, seed):
    """A random classifier whose probabilities vary with its input: at the usual 0.02 scale
    a random model's hardly do (then any reading of a document would pass at 1e-5)."""
    keras.utils.set_random_seed(seed)
    model = BertClassifier(BertConfig(**dict(CONFIG.to_dict(), initializer_range=0.5)),
                           num_labels)
    model.output_weights.assign(np.random.default_rng(seed).normal(
        size=model.output_weights.shape).astype(np.float32))
    return model


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(f"{token}\n" for token in VOCAB), "utf-8")
    return str(path)


def test_a_document_export_answers_each_document_as_run_classifier(vocab_file):
    """With max (mean: test_run_classifier_windows), all the rows' windows in one batch."""
    model = _input_sensitive_classifier(3, seed=5)
    module = export.DocumentClassifierExport(model, vocab_file, True, SEQ, ["a", "b", "c"],
                                             doc_stride=7, aggregation="max")
    documents = _documents(9, seed=4)
    expected = _python_probabilities(model, vocab_file, documents, doc_stride=7,
                                     aggregation="max")
    mean = _python_probabilities(model, vocab_file, documents, doc_stride=7)
    assert np.abs(mean - expected).max() > 0.01  # the aggregations differ
    outputs = module.serve_text(tf.constant(documents))
    np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5, rtol=0)
    assert outputs["labels"].numpy().tolist() == [b"abc"[i:i + 1] for i in
                                                  np.argmax(expected, axis=1)]
    alone = module.serve_text(tf.constant(documents[4:5]))["probabilities"]
    np.testing.assert_allclose(alone, expected[4:5], atol=1e-5, rtol=0)
    assert module.serve_text(tf.constant([], tf.string))["probabilities"].shape == (0, 3)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"document without word pieces .* at row\] \[2\]"):
        module.serve_text(tf.constant(["the keeper", "storm", "\t", ""]))


def test_a_head_and_tail_export_answers_as_run_classifier(vocab_file):
    model = _input_sensitive_classifier(2, seed=6)
    module = export.ClassifierExport(model, vocab_file, True, SEQ, ["a", "b"], False,
                                     truncation="head_tail")
    documents = _documents(5, seed=8) + [""]  # an empty text is "[CLS] [SEP]", as the head's
    expected = _python_probabilities(model, vocab_file, documents, truncation="head_tail")
    outputs = module.serve_text(tf.constant(documents))
    np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5, rtol=0)
    head = _python_probabilities(model, vocab_file, documents)
    assert np.abs(head - expected).max() > 0.01  # the cut differs from the head's


WARMED = [*EXPORTS, "document"]


@pytest.mark.parametrize("name", WARMED)
def test_the_warmup_file_has_short_and_long_requests_for_every_signature(warmed, vocab_file,
                                                                          name):
    directory, requests, _ = warmed[name]
    assert {signature for signature, _ in requests} == set(signature_defs(directory)) - {
        "__saved_model_init_op"}
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    lengths = {}  # signature -> each request's longest row, in pieces or in T
    for signature, inputs in requests:
        if signature == "ids":
            assert sorted(inputs) == ["input_ids", "input_mask", "segment_ids"]
            assert {value.dtype for value in inputs.values()} == {np.dtype(np.int32)}
            assert (inputs["input_ids"][:, 0] == VOCAB.index("[CLS]")).all()
            longest = inputs["input_ids"].shape[1]
        else:
            rows = [row for value in inputs.values() for row in np.ravel(value)]
            longest = max(len(tokenizer.tokenize(row)) for row in rows)
        lengths.setdefault(signature, []).append(longest)
    for signature, longest in lengths.items():
        if signature == "ids":
            assert min(longest) < SEQ and max(longest) == SEQ, longest
        else:
            assert min(longest) < SEQ - 2 and max(longest) > SEQ, longest


@pytest.mark.parametrize("name", WARMED)
def test_every_warmup_request_answers_each_of_its_rows(warmed, name):
    _, requests, results = warmed[name]
    for (signature, inputs), result in zip(requests, results):
        assert_same_outputs(result["session"], result["object_loader"])
        rows = len(next(iter(inputs.values())))
        assert all(len(value) == rows for value in result["session"].values()), signature


def test_a_signature_without_warmup_requests_leaves_no_version(tmp_path):
    """The warm-up file is written inside the atomic save: no version appears without it."""
    class FloatExport(export.ServingModule):
        def signatures(self):
            return {"serving_default": tf.function(
                lambda x: {"y": self.model(x)}, input_signature=[tf.TensorSpec([None, 3])])}

        def warmup_batches(self):
            return [["the keeper"]], []

    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    with pytest.raises(ValueError, match=r"no warm-up request for signature 'serving_default'"):
        export.save_versioned(FloatExport(layer, "float_export"), str(tmp_path))
    assert list(tmp_path.iterdir()) == []
