"""SavedModels for TF Serving: raw text in, tokenized in the graph, the task's outputs out.

The exported module needs only TensorFlow and tensorflow-text to load (`import tensorflow_text`
registers the tokenizer's ops); nothing of this project. Every export is a `ServingModule`, so
it loads in TF Serving's C++ loader (MetaGraph import, the SavedModel's restore op, a session
fed and fetched by tensor name) as well as in `tf.saved_model.load`.
"""
import os
import tempfile
import time

import tensorflow as tf

from modeling import files
from modeling.data import squad as squad_data
from modeling.text.graph_tokenizer import BertInputPacker, GraphTokenizer

LABELS_ASSET = "labels.txt"


class ServingModule(tf.Module):
    """The base of every export: tracks the Keras model's `tf.Variable`s, not the model.

    A Keras 3 variable is a wrapper around a `tf.Variable`. Saved as part of the object graph,
    the wrapper writes a second graph variable (a copy initialized from the first) and the
    SavedModel's restore op (`saver_def`) restores that copy, while the signatures read the
    wrapped variable, which nothing restores: TF Serving's loader and `saved_model_cli` then
    fail with "Could not find variable ...". Tracking the wrapped variables themselves gives
    one graph variable each, restored by the restore op and read by the signatures.
    """

    def __init__(self, model, name):
        super().__init__(name=name)
        # Set past tf.Module's attribute tracking so that no Keras object is saved.
        object.__setattr__(self, "model", model)
        self.model_variables = [_wrapped_variable(v) for v in model.variables]

    def signatures(self):
        """The serving signatures: a dict of name -> `tf.function` with an input signature."""
        raise NotImplementedError


def _wrapped_variable(variable):
    """The `tf.Variable` inside a Keras variable (read outside any autocast scope)."""
    value = variable.value
    if not isinstance(value, tf.Variable):
        raise TypeError(f"{variable.path}: expected a tf.Variable inside, got {type(value)}")
    return value


def _checked_rows(inputs, ranks=None):
    """A signature's string inputs, each of the rank it declares and all of one number of
    rows, checked when the graph runs: the one check of every text signature.

    TF Serving's loader, and a loaded signature called directly, feed a placeholder whatever
    shape the request has, while shape inference has already assumed the declared rank (so
    `tf.rank` would be folded to it). The check compares element counts instead: the product
    of the first `rank` dimensions (-1 where the tensor has fewer) must equal its size. The
    rows are compared on those dimensions (never sliced from a shape that may have none), and
    only once every rank is right, so that the input at fault is the one named.

    Args:
      inputs: dict of input name -> string Tensor, in the signature's order.
      ranks: dict of input name -> declared rank, for those not of rank 1.

    Returns:
      The tensors in `inputs`' order, each reshaped to its first `rank` dimensions after the
      checks (an empty batch fed with fewer dimensions, `endings=[]` say, becomes [0, 0]).
    """
    dims, rank_checks = {}, []
    for name, tensor in inputs.items():
        rank = (ranks or {}).get(name, 1)
        dims[name] = tf.concat([tf.shape(tensor), -tf.ones([rank], tf.int32)], axis=0)[:rank]
        shape = "[batch]" if rank == 1 else "[batch, choices]"
        rank_checks.append(tf.debugging.Assert(
            tf.equal(tf.reduce_prod(dims[name]), tf.size(tensor)),
            [f"input '{name}' must be a {rank}-D tensor of strings {shape}; got shape",
             tf.shape(tensor)]))
    first, *others = inputs
    with tf.control_dependencies(rank_checks):
        row_checks = [tf.debugging.Assert(tf.equal(dims[first][0], dims[name][0]), [
            f"inputs '{first}' and '{name}' must have the same number of rows; got",
            dims[first][0], "and", dims[name][0]]) for name in others]
    # The checks become control inputs of an identity of each input, which grappler passes on
    # to its consumers when it drops the identity. A reshape made under the checks gets none
    # where its shape was computed there too (TF skips a control input that an input implies),
    # and grappler drops a reshape to rank 1 of a declared rank-1 input as a no-op: the checks
    # went with it, and the rows were read off a scalar before any check ran.
    with tf.control_dependencies(rank_checks + row_checks):
        checked = [tf.identity(tensor) for tensor in inputs.values()]
    return [tf.reshape(tensor, tf.maximum(dims[name], 0))
            for name, tensor in zip(inputs, checked)]


