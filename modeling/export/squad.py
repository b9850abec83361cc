"""The SQuAD SavedModel: a question and a context of any length in, `run_squad.py`'s answer out.

The text signature does in the graph what `run_squad.py --do_predict` does in Python: the
context split into SQuAD's words and word pieces, cut into the same windows (`doc_stride`),
each window packed as `[CLS] question [SEP] window [SEP]` and padded to max_seq_length (the
padding's logits take part in the n-best search, as in the original), all windows of all
questions through the model as one batch, then `squad_answers`' rules: the n_best_size best
starts and ends of each window, the valid spans among their pairs (in the window's context,
max context for the start, not reversed, at most max_answer_length pieces), the best over all
windows with the original's order on ties, the null score of the window where it is lowest,
the v2.0 decision, and the answer text projected back as `get_final_text` does.

Shape legend: B questions, M windows of all questions, T max_seq_length, k the n best,
W a context's words, N its word pieces, C its characters.
"""
import tensorflow as tf
import tensorflow_text as tf_text

from modeling.data import squad as squad_data
from modeling.evaluation import squad_answers
from modeling.export import squad_text, windows
from modeling.export.base import ServingModule, checked_ids, checked_rows
from modeling.text.graph_tokenizer import GraphTokenizer

# SQuAD's own whitespace, narrower than the tokenizer's (`modeling.data.squad._is_whitespace`).
_CONTEXT_SPACE = r"[ \t\r\n\x{202F}]+"
_SPACE = 0x20


