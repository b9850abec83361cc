"""`modeling.data.windows` in the graph: the same windows, max-context rule, head+tail cut and
window aggregation over a batch of sequences, so that an export reads a long input exactly as
its script does.

Shape legend: B rows, W windows of a row, N pieces of a row, K classes.
"""
import tensorflow as tf

from modeling.data import windows as python_windows


def spans(num_tokens, window, stride):
    """The windows of each row, as `modeling.data.windows.spans`.

    Args:
      num_tokens: int [B], each row's pieces.
      window: int scalar or [B], the most pieces a window of the row holds (>= 1).
      stride: int scalar, pieces from one window's start to the next (>= 1).

    Returns:
      (starts, lengths): int64 RaggedTensors [B, (W)]; no windows for a row of no pieces.
    """
    num_tokens = tf.cast(num_tokens, tf.int64)
    window = tf.broadcast_to(tf.cast(window, tf.int64), tf.shape(num_tokens, tf.int64))
    step = tf.minimum(window, tf.cast(stride, tf.int64))  # no piece is skipped
    beyond_first = tf.maximum(num_tokens - window, 0)
    count = tf.where(num_tokens > 0, 1 + (beyond_first + step - 1) // step, 0)
    starts = tf.ragged.range(count) * step[:, tf.newaxis]  # [B, (W)]
    lengths = tf.minimum(num_tokens[:, tf.newaxis] - starts, window[:, tf.newaxis])
    return starts, lengths


def max_context_windows(starts, lengths):
    """For each piece, the window where it has the most context, as
    `modeling.data.windows.max_context_index`.

    Args:
      starts, lengths: int64 RaggedTensors [B, (W)], from `spans`.

    Returns:
      int64 RaggedTensor [B, (N)]: the window index of each of a row's pieces.
    """
    ends = starts + lengths - 1  # [B, (W)] the last piece of each window
    row_pieces = tf.maximum(tf.reduce_max(ends, axis=1) + 1, 0)  # [B]; 0 without windows
    first = starts.to_tensor(0)[:, :, tf.newaxis]  # [B, W, 1]
    last = ends.to_tensor(-1)[:, :, tf.newaxis]
    length = tf.cast(lengths.to_tensor(0)[:, :, tf.newaxis], tf.float64)
    position = tf.range(tf.reduce_max(tf.concat([row_pieces, [0]], 0)))[tf.newaxis, tf.newaxis]
    inside = (position >= first) & (position <= last)  # [B, W, N]
    # In float64 and this order, as the original: min(left, right) + 0.01 * length.
    context = tf.cast(tf.minimum(position - first, last - position), tf.float64)
    score = tf.where(inside, context + 0.01 * length, float("-inf"))
    best = first_argmax(score, axis=1)  # [B, N]
    return tf.RaggedTensor.from_tensor(best, lengths=row_pieces)


def first_argmax(values, axis):
    """The index of the largest value along `axis`, the first one on ties (`tf.argmax` does
    not promise which): int64, `values`' shape without `axis`."""
    values = tf.convert_to_tensor(values)
    largest = tf.reduce_max(values, axis=axis, keepdims=True)
    index = tf.range(tf.shape(values, out_type=tf.int64)[axis])
    index = tf.reshape(index, [-1] + [1] * (values.shape.rank - 1 - (axis % values.shape.rank)))
    big = tf.shape(values, out_type=tf.int64)[axis]
    return tf.reduce_min(tf.where(values == largest, index, big), axis=axis)


def window_pieces(ids, starts, lengths):
    """The pieces of every window, the rows' windows one after another.

    Args:
      ids: RaggedTensor [B, (N)], each row's pieces.
      starts, lengths: int64 RaggedTensors [B, (W)], from `spans`.

    Returns:
      RaggedTensor [sum of W, (length)] of `ids`' dtype.
    """
    first = starts + tf.cast(ids.row_starts(), tf.int64)[:, tf.newaxis]  # [B, (W)] in flat_values
    index = tf.ragged.range(first.flat_values, first.flat_values + lengths.flat_values)
    return tf.gather(ids.flat_values, index)


def head_tail(ids, window):
    """Each row cut to one window of its first and last pieces, as
    `modeling.data.windows.head_tail`.

    Args:
      ids: RaggedTensor [B, (N)].
      window: int, the most pieces a window holds (>= 1).

    Returns:
      RaggedTensor [B, (min(N, window))] of `ids`' dtype.
    """
    cut, _ = python_windows.head_tail(window + 1, window)  # a longer row's head, in Python
    num_tokens = ids.row_lengths()
    longer = num_tokens > window
    head = tf.where(longer, tf.constant(cut, tf.int64), num_tokens)  # [B]
    tail = tf.where(longer, tf.constant(window - cut, tf.int64), 0)
    positions = tf.concat([tf.ragged.range(head), tf.ragged.range(num_tokens - tail, num_tokens)],
                          axis=1)  # [B, (head + tail)]
    return tf.gather(ids, positions, batch_dims=1)


def document_probabilities(logits, row_splits, aggregation):
    """`modeling.data.windows.document_probabilities` in the graph.

    Args:
      logits: float32 [sum of W, K], the windows' logits, each row's together.
      row_splits: int64 [B + 1], where each row's windows start (`spans`' `starts.row_splits`);
        every row has at least one window.
      aggregation: one of `modeling.data.windows.AGGREGATIONS`.

    Returns:
      float32 [B, K].
    """
    if aggregation not in python_windows.AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; expected one of "
                         f"{python_windows.AGGREGATIONS}")
    per_row = tf.RaggedTensor.from_row_splits(logits, row_splits)  # [B, (W), K]
    if aggregation == "max":
        return tf.nn.softmax(tf.reduce_max(per_row, axis=1), axis=-1)
    return tf.reduce_mean(tf.ragged.map_flat_values(tf.nn.softmax, per_row), axis=1)
