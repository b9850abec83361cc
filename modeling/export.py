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


def _label_table(label_names):
    """The label names as a `labels.txt` asset (one per line, in id order) and a table from
    label id (int64) to name, initialized from that asset when the SavedModel loads."""
    labels_file = os.path.join(tempfile.mkdtemp(prefix="labels_"), LABELS_ASSET)
    with open(labels_file, "w", encoding="utf-8") as writer:
        writer.writelines(f"{name}\n" for name in label_names)
    asset = tf.saved_model.Asset(labels_file)
    table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, tf.string,
        tf.lookup.TextFileIndex.WHOLE_LINE), default_value="")
    return asset, table


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
            self.labels_asset, self.label_names = _label_table(label_names)
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


class SquadExport(tf.Module):
    """A `BertSpanModel` behind two serving signatures.

    ids: int32 `input_ids`, `input_mask`, `segment_ids` [B, T] -> float32 `start_logits`,
      `end_logits` [B, T], as run_squad.py's features go in and its raw results come out.
    serving_default: strings `question` and `context` [B] -> the best answer span: string
      `answer` [B], taken from `context` itself; int32 `start_char`, `end_char` [B], its
      character offsets in `context` (end exclusive; -1 for no answer); float32 `score` [B],
      its start + end logit, and `null_score_diff` [B], the no-answer score
      (start + end logit at [CLS]) minus `score`.

    The text signature reads the question and the first window of the context (the tokens that
    fit in max_seq_length, as the first feature of run_squad.py); longer contexts are answered
    from that window only. The span is the best-scoring one over all pairs (not only the top
    n_best_size starts and ends) with end >= start and at most max_answer_length tokens, and
    it extends to whole words (as the original's `BasicTokenizer` splits them: "Zürich" out of
    "Zürich." but all of "rowed" when only "##ed" scored). With version_2_with_negative, the
    answer is "" when null_score_diff > null_score_diff_threshold, as run_squad.py.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, max_query_length,
                 max_answer_length, version_2_with_negative, null_score_diff_threshold):
        super().__init__(name="squad_export")
        self.model = model
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.max_seq_length, self.max_query_length = max_seq_length, max_query_length
        self.max_answer_length = max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        text = tf.TensorSpec([None], tf.string)
        self.serve_text = tf.function(self._answer, input_signature=[text, text])
        ids = tf.TensorSpec([None, None], tf.int32)
        self.serve_ids = tf.function(self._logits, input_signature=[ids, ids, ids])

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}

    def _logits(self, input_ids, input_mask, segment_ids):
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": segment_ids}, training=False)
        return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}

    def _answer(self, question, context):
        tokenizer = self.tokenizer
        query = tokenizer(question)[:, :self.max_query_length]
        ids, word_starts, word_limits = tokenizer.tokenize_with_word_offsets(context)
        budget = self.max_seq_length - 3 - query.row_lengths()
        kept = tf.minimum(ids.row_lengths(), budget)  # [B] context tokens in the window
        window = tf.ragged.range(tf.zeros_like(kept), kept)
        document = tf.gather(ids, window, batch_dims=1)
        batch = tf.shape(context, out_type=tf.int64)[0]
        cls = tf.fill([batch, 1], tokenizer.cls_id)
        sep = tf.fill([batch, 1], tokenizer.sep_id)
        pieces = [cls, query, sep, document, sep]
        input_ids = tf.concat(pieces, axis=1).to_tensor()
        segment_ids = tf.concat([tf.zeros_like(p) for p in pieces[:3]]
                                + [tf.ones_like(p) for p in pieces[3:]], axis=1).to_tensor()
        input_mask = tf.concat([tf.ones_like(p) for p in pieces], axis=1).to_tensor()
        logits = self._logits(input_ids, input_mask, segment_ids)
        start, end = logits["start_logits"], logits["end_logits"]  # [B, T]

        # Every (start, end) pair inside the document window, end >= start, short enough.
        offset = query.row_lengths() + 2  # [B] position of the first document token
        positions = tf.range(tf.shape(input_ids, out_type=tf.int64)[1])
        inside = ((positions[tf.newaxis] >= offset[:, tf.newaxis])
                  & (positions[tf.newaxis] < (offset + kept)[:, tf.newaxis]))  # [B, T]
        length = positions[tf.newaxis, :] - positions[:, tf.newaxis]  # [T, T] end - start
        valid = (inside[:, :, tf.newaxis] & inside[:, tf.newaxis, :]
                 & (length >= 0) & (length < self.max_answer_length))  # [B, T, T]
        pair_scores = start[:, :, tf.newaxis] + end[:, tf.newaxis, :]
        flat = tf.reshape(tf.where(valid, pair_scores, float("-inf")), [batch, -1])
        best = tf.argmax(flat, axis=1)
        score = tf.reduce_max(flat, axis=1)
        width = tf.shape(input_ids, out_type=tf.int64)[1]
        first, last = best // width - offset, best % width - offset  # document token indexes

        null_score_diff = start[:, 0] + end[:, 0] - score
        no_answer = kept <= 0
        if self.version_2_with_negative:
            no_answer |= null_score_diff > self.null_score_diff_threshold
        zero = tf.zeros_like(first)
        first, last = tf.where(no_answer, zero, first), tf.where(no_answer, zero, last)
        byte_start = tf.where(no_answer, zero, _row_values(word_starts, first))
        byte_limit = tf.where(no_answer, zero, _row_values(word_limits, last))
        answer = tf.strings.substr(context, byte_start, byte_limit - byte_start)
        char_starts = tf.strings.unicode_decode_with_offsets(context, "UTF-8")[1]
        start_char = tf.reduce_sum(tf.cast(char_starts < byte_start[:, tf.newaxis], tf.int32),
                                   axis=1)
        end_char = start_char + tf.strings.length(answer, unit="UTF8_CHAR")
        return {"answer": answer,
                "start_char": tf.where(no_answer, -1, start_char),
                "end_char": tf.where(no_answer, -1, end_char),
                "score": tf.where(kept > 0, score, 0.0),
                "null_score_diff": tf.where(kept > 0, null_score_diff, 0.0)}


def _row_values(ragged, index):
    """ragged[b, index[b]] for each row b, 0 where the row is empty: int64 [B]."""
    flat = tf.concat([ragged.flat_values, tf.zeros([1], ragged.dtype)], axis=0)
    lengths = ragged.row_lengths()
    position = tf.where(index < lengths, ragged.row_starts() + index,
                        tf.shape(ragged.flat_values, out_type=tf.int64)[0])
    return tf.gather(flat, position)


class TaggerExport(tf.Module):
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
        super().__init__(name="tagger_export")
        self.model = model
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.max_seq_length = max_seq_length
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.labels_asset, self.label_names = _label_table(label_names)
        self.serve_text = tf.function(self._tag, input_signature=[tf.TensorSpec([None],
                                                                                tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _tag(self, text):
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


class MultipleChoiceExport(tf.Module):
    """A `BertMultipleChoice` (SWAG) behind a raw-text signature.

    serving_default: string `context` [B] and `endings` [B, C] (SWAG: sent2 + " " + ending)
      -> float32 `probabilities` [B, C] and int32 `label_ids` [B], each choice packed as
      run_multiple_choice.py packs it: "[CLS] context [SEP] ending [SEP]", the longer side cut.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length):
        super().__init__(name="multiple_choice_export")
        self.model = model
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.packer = BertInputPacker(max_seq_length, self.tokenizer.cls_id,
                                      self.tokenizer.sep_id)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.serve_text = tf.function(self._choose, input_signature=[
            tf.TensorSpec([None], tf.string), tf.TensorSpec([None, None], tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _choose(self, context, endings):
        choices = tf.shape(endings)[1]
        contexts = tf.reshape(tf.repeat(context[:, tf.newaxis], choices, axis=1), [-1])
        packed = self.packer(self.tokenizer(contexts), self.tokenizer(tf.reshape(endings, [-1])))
        shape = tf.stack([tf.shape(endings)[0], choices, self.packer.seq_length])
        inputs = {name: tf.reshape(packed[key], shape) for name, key in (
            ("input_ids", "input_ids"), ("input_mask", "input_mask"),
            ("token_type_ids", "segment_ids"))}
        probabilities = self.model(inputs, training=False)["probabilities"]
        return {"probabilities": probabilities,
                "label_ids": tf.argmax(probabilities, axis=-1, output_type=tf.int32)}