class SquadExport(ServingModule):
    """A `BertSpanModel` behind two serving signatures.

    ids: int32 `input_ids`, `input_mask`, `segment_ids` [B, T] -> float32 `start_logits`,
      `end_logits` [B, T], as run_squad.py's features go in and its raw results come out.
    serving_default: strings `question` and `context` [B], a context of any length ->
      string `answer` [B], the text run_squad.py writes to predictions.json for that question
      ("" for no answer in v2.0, and the original's "empty" in v1.1 when no span is valid);
      int32 `start_char`, `end_char` [B], the character offsets in `context` of the answer's
      first character and past its last (-1 without a span; the answer's words are joined by
      one space, as the original joins them, so it is `context[start_char:end_char]` only
      where they were); float32 `score` [B], the span's start + end logit (0 without one);
      float32 `null_score_diff` [B], null_odds.json's value: the lowest no-answer score over
      the windows minus `score`.
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, max_query_length,
                 max_answer_length, version_2_with_negative, null_score_diff_threshold,
                 doc_stride=128, n_best_size=20):
        super().__init__(model, name="squad_export")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case)
        self.vocab = tf.saved_model.Asset(vocab_file)
        self.max_seq_length, self.max_query_length = max_seq_length, max_query_length
        self.max_answer_length, self.doc_stride = max_answer_length, doc_stride
        self.n_best_size = min(n_best_size, max_seq_length)  # the original's [:n_best_size]
        self.keeps_null = n_best_size > 1  # with one place, a better null fills it
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        text = tf.TensorSpec([None], tf.string)
        self.serve_text = tf.function(self._answer, input_signature=[text, text])
        ids = tf.TensorSpec([None, None], tf.int32)
        self.serve_ids = tf.function(lambda input_ids, input_mask, segment_ids: self._logits(
            *checked_ids(input_ids, input_mask, segment_ids)), input_signature=[ids, ids, ids])

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}

    def _logits(self, input_ids, input_mask, segment_ids):
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": segment_ids}, training=False)
        return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}

    def _answer(self, question, context):
        question, context = checked_rows({"question": question, "context": context})
        query = self.tokenizer(question)[:, :self.max_query_length]  # [B, (q)]
        doc = _Context(context, self.tokenizer)
        budget = squad_data.max_tokens_for_doc(self.max_seq_length, query.row_lengths())
        starts, lengths = windows.spans(doc.ids.row_lengths(), budget, self.doc_stride)
        spans = _Windows(starts, lengths, squad_data.doc_offset(query.row_lengths()))
        logits = self._logits(**self._features(query, doc, spans))
        best = self._best_span(spans, doc, logits["start_logits"], logits["end_logits"])
        return self._answer_text(doc, best)

    def _features(self, query, doc, spans):
        """Each window packed as run_squad.py's feature: int32 [M, T] model inputs."""
        window_query = tf.gather(query, spans.row)  # [M, (q)]
        window_doc = doc.piece_values(doc.ids, spans.row,
                                      tf.ragged.range(spans.start, spans.start + spans.length))
        count = tf.shape(spans.row, out_type=tf.int64)[0]
        cls = tf.fill([count, 1], self.tokenizer.cls_id)
        sep = tf.fill([count, 1], self.tokenizer.sep_id)
        pieces = [cls, window_query, sep, window_doc, sep]
        shape = [None, self.max_seq_length]
        return {
            "input_ids": tf.concat(pieces, axis=1).to_tensor(0, shape=shape),
            "input_mask": tf.concat([tf.ones_like(p) for p in pieces], axis=1).to_tensor(
                0, shape=shape),
            "segment_ids": tf.concat([tf.zeros_like(p) for p in pieces[:3]]
                                     + [tf.ones_like(p) for p in pieces[3:]], axis=1).to_tensor(
                0, shape=shape)}

    def _best_span(self, spans, doc, start_logits, end_logits):
        """The answer `squad_answers.compute_predictions` picks for each question.

        Returns:
          dict of [B] tensors: `answered` (bool), the span's first and last piece in the
          context (`first`, `last`, int64), `score` and `null_score_diff` (float64).
        """
        k = self.n_best_size
        top_starts = tf.math.top_k(start_logits, k).indices  # [M, k]: ties to the lower index
        top_ends = tf.math.top_k(end_logits, k).indices
        start_pieces, start_inside = spans.doc_piece(top_starts)  # [M, k]
        end_pieces, end_inside = spans.doc_piece(top_ends)
        owner = doc.piece_values(spans.owner, spans.row, start_pieces, start_inside)
        start_counts = start_inside & tf.equal(owner, spans.index[:, tf.newaxis])
        length = tf.cast(top_ends[:, tf.newaxis, :] - top_starts[:, :, tf.newaxis], tf.int64)
        valid = (start_counts[:, :, tf.newaxis] & end_inside[:, tf.newaxis, :]
                 & (length >= 0) & (length + 1 <= self.max_answer_length))  # [M, k, k]
        # float64 sums of the float32 logits: Python's `float(start) + float(end)`.
        start_scores = tf.cast(tf.gather(start_logits, top_starts, batch_dims=1), tf.float64)
        end_scores = tf.cast(tf.gather(end_logits, top_ends, batch_dims=1), tf.float64)
        scores = start_scores[:, :, tf.newaxis] + end_scores[:, tf.newaxis, :]

        # The best pair of each question, in the original's order: window, start rank, end rank.
        rows = doc.rows
        flat_valid = tf.reshape(valid, [-1])
        flat_scores = tf.where(flat_valid, tf.reshape(scores, [-1]), float("-inf"))
        flat_rows = tf.repeat(spans.row, k * k)
        best_score = tf.math.unsorted_segment_max(flat_scores, flat_rows, rows)
        number = tf.range(tf.size(flat_scores, out_type=tf.int64))
        first_best = flat_valid & tf.equal(flat_scores, tf.gather(best_score, flat_rows))
        pick = tf.math.unsorted_segment_min(
            tf.where(first_best, number, tf.int64.max), flat_rows, rows)
        has_span = pick < tf.int64.max
        pick = tf.where(has_span, pick, 0)
        window, rank_start, rank_end = pick // (k * k), pick // k % k, pick % k
        first = _gather_or_zero(start_pieces, window, rank_start)
        last = _gather_or_zero(end_pieces, window, rank_end)
        start_logit = _gather_or_zero(start_scores, window, rank_start)
        end_logit = _gather_or_zero(end_scores, window, rank_end)

        # The null score: [CLS]'s, in the window where it is lowest (never above the
        # original's starting value, which a question without windows keeps).
        null_scores = (tf.cast(start_logits[:, 0], tf.float64)
                       + tf.cast(end_logits[:, 0], tf.float64))
        score_null = tf.minimum(tf.math.unsorted_segment_min(null_scores, spans.row, rows),
                                float(squad_answers.NULL_SCORE_START))
        if not self.keeps_null:
            has_span &= ~(score_null > start_logit + end_logit)
        empty = squad_answers.EMPTY_PREDICTION
        null_score_diff = tf.where(has_span, score_null - start_logit - end_logit,
                                   score_null - empty.start_logit - empty.end_logit)
        answered = has_span
        if self.version_2_with_negative:
            answered &= ~(null_score_diff > self.null_score_diff_threshold)
        return {"answered": answered, "first": first, "last": last,
                "score": tf.where(has_span, start_logit + end_logit, 0.0),
                "null_score_diff": null_score_diff}

    def _answer_text(self, doc, best):
        """The outputs: the span's text as `get_final_text` cuts it, and where it lies."""
        answered = best["answered"]
        first = tf.where(answered, best["first"], 0)
        last = tf.where(answered, best["last"], -1)  # no pieces, no words where unanswered
        pieces = tf.ragged.range(first, last + 1)  # [B, (p)]
        tokens = self.tokenizer.id_to_token(doc.piece_values(doc.ids, doc.row_range, pieces))
        first_word = doc.piece_values(doc.piece_word, doc.row_range, first, answered)
        last_word = doc.piece_values(doc.piece_word, doc.row_range, last, answered)
        last_word = tf.where(answered, last_word, -1)
        orig_chars, context_index = doc.joined_words(first_word, last_word)  # [B, (O)]
        start, end = squad_text.final_span(squad_text.pred_text(tokens), orig_chars,
                                           self.tokenizer)
        answer = tf.strings.unicode_encode(doc.piece_values(
            orig_chars, doc.row_range, tf.ragged.range(start, end + 1)), "UTF-8")
        answer = tf.where(answered, answer, "" if self.version_2_with_negative
                          else squad_answers.EMPTY_PREDICTION.text)
        start_char = doc.piece_values(context_index, doc.row_range, start, answered)
        end_char = doc.piece_values(context_index, doc.row_range, end, answered) + 1
        return {"answer": answer,
                "start_char": tf.cast(tf.where(answered, start_char, -1), tf.int32),
                "end_char": tf.cast(tf.where(answered, end_char, -1), tf.int32),
                "score": tf.cast(best["score"], tf.float32),
                "null_score_diff": tf.cast(best["null_score_diff"], tf.float32)}


