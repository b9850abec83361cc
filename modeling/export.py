"""SavedModels for TF Serving: raw text in, tokenized in the graph, the task's outputs out.

The exported module needs only TensorFlow and tensorflow-text to load (`import tensorflow_text`
registers the tokenizer's ops); nothing of this project.
"""
import os
import tempfile
import time

import tensorflow as tf

from modeling.graph_tokenizer import BertInputPacker, GraphTokenizer

LABELS_ASSET = "labels.txt"


class ClassifierExport(tf.Module):
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
        super().__init__(name="classifier_export")
        self.model = model
        self.regression = model.regression
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.packer = BertInputPacker(max_seq_length, self.tokenizer.cls_id,
                                      self.tokenizer.sep_id)
        self.vocab = tf.saved_model.Asset(vocab_file)  # for clients that tokenize
        if not self.regression:
            labels_file = os.path.join(tempfile.mkdtemp(prefix="labels_"), LABELS_ASSET)
            with open(labels_file, "w", encoding="utf-8") as writer:
                writer.writelines(f"{name}\n" for name in label_names)
            self.labels_asset = tf.saved_model.Asset(labels_file)
            self.label_names = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
                self.labels_asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                tf.string, tf.lookup.TextFileIndex.WHOLE_LINE), default_value="")
        text = tf.TensorSpec([None], tf.string)
        if pair_task:
            self.serve_text = tf.function(
                lambda text_a, text_b: self._classify_text(text_a, text_b),
                input_signature=[text, text])
        else:
            self.serve_text = tf.function(lambda text_a: self._classify_text(text_a),
                                          input_signature=[text])
        ids = tf.TensorSpec([None, None], tf.int32)
        self.serve_ids = tf.function(self._classify_ids, input_signature=[ids, ids, ids])

    def _classify_text(self, text_a, text_b=None):
        ids_b = None if text_b is None else self.tokenizer(text_b)
        inputs = self.packer(self.tokenizer(text_a), ids_b)
        # Rows are padded to max_seq_length; only the batch's longest row needs computing.
        length = tf.reduce_max(tf.reduce_sum(inputs["input_mask"], axis=1))
        return self._classify_ids(**{name: value[:, :length] for name, value in inputs.items()})

    def _classify_ids(self, input_ids, input_mask, segment_ids):
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": segment_ids}, training=False)
        if self.regression:
            return {"predictions": outputs["predictions"]}
        label_ids = tf.argmax(outputs["probabilities"], axis=-1, output_type=tf.int32)
        return {"probabilities": outputs["probabilities"], "label_ids": label_ids,
                "labels": self.label_names.lookup(tf.cast(label_ids, tf.int64))}

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}


def save_versioned(module, export_dir):
    """Saves `module` to `export_dir/<version>/`, the layout TF Serving watches, atomically:
    the version (seconds since the epoch, as the Estimator's) appears only once complete.

    Returns:
      The version directory.
    """
    tf.io.gfile.makedirs(export_dir)
    version = int(time.time())
    while tf.io.gfile.exists(os.path.join(export_dir, str(version))):
        version += 1
    final = os.path.join(export_dir, str(version))
    temp = os.path.join(export_dir, f".tmp-{version}-{os.getpid()}")
    tf.saved_model.save(module, temp, signatures=module.signatures())
    tf.io.gfile.rename(temp, final)
    return final
