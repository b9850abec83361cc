"""The classifier's SavedModel: text (or a text pair) in, probabilities and labels out."""
import tensorflow as tf

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
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, label_names,
                 pair_task):
        super().__init__(model, name="classifier_export")
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
        inputs = self.packer(*[self.tokenizer(text) for text in checked_rows(texts)])
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
        label_ids = tf.argmax(outputs["probabilities"], axis=-1, output_type=tf.int32)
        return {"probabilities": outputs["probabilities"], "label_ids": label_ids,
                "labels": self.label_names.lookup(tf.cast(label_ids, tf.int64))}

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}