class _Context:
    """A batch of contexts as run_squad.py reads them: words split at SQuAD's whitespace,
    each word tokenized on its own.

    Attributes:
      rows: int64 scalar, B.
      row_range: int64 [B], 0 .. B - 1.
      ids: int32 RaggedTensor [B, (N)], the word pieces.
      piece_word: int64 RaggedTensor [B, (N)], each piece's word (`tok_to_orig_index`).
      chars: int32 RaggedTensor [B, (C)], the code points.
      word_chars: (starts, limits), int64 RaggedTensors [B, (W)], each word's characters.
    """

    def __init__(self, context, tokenizer):
        self.rows = tf.shape(context, out_type=tf.int64)[0]
        self.row_range = tf.range(self.rows)
        # The splitter stops at a NUL byte; \x01 keeps the offsets (words are cut from
        # `context` itself, so the answer keeps its NUL).
        _, byte_starts, byte_limits = tf_text.regex_split_with_offsets(
            tf.strings.regex_replace(context, "\x00", "\x01"), _CONTEXT_SPACE)  # [B, (W)]
        words = tf.strings.substr(tf.repeat(context, byte_starts.row_lengths()),
                                  byte_starts.flat_values,
                                  byte_limits.flat_values - byte_starts.flat_values)
        pieces = tokenizer(words)  # [words, (p)]
        per_row = tf.math.unsorted_segment_sum(pieces.row_lengths(), byte_starts.value_rowids(),
                                               self.rows)
        self.ids = tf.RaggedTensor.from_row_lengths(pieces.flat_values, per_row)
        word_in_row = tf.ragged.range(byte_starts.row_lengths()).flat_values
        self.piece_word = self.ids.with_flat_values(
            tf.repeat(word_in_row, pieces.row_lengths()))
        self.chars, char_bytes = tf.strings.unicode_decode_with_offsets(
            context, "UTF-8", errors="replace")
        # A word's first character is the first whose byte offset reaches the word's.
        char_bytes = char_bytes.to_tensor(tf.int64.max)
        self.word_chars = tuple(
            tf.RaggedTensor.from_tensor(
                tf.searchsorted(char_bytes, offsets.to_tensor(0), out_type=tf.int64),
                lengths=offsets.row_lengths())
            for offsets in (byte_starts, byte_limits))

    def piece_values(self, values, rows, index, inside=None):
        """values[rows[i], index[i, ...]]: a per-row ragged `values` read at in-row indexes.

        Args:
          values: RaggedTensor [B, (n)].
          rows: int64 [R], the row each index reads.
          index: int64 [R, ...] or RaggedTensor [R, (m)], positions in the row.
          inside: optional bool, `index`'s shape: where to read; 0 elsewhere.
        """
        if isinstance(index, tf.RaggedTensor):
            return index.with_flat_values(self.piece_values(
                values, tf.gather(rows, index.value_rowids()), index.flat_values))
        row_starts = tf.gather(values.row_starts(), rows)
        row_starts = tf.reshape(row_starts, [-1] + [1] * (index.shape.rank - 1))
        flat = row_starts + tf.cast(index, tf.int64)
        size = tf.size(values.flat_values, out_type=tf.int64)
        readable = (flat >= 0) & (flat < size)
        if inside is not None:
            readable &= inside
        padded = tf.concat([values.flat_values, tf.zeros([1], values.dtype)], axis=0)
        return tf.gather(padded, tf.where(readable, flat, size))

    def joined_words(self, first_word, last_word):
        """The code points of `" ".join(words[first_word:last_word + 1])`, the original's
        orig_text, and for each its index in the context (-1 for a joining space).

        Returns:
          (chars, context_index): int32 and int64 RaggedTensors [B, (O)].
        """
        words = tf.ragged.range(first_word, last_word + 1)  # [B, (w)]
        starts, limits = (self.piece_values(bound, self.row_range, words)
                          for bound in self.word_chars)
        # Each word's characters, then one more position for the space after it.
        positions = tf.ragged.range(starts.flat_values, limits.flat_values + 1)
        is_space = tf.equal(positions.flat_values,
                            tf.repeat(limits.flat_values, positions.row_lengths()))
        index = tf.where(is_space, tf.constant(-1, tf.int64), positions.flat_values)
        per_row = tf.math.unsorted_segment_sum(positions.row_lengths(), words.value_rowids(),
                                               self.rows)
        index = tf.RaggedTensor.from_row_lengths(index, per_row)[:, :-1]  # no trailing space
        chars = self.piece_values(self.chars, self.row_range, index, index.flat_values >= 0)
        chars = chars.with_flat_values(
            tf.where(index.flat_values >= 0, chars.flat_values, _SPACE))
        return chars, index


