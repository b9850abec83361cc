"""TF Serving's warm-up file: sample requests that the model server runs through every
signature of a SavedModel when it loads it, before it takes the first user request.

A SavedModel's first run of a graph path is slow (grappler's optimization, the kernels' first
allocations), and a user request would pay for it: a long text's windows are another path
than a short text's. TF Serving reads `assets.extra/tf_serving_warmup_requests`, a TFRecord
file of `PredictionLog`s, and replays them at load. The requests are made from the saved
signatures themselves (names, dtypes and ranks of their inputs, as the server sees them), so
that none is missed: short and long text rows for a text signature, short and
max_seq_length rows for an `ids` signature.
"""
import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
IDS_INPUTS = ("input_ids", "input_mask", "segment_ids")
_SHORT_WORDS = 5
_SHORT_IDS_LENGTH = 8


def sample_texts(vocab, max_seq_length):
    """The batches of a text signature's warm-up requests, made of the vocabulary's words.

    Args:
      vocab: list of str, the export's vocabulary in id order.
      max_seq_length: int, the export's pieces per sequence.

    Returns:
      [short batch, long batch], lists of str rows: a few words and an empty row; a text of
      2 * max_seq_length words (as many pieces at least, so that it runs the windows or the
      truncation), then a few words again.
    """
    short, long = (" ".join(vocab[i] for i in _word_ids(vocab, count))
                   for count in (_SHORT_WORDS, 2 * max_seq_length))
    return [[short, ""], [long, short]]


def sample_ids(vocab, cls_id, sep_id, max_seq_length):
    """The batches of an `ids` signature's warm-up requests.

    Args:
      vocab: list of str, the export's vocabulary in id order.
      cls_id, sep_id: int, the ids of "[CLS]" and "[SEP]".
      max_seq_length: int (>= 3, as the scripts require), the longest T.

    Returns:
      Two dicts of int32 `input_ids`, `input_mask`, `segment_ids` [2, T], T = 8 (or
      max_seq_length if shorter) and T = max_seq_length: a row `[CLS] a [SEP] b [SEP]` that
      fills T, and a row `[CLS] a [SEP]` padded.
    """
    word_ids = _word_ids(vocab, max_seq_length)
    batches = []
    for length in (min(_SHORT_IDS_LENGTH, max_seq_length), max_seq_length):
        half = (length - 3) // 2
        first = [cls_id, *word_ids[:half], sep_id]
        rows = [first + [*word_ids[half:length - 3], sep_id], first]
        batch = {name: np.zeros([2, length], np.int32) for name in IDS_INPUTS}
        for row, ids in enumerate(rows):
            batch["input_ids"][row, :len(ids)] = ids
            batch["input_mask"][row, :len(ids)] = 1
            batch["segment_ids"][row, len(first):len(ids)] = 1
        batches.append(batch)
    return batches


def _word_ids(vocab, count):
    """The ids of the vocabulary's first `count` words, repeated if it has fewer: alphabetic
    tokens of several letters where it has some (BERT's vocabularies list single characters
    first, then words from the most frequent: "the", "of", "and")."""
    words = [i for i, token in enumerate(vocab) if token.isalpha()]
    words = [i for i in words if len(vocab[i]) > 1] or words
    if not words:
        raise ValueError(f"the vocabulary of {len(vocab)} tokens has no alphabetic word to "
                         f"write warm-up requests with")
    return [words[i % len(words)] for i in range(count)]


def write_requests(saved_model_dir, signature_names, texts, ids):
    """Writes `<saved_model_dir>/assets.extra/tf_serving_warmup_requests`: one request per
    batch for each signature, made from its inputs in the saved `serve` MetaGraph.

    Args:
      saved_model_dir: a saved SavedModel directory.
      signature_names: the signatures to warm up (the export's; not the init op's).
      texts: list of batches (lists of str rows) for signatures of string inputs: a rank-1
        input takes the rows, a rank-2 one ([batch, choices]) each row twice.
      ids: list of batches (dicts of int32 [rows, T] `IDS_INPUTS`) for `ids` signatures.

    Raises:
      ValueError: for a signature whose inputs are neither all strings nor `IDS_INPUTS`.
    """
    signatures = _signature_defs(saved_model_dir)
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for name in signature_names:
            for inputs in _sample_inputs(name, signatures[name], texts, ids):
                request = predict_pb2.PredictRequest()
                request.model_spec.signature_name = name
                for key, (value, dtype) in inputs.items():
                    request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype))
                log = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())


def _signature_defs(saved_model_dir):
    """The SignatureDefs of the `serve` MetaGraph: what TF Serving reads."""
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as file:
        saved_model = saved_model_pb2.SavedModel.FromString(file.read())
    return next(meta.signature_def for meta in saved_model.meta_graphs
                if tf.saved_model.SERVING in meta.meta_info_def.tags)


def _sample_inputs(name, signature, texts, ids):
    """A list of {input name: (value, dtype)}, one per batch that fits the signature."""
    dtypes = {key: tf.as_dtype(info.dtype) for key, info in signature.inputs.items()}
    ranks = {key: len(info.tensor_shape.dim) for key, info in signature.inputs.items()}
    if set(dtypes.values()) == {tf.string} and set(ranks.values()) <= {1, 2}:
        return [{key: ([[row] * 2 for row in batch] if ranks[key] == 2 else batch, tf.string)
                 for key in dtypes} for batch in texts]
    if dtypes == {key: tf.int32 for key in IDS_INPUTS}:
        return [{key: (batch[key], tf.int32) for key in dtypes} for batch in ids]
    raise ValueError(f"no warm-up request for signature {name!r}: its inputs "
                     f"{ {key: (dtypes[key].name, ranks[key]) for key in dtypes} } are neither "
                     f"strings of rank 1 or 2 nor int32 {', '.join(IDS_INPUTS)}")
