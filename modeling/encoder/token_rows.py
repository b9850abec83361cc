"""Which positions of a batch the encoder computes, as the rows of its matrices.

The encoder runs every dense layer, LayerNorm and dropout on a matrix with one row per position,
[rows, H], as the original's `reshape_to_matrix` does, and makes a batch [B, T, H] of it only
for attention. A layout says which positions get a row:

  AllPositions: every position, padding included, as the original; the rows are a reshape.
  RealTokens: only the positions the input mask marks. Padding gets no row, so no matmul,
    LayerNorm or dropout computes it: a batch cut to its longest example still pads the others
    (a random batch of 32 MRPC pairs is 80 tokens long for 53 tokens a pair on average).

Both give the same numbers at the real tokens: a padded key gets exactly zero attention (its
adder is -10000, whose exp underflows to 0), and a padded query's output is read by nothing
but the padding's own rows. RealTokens' rows have a length only known when the graph runs,
which XLA cannot compile: `for_input_mask` picks AllPositions inside an XLA-compiled function.

Shape legend: B batch, T sequence length, P positions per sequence, n rows (B*T or real
tokens), H hidden size.
"""
import tensorflow as tf

from modeling import internals


class AllPositions:
    """Every position of a [B, T] batch is a row, row b*T + t."""

    def __init__(self, input_mask):
        """Args: input_mask: int Tensor [B, T] (only its shape is read)."""
        shape = tf.shape(input_mask)
        self.batch_size, self.seq_length = shape[0], shape[1]

    def rows(self, batch):
        """[B, T, ...] -> [n, ...]."""
        batch = tf.convert_to_tensor(batch)
        return tf.reshape(batch, [-1] + batch.shape[2:].as_list())

    def batch(self, rows):
        """[n, ...] -> [B, T, ...]."""
        rows = tf.convert_to_tensor(rows)
        return tf.reshape(rows, [self.batch_size, self.seq_length] + rows.shape[1:].as_list())

    def positions(self):
        """int32 [n]: each row's position t in its sequence."""
        return tf.tile(tf.range(self.seq_length), [self.batch_size])

    def row_of(self, positions):
        """int [B, P] positions of each sequence -> int32 [B, P], their rows."""
        offsets = self.seq_length * tf.range(self.batch_size)[:, tf.newaxis]  # [B, 1]
        return tf.cast(positions, tf.int32) + offsets


class RealTokens(AllPositions):
    """Only the positions where the input mask is not 0 are rows, in batch order."""

    def __init__(self, input_mask):
        """Args: input_mask: int Tensor [B, T], 1 for real tokens and 0 for padding."""
        super().__init__(input_mask)
        real = tf.reshape(input_mask, [-1]) != 0  # [B*T]
        # Of each row, its flat position b*T + t; of each flat position, the row it is (the
        # count of real tokens before it; meaningless at padding).
        self.flat_positions = tf.cast(tf.where(real)[:, 0], tf.int32)  # [n]
        self.flat_rows = tf.cumsum(tf.cast(real, tf.int32), exclusive=True)  # [B*T]
        # Of each flat position, its row, or n at padding: the zero row `batch` appends.
        self.rows_or_zero_row = tf.where(real, self.flat_rows, tf.size(self.flat_positions))

    def rows(self, batch):
        flat = super().rows(batch)
        if not flat.dtype.is_floating:
            return tf.gather(flat, self.flat_positions)
        return _gather(flat, self.flat_positions, self.rows_or_zero_row, append_zero_row=False)

    def batch(self, rows):
        """[n, ...] -> [B, T, ...], zeros at padding."""
        rows = tf.convert_to_tensor(rows)
        flat = _gather(rows, self.rows_or_zero_row, self.flat_positions, append_zero_row=True)
        return super().batch(flat)

    def positions(self):
        return self.flat_positions % self.seq_length

    def row_of(self, positions):
        """As `AllPositions.row_of`, for positions of real tokens. A position in the padding
        (a masked-LM slot of weight 0, say) gets the row of a real token of the batch: no
        row is computed for it."""
        rows = tf.gather(self.flat_rows, super().row_of(positions))
        return tf.minimum(rows, tf.maximum(tf.size(self.flat_positions) - 1, 0))


def _gather(values, indices, inverse, append_zero_row):
    """values[indices], with a zero row appended to values first if `append_zero_row`; one
    direction of the one-to-one map between rows and real positions, `inverse` the other.

    The gradient is the other direction's gather of the upstream: every row is read once, so
    no sum is needed. tf.gather's own gradient sums its IndexedSlices by a segment sum, and
    scatter_nd (the other way) runs on one thread: both took four times a gather's time.
    """
    @tf.custom_gradient
    def gather(values):
        source = values
        if append_zero_row:
            source = tf.pad(values, [[0, 1]] + [[0, 0]] * (values.shape.rank - 1))

        def gradient(upstream):
            return _gather(upstream, inverse, indices, not append_zero_row)
        return tf.gather(source, indices), gradient
    return gather(values)


def for_input_mask(input_mask):
    """RealTokens, or AllPositions where XLA compiles the graph (it needs static shapes)."""
    if internals.in_xla_context():
        return AllPositions(input_mask)
    return RealTokens(input_mask)