class _Windows:
    """All questions' windows, flattened: M of them, in question order.

    Attributes:
      row: int64 [M], the question of each window.
      index: int64 [M], the window's index among its question's windows.
      start, length: int64 [M], its first context piece and its number of pieces.
      offset: int64 [M], the position of its first context piece in the feature.
      owner: int64 RaggedTensor [B, (N)], the window where each context piece has the most
        context.
    """

    def __init__(self, starts, lengths, offsets):
        self.row = starts.value_rowids()
        self.index = tf.ragged.range(starts.row_lengths()).flat_values
        self.start, self.length = starts.flat_values, lengths.flat_values
        self.offset = tf.gather(offsets, self.row)
        self.owner = windows.max_context_windows(starts, lengths)

    def doc_piece(self, positions):
        """For feature positions [M, k]: the context piece there (int64) and whether the
        position lies in the window's context (`token_to_orig_map` has it)."""
        in_window = tf.cast(positions, tf.int64) - self.offset[:, tf.newaxis]
        inside = (in_window >= 0) & (in_window < self.length[:, tf.newaxis])
        return self.start[:, tf.newaxis] + in_window, inside


def _gather_or_zero(values, window, rank):
    """values[window[b], rank[b]] for each question b; 0 where `values` has no rows."""
    rows = tf.shape(values, out_type=tf.int64)[0]
    padded = tf.pad(values, [[0, 1], [0, 0]])
    window = tf.where(window < rows, window, rows)
    return tf.gather_nd(padded, tf.stack([window, tf.cast(rank, tf.int64)], axis=1))

