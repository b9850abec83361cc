"""The multiple-choice SavedModel: a context and its endings in, one probability per ending out."""
import tensorflow as tf

from modeling.export.base import ServingModule, checked_rows
from modeling.text.graph_tokenizer import BertInputPacker, GraphTokenizer


class MultipleChoiceExport(ServingModule):
    """A `BertMultipleChoice` (SWAG) behind a raw-text signature.

    serving_default: string `context` [B] and `endings` [B, C] (SWAG: sent2 + " " + ending)
      -> float32 `probabilities` [B, C] and int32 `label_ids` [B], each choice packed as
      run_multiple_choice.py packs it: "[CLS] context [SEP] ending [SEP]", the longer side cut.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length):
        super().__init__(model, name="multiple_choice_export")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.max_seq_length = max_seq_length
        self.packer = BertInputPacker(max_seq_length, self.tokenizer.cls_id,
                                      self.tokenizer.sep_id)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.serve_text = tf.function(self._choose, input_signature=[
            tf.TensorSpec([None], tf.string), tf.TensorSpec([None, None], tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _choose(self, context, endings):
        context, endings = checked_rows({"context": context, "endings": endings},
                                        ranks={"endings": 2})
        rows, choices = tf.shape(endings)[0], tf.shape(endings)[1]
        no_choices = tf.debugging.Assert(
            (choices > 0) | (rows == 0), ["input 'endings' must hold at least one ending per row"])
        with tf.control_dependencies([no_choices]):
            endings = tf.identity(endings)
        contexts = tf.reshape(tf.repeat(context[:, tf.newaxis], choices, axis=1), [-1])
        packed = self.packer(self.tokenizer(contexts), self.tokenizer(tf.reshape(endings, [-1])))
        shape = tf.stack([tf.shape(endings)[0], choices, self.packer.seq_length])
        inputs = {name: tf.reshape(value, shape) for name, value in packed.items()}
        probabilities = self.model(inputs, training=False)["probabilities"]
        # A column of -1 that no probability loses to, so that an empty batch of no choices
        # ([0, 0]) has an argmax too.
        padded = tf.pad(probabilities, [[0, 0], [0, 1]], constant_values=-1.0)
        return {"probabilities": probabilities,
                "label_ids": tf.argmax(padded, axis=-1, output_type=tf.int32)}
