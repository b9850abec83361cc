"""The SQuAD SavedModel: a question and its context in, the answer span out."""
import tensorflow as tf

from modeling.data import squad as squad_data
from modeling.export.base import ServingModule, check_same_rows, checked_ids, checked_rows
from modeling.text.graph_tokenizer import GraphTokenizer


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
            *checked_ids(input_ids, input_mask, segment_ids)), input_signature=[ids, ids, ids])

    def signatures(self):
        return {"serving_default": self.serve_text, "ids": self.serve_ids}

    def _logits(self, input_ids, input_mask, segment_ids):
        outputs = self.model({"input_ids": input_ids, "input_mask": input_mask,
                              "token_type_ids": segment_ids}, training=False)
        return {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}

    def _answer(self, question, context):
        question = checked_rows(question, "question")
        context = checked_rows(context, "context")
        with tf.control_dependencies([
                check_same_rows(question, "question", context, "context")]):
            context = tf.identity(context)
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
