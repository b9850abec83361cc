"""The NER SavedModel: whitespace-separated words in, one tag per word out."""
import tensorflow as tf

from modeling.export.base import ServingModule, checked_rows, label_table
from modeling.text.graph_tokenizer import GraphTokenizer


class TaggerExport(ServingModule):
    """A `BertTokenClassifier` (NER) behind a raw-text signature.

    serving_default: string `text` [B], words separated by whitespace -> string `tags`
      [B, W] (one tag per word, "" after a row's last word), string `words` [B, W] and int32
      `num_words` [B]. Each word is tokenized in the graph and tagged at its first sub-token,
      as run_ner.py; a word that yields no token is "[UNK]". Words past the first
      max_seq_length - 2 tokens of a row get the tag "" (run_ner.py tags long sentences in
      several windows; this signature reads one).
    Assets: `vocab.txt` and `labels.txt`.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, label_names):
        super().__init__(model, name="tagger_export")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.max_seq_length = max_seq_length
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.labels_asset, self.label_names = label_table(label_names)
        self.serve_text = tf.function(self._tag, input_signature=[tf.TensorSpec([None],
                                                                                tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _tag(self, text):
        (text,) = checked_rows({"text": text})
        words = tf.strings.split(text)  # [B, (W)]
        pieces = self.tokenizer(words.flat_values)  # [words, (p)]
        counts = pieces.row_lengths()
        # A word without tokens is "[UNK]", as tokenization.FullTokenizer makes it in run_ner.
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(counts == 0, tf.int64))], self.tokenizer.unk_id),
            tf.cast(counts == 0, tf.int64))
        pieces = tf.concat([pieces, unk], axis=1)
        counts = pieces.row_lengths()  # [words]
        row_counts = tf.reduce_sum(words.with_flat_values(counts), axis=1)  # [B]
        row_pieces = tf.RaggedTensor.from_row_lengths(pieces.flat_values, row_counts)
        budget = self.max_seq_length - 2
        tokens = row_pieces[:, :budget]
        batch = tf.shape(text, out_type=tf.int64)[0]
        cls = tf.fill([batch, 1], self.tokenizer.cls_id)
        sep = tf.fill([batch, 1], self.tokenizer.sep_id)
        input_ids = tf.concat([cls, tokens, sep], axis=1).to_tensor()
        input_mask = tf.concat([tf.ones_like(cls), tf.ones_like(tokens), tf.ones_like(sep)],
                               axis=1).to_tensor()
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": tf.zeros_like(input_ids)}, training=False)
        # Each word's first token: 1 ([CLS]) + the tokens of the words before it in its row.
        before = (tf.cumsum(counts, exclusive=True)
                  - tf.gather(tf.cumsum(row_counts, exclusive=True), words.value_rowids()))
        first = before + 1
        inside = first <= budget  # the word's first token made it into the window
        position = words.with_flat_values(tf.where(inside, first, 0))
        label_ids = tf.gather(outputs["predictions"], position.to_tensor(0), batch_dims=1)
        tags = self.label_names.lookup(tf.cast(label_ids, tf.int64))
        tags = tf.where(words.with_flat_values(inside).to_tensor(False), tags, "")
        return {"tags": tags, "words": words.to_tensor(""),
                "num_words": tf.cast(words.row_lengths(), tf.int32)}