def _checked_ids(input_ids, input_mask, segment_ids):
    """The `ids` signature's inputs after checking that they have one shape [B, T]."""
    checks = [tf.debugging.Assert(
        tf.reduce_all(tf.equal(tf.shape(value), tf.shape(input_ids))),
        [f"input '{name}' must have the shape of 'input_ids'; got", tf.shape(value), "and",
         tf.shape(input_ids)]) for name, value in (("input_mask", input_mask),
                                                    ("segment_ids", segment_ids))]
    with tf.control_dependencies(checks):
        return tf.identity(input_ids), input_mask, segment_ids


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
        self.serve_ids = tf.function(lambda input_ids, input_mask, segment_ids: self._classify_ids(
            *_checked_ids(input_ids, input_mask, segment_ids)), input_signature=[ids, ids, ids])

    def _classify_text(self, text_a, text_b=None):
        texts = {"text_a": text_a} if text_b is None else {"text_a": text_a, "text_b": text_b}
        inputs = self.packer(*[self.tokenizer(text) for text in _checked_rows(texts)])
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
    # Written as <version>.tmp-<pid>, a name TF Serving does not take for a version.
    with files.atomic_path(final) as temp:
        tf.saved_model.save(module, temp, signatures=module.signatures())
    return final


class SquadExport(ServingModule):
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
        super().__init__(model, name="squad_export")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.max_seq_length, self.max_query_length = max_seq_length, max_query_length
        self.max_answer_length = max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        text = tf.TensorSpec([None], tf.string)
        self.serve_text = tf.function(self._answer, input_signature=[text, text])
        ids = tf.TensorSpec([None, None], tf.int32)
        self.serve_ids = tf.function(lambda input_ids, input_mask, segment_ids: self._logits(
            *_checked_ids(input_ids, input_mask, segment_ids)), input_signature=[ids, ids, ids])

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}

    def _logits(self, input_ids, input_mask, segment_ids):
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": segment_ids}, training=False)
        return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}

    def _answer(self, question, context):
        question, context = _checked_rows({"question": question, "context": context})
        tokenizer = self.tokenizer
        query = tokenizer(question)[:, :self.max_query_length]
        ids, word_starts, word_limits = tokenizer.tokenize_with_word_offsets(context)
        budget = squad_data.max_tokens_for_doc(self.max_seq_length, query.row_lengths())
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
        offset = squad_data.doc_offset(query.row_lengths())  # [B] the first document token
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

        # [:, :1] rather than [:, 0], so that an empty batch ([0, 0]) answers with no rows.
        null_score = tf.reshape(start[:, :1] + end[:, :1], [-1])  # [B] at [CLS]
        null_score_diff = null_score - score
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
        self.labels_asset, self.label_names = _label_table(label_names)
        self.serve_text = tf.function(self._tag, input_signature=[tf.TensorSpec([None],
                                                                                tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _tag(self, text):
        (text,) = _checked_rows({"text": text})
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


class MultipleChoiceExport(ServingModule):
    """A `BertMultipleChoice` (SWAG) behind a raw-text signature.

    serving_default: string `context` [B] and `endings` [B, C] (SWAG: sent2 + " " + ending)
      -> float32 `probabilities` [B, C] and int32 `label_ids` [B], each choice packed as
      run_multiple_choice.py packs it: "[CLS] context [SEP] ending [SEP]", the longer side cut.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length):
        super().__init__(model, name="multiple_choice_export")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.packer = BertInputPacker(max_seq_length, self.tokenizer.cls_id,
                                      self.tokenizer.sep_id)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.serve_text = tf.function(self._choose, input_signature=[
            tf.TensorSpec([None], tf.string), tf.TensorSpec([None, None], tf.string)])

    def signatures(self):
        return {"serving_default": self.serve_text}

    def _choose(self, context, endings):
        context, endings = _checked_rows({"context": context, "endings": endings},
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
