"""The classifier's SavedModel: text (or a text pair) in, probabilities and labels out; a
document of any length read as its windows (`DocumentClassifierExport`)."""
import tensorflow as tf

from modeling.data.windows import AGGREGATIONS, TRUNCATIONS, check_stride
from modeling.export import windows
from modeling.export.base import ServingModule, checked_ids, checked_rows, label_table
from modeling.text.graph_tokenizer import BertInputPacker, GraphTokenizer


class ClassifierExport(ServingModule):
    """A `BertClassifier` behind two serving signatures.

    serving_default: string [B] `text_a` (and `text_b` for sentence-pair tasks; an empty
      `text_b` makes a single-segment input, as in the original) -> float32 `probabilities`
      [B, num_labels], int32 `label_ids` [B] and string `labels` [B] (or float32
      `predictions` [B] for regression).
    ids: int32 `input_ids`, `input_mask`, `segment_ids` [B, T] (T <= max_position_embeddings),
      for clients that tokenize themselves -> the same outputs.

    A text longer than max_seq_length - 2 pieces is cut as `truncation` says: "head" keeps its
    first pieces (the original), "head_tail" its first and last (`windows.head_tail`; single
    texts only).
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, label_names,
                 pair_task, truncation="head"):
        super().__init__(model, name="classifier_export")
        if truncation not in TRUNCATIONS or (pair_task and truncation != "head"):
            raise ValueError(f"truncation {truncation!r} is not 'head', or 'head_tail' of a "
                             f"single text")
        self.truncation, self.max_seq_length = truncation, max_seq_length
        self.regression = model.regression
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.packer = BertInputPacker(max_seq_length, self.tokenizer.cls_id,
                                      self.tokenizer.sep_id)
        self.vocab = tf.saved_model.Asset(vocab_file)  # for clients that tokenize
        if not self.regression:
            self.labels_asset, self.label_names = label_table(label_names)
        text = tf.TensorSpec([None], tf.string)
        if pair_task:
            self.serve_text = tf.function(
                lambda text_a, text_b: self._classify_text(text_a, text_b),
                input_signature=[text, text])
        else:
            self.serve_text = tf.function(lambda text_a: self._classify_text(text_a),
                                          input_signature=[text])
        ids = tf.TensorSpec([None, None], tf.int32)
        self.serve_ids = tf.function(lambda input_ids, input_mask, segment_ids: self._classify_ids(
            *checked_ids(input_ids, input_mask, segment_ids)), input_signature=[ids, ids, ids])

    def _classify_text(self, text_a, text_b=None):
        texts = {"text_a": text_a} if text_b is None else {"text_a": text_a, "text_b": text_b}
        ids = [self.tokenizer(text) for text in checked_rows(texts)]
        if self.truncation == "head_tail":
            ids[0] = windows.head_tail(ids[0], self.max_seq_length - 2)
        inputs = self.packer(*ids)
        # Rows are padded to max_seq_length; only the batch's longest row needs computing.
        length = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1))
        return self._classify({name: value[:, :length] for name, value in inputs.items()})

    def _classify_ids(self, input_ids, input_mask, segment_ids):
        return self._classify({"input_ids": input_ids, "input_mask": input_mask,
                               "token_type_ids": segment_ids})

    def _classify(self, inputs):
        outputs = self.model(inputs, training=False)
        if self.regression:
            return {"predictions": outputs["predictions"]}
        return self._labelled(outputs["probabilities"])

    def _labelled(self, probabilities):
        label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"probabilities": probabilities, "label_ids": label_ids,
                "labels": self.label_names.lookup(tf.cast(label_ids, tf.int64))}

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}


class DocumentClassifierExport(ClassifierExport):
    """A classification `BertClassifier` that reads single texts of any length as
    run_classifier.py --doc_stride does: each text's windows of max_seq_length - 2 pieces,
    `doc_stride` apart (`windows.spans`), each `[CLS] window [SEP]`, their logits aggregated
    into the text's prediction (`windows.document_probabilities`).

    serving_default: string `text_a` [B], one document a row -> `probabilities` [B, num_labels],
      `label_ids` and `labels` [B]. The windows of all the rows run through the model as one
      batch. A row without any word piece (empty, or only spaces and control characters) has
      no window to read: the request fails, naming the input and the row, as the script
      refuses such a document.
    ids: as `ClassifierExport`'s, one row per sequence (a window, for clients that cut their
      own): no aggregation.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, label_names,
                 doc_stride, aggregation):
        if model.regression:
            raise ValueError("documents are read in windows for classification only")
        check_stride(doc_stride, max_seq_length - 2, "doc_stride",
                     f"max_seq_length={max_seq_length} less [CLS] and [SEP]")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; expected one of "
                             f"{AGGREGATIONS}")
        super().__init__(model, vocab_file, do_lower_case, max_seq_length, label_names, False)
        self.doc_stride, self.aggregation = doc_stride, aggregation

    def warmup_batches(self):
        texts, ids = super().warmup_batches()
        # A document without word pieces fails the request, and a failed warm-up request
        # fails the model's load: no empty row.
        return [[row for row in batch if row] for batch in texts], ids

    def _classify_text(self, text_a, text_b=None):
        (text_a,) = checked_rows({"text_a": text_a})
        ids = self.tokenizer(text_a)  # [B, (N)]
        num_tokens = ids.row_lengths()
        empty = tf.where(tf.equal(num_tokens, 0))[:1, 0]  # the first row without pieces, if any
        check = tf.debugging.Assert(tf.size(empty) == 0, [
            "input 'text_a' has a document without word pieces (no window to read) at row",
            empty])
        with tf.control_dependencies([check]):
            starts, lengths = windows.spans(num_tokens, self.max_seq_length - 2, self.doc_stride)
        inputs = self.packer(windows.window_pieces(ids, starts, lengths))  # [sum of W, T]
        length = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1))
        logits = self.model({name: value[:, :length] for name, value in inputs.items()},
                            training=False)["logits"]
        return self._labelled(windows.document_probabilities(logits, starts.row_splits,
                                                             self.aggregation))
