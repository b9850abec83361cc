"""The NER SavedModel: whitespace-separated words in, one tag per word out."""
import tensorflow as tf

from modeling.data import ner as ner_data
from modeling.export import word_windows
from modeling.export.base import ServingModule, checked_rows, label_table
from modeling.text.graph_tokenizer import GraphTokenizer


class NerExport(ServingModule):
    """A `BertTokenClassifier` (NER) behind a raw-text signature.

    serving_default: string `text` [B], words separated by whitespace -> string `tags`
      [B, N] (one tag per word, "" after a row's last word), string `words` [B, N] and int32
      `num_words` [B]. Every word of a row of any length is tagged as run_ner.py tags it: each
      word is tokenized on its own (a word that yields no token is "[UNK]"; one longer than a
      window keeps its first max_seq_length - 2 tokens), the row is cut at word boundaries into
      the windows of `modeling.data.ner` (`doc_stride` apart), all windows of all rows go
      through the model in one batch, and each word's tag is read at its first token in the
      window where it has the most context.
    Assets: `vocab.txt` and `labels.txt`.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, label_names,
                 doc_stride=None):
        """`doc_stride`: pieces from one window's start to the next, as run_ner.py's
        --doc_stride; None for its default, half a window."""
        super().__init__(model, name="ner_export")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.max_seq_length = max_seq_length
        self.doc_stride = ner_data.window_stride(max_seq_length, doc_stride)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.labels_asset, self.label_names = label_table(label_names)
        self.serve_text = tf.function(self._tag, input_signature=[tf.TensorSpec([None],
                                                                                tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _tag(self, text):
        (text,) = checked_rows({"text": text})
        words = tf.strings.split(text)  # [B, (N)]
        pieces = self.tokenizer(words.flat_values)  # [words, (p)]
        counts = pieces.row_lengths()
        # A word without tokens is "[UNK]", as tokenization.FullTokenizer makes it in run_ner.
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(counts == 0, tf.int64))], self.tokenizer.unk_id),
            tf.cast(counts == 0, tf.int64))
        max_pieces = self.max_seq_length - 2  # [CLS], [SEP]
        pieces = tf.concat([pieces, unk], axis=1)[:, :max_pieces]  # as convert_sentence cuts
        counts = pieces.row_lengths()  # [words]
        firsts, ends, owners = word_windows.windows(words.with_flat_values(counts), max_pieces,
                                                    self.doc_stride)  # [B, (W)], [B, (N)]

        # Each window's pieces, found in the flat pieces of all words by word offsets.
        word_offsets = tf.concat([[0], tf.cumsum(counts)], axis=0)  # [words + 1]
        row_of_window = tf.gather(words.row_starts(), firsts.value_rowids())  # [windows]
        window_low = tf.gather(word_offsets, row_of_window + firsts.flat_values)
        window_high = tf.gather(word_offsets, row_of_window + ends.flat_values)
        tokens = tf.gather(pieces.flat_values, tf.ragged.range(window_low, window_high))
        windows = tf.shape(window_low, out_type=tf.int64)[0]
        cls = tf.fill([windows, 1], self.tokenizer.cls_id)
        sep = tf.fill([windows, 1], self.tokenizer.sep_id)
        input_ids = tf.concat([cls, tokens, sep], axis=1).to_tensor()  # [windows, T]
        input_mask = tf.concat([tf.ones_like(cls), tf.ones_like(tokens), tf.ones_like(sep)],
                               axis=1).to_tensor()
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": tf.zeros_like(input_ids)}, training=False)

        # Each word's first token in its owning window: 1 ([CLS]) + the pieces before it there.
        owner = tf.gather(firsts.row_starts(), owners.value_rowids()) + owners.flat_values
        position = 1 + word_offsets[:-1] - tf.gather(window_low, owner)  # [words]
        label_ids = tf.gather_nd(outputs["predictions"], tf.stack([owner, position], axis=1))
        tags = self.label_names.lookup(tf.cast(label_ids, tf.int64))
        return {"tags": words.with_flat_values(tags).to_tensor(""),
                "words": words.to_tensor(""),
                "num_words": tf.cast(words.row_lengths(), tf.int32)}
