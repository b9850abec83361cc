"""The original `get_final_text` in the graph: a predicted span's word pieces projected back
onto the words they came from, character for character as `squad_answers.get_final_text`.

Python works on code points; so does this, on the rows' Unicode code points padded into dense
tensors (a span's words are a few hundred characters at most).

Shape legend: B rows, N characters of a row's tokenized text, P of its prediction, O of its
original text.
"""
import tensorflow as tf

_SPACE = 0x20
_NONE = -1  # padding: no code point equals it


def pred_text(tokens):
    """The original's normalised prediction: word pieces glued back into words.

    Args:
      tokens: tf.string RaggedTensor [B, (pieces)], the span's word pieces (vocab strings).

    Returns:
      tf.string [B]: `" ".join(tokens)` without " ##" and "##", its whitespace normalised.
    """
    text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
    text = tf.strings.regex_replace(text, " ##", "")
    text = tf.strings.regex_replace(text, "##", "")
    return tf.strings.reduce_join(tf.strings.split(text), axis=-1, separator=" ")


def final_span(prediction, orig_chars, tokenizer):
    """Where `get_final_text(prediction, orig_text, ...)` cuts `orig_text`.

    Args:
      prediction: tf.string [B], from `pred_text`.
      orig_chars: int32 RaggedTensor [B, (O)], the code points of orig_text: the span's
        whitespace-separated words joined by " ".
      tokenizer: the export's `GraphTokenizer` (its `basic_tokenize` is the original's
        `BasicTokenizer`).

    Returns:
      (first, last): int64 [B], the answer's first and last character in orig_text; all of
      it (0 and O - 1) where the original falls back to the whole orig_text.
    """
    orig_text = tf.strings.unicode_encode(orig_chars, "UTF-8")
    tok_text = tf.strings.reduce_join(tokenizer.basic_tokenize(orig_text), axis=-1,
                                      separator=" ")
    tok = _dense_chars(tf.strings.unicode_decode(tok_text, "UTF-8"))  # [B, N + 1]
    pred = tf.strings.unicode_decode(prediction, "UTF-8")
    orig = _dense_chars(orig_chars)  # [B, O + 1]
    start = _find(tok, pred)  # [B], -1 when not found
    end = start + pred.row_lengths() - 1

    # Both texts without " " must have the same length: then their i-th non-space
    # characters are taken to correspond.
    tok_nonspace = (tok != _SPACE) & (tok != _NONE)
    orig_nonspace = (orig != _SPACE) & (orig != _NONE)
    same_length = tf.equal(_count(tok_nonspace), _count(orig_nonspace))
    ok = (start >= 0) & same_length
    start, end = tf.maximum(start, 0), tf.maximum(end, 0)
    # A bound on a space has no non-space index: the original falls back there too.
    ok &= _at(tok_nonspace, start) & _at(tok_nonspace, end)
    nonspace_before = tf.cumsum(tf.cast(tok_nonspace, tf.int64), axis=1, exclusive=True)
    orig_seen = tf.cumsum(tf.cast(orig_nonspace, tf.int64), axis=1)  # [B, O + 1]

    def orig_position(tok_position):  # the same non-space character's index in orig
        rank = _at(nonspace_before, tok_position)
        return tf.searchsorted(orig_seen, (rank + 1)[:, tf.newaxis], out_type=tf.int64)[:, 0]
    first = tf.where(ok, orig_position(start), 0)
    last = tf.where(ok, orig_position(end), orig_chars.row_lengths() - 1)
    return first, last


def _dense_chars(chars):
    """[B, (n)] code points -> int32 [B, max n + 1], padded with `_NONE` (a column at least)."""
    dense = chars.to_tensor(_NONE)
    return tf.pad(dense, [[0, 0], [0, 1]], constant_values=_NONE)


def _count(mask):
    return tf.reduce_sum(tf.cast(mask, tf.int64), axis=1)


def _at(values, index):
    """values[b, index[b]] for each row b."""
    return tf.gather(values, index[:, tf.newaxis], batch_dims=1)[:, 0]


def _find(text, pattern):
    """Python's `str.find`: the first index of `pattern` in `text`, -1 when absent.

    Args:
      text: int32 [B, N + 1], code points padded with `_NONE`.
      pattern: int32 RaggedTensor [B, (P)].

    Returns:
      int64 [B].
    """
    width = tf.shape(text, out_type=tf.int64)[1]
    dense = pattern.to_tensor(_NONE)  # [B, P]
    offsets = tf.range(tf.shape(dense, out_type=tf.int64)[1])
    positions = tf.range(width)[:, tf.newaxis] + offsets[tf.newaxis, :]  # [N + 1, P]
    # Past the end reads the last column, which is padding and matches no code point.
    windows = tf.gather(text, tf.minimum(positions, width - 1), axis=1)  # [B, N + 1, P]
    in_pattern = offsets[tf.newaxis, :] < pattern.row_lengths()[:, tf.newaxis]  # [B, P]
    matches = tf.reduce_all(
        tf.equal(windows, dense[:, tf.newaxis, :]) | ~in_pattern[:, tf.newaxis, :], axis=2)
    first = tf.reduce_min(tf.where(matches, tf.range(width)[tf.newaxis, :], width), axis=1)
    return tf.where(first < width, first, -1)
