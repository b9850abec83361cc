"""The one windows rule for long inputs, in Python and in the graph (they must agree)."""
import itertools

import numpy as np
import pytest

from modeling.data import windows


def test_spans_are_the_original_doc_spans():
    # The original run_squad.py's loop, for 10 pieces, windows of 4, stride 3.
    assert windows.spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert windows.spans(11, 4, 3) == [(0, 4), (3, 4), (6, 4), (9, 2)]
    # A stride beyond the window never skips a piece.
    assert windows.spans(10, 4, 9) == [(0, 4), (4, 4), (8, 2)]
    assert windows.spans(0, 4, 2) == []
    assert windows.spans(3, 4, 2) == [(0, 3)]


def test_every_piece_has_exactly_one_max_context_window_that_holds_it():
    all_spans = windows.spans(23, 8, 3)
    for position in range(23):
        index = windows.max_context_index(all_spans, position)
        start, length = all_spans[index]
        assert start <= position < start + length
    assert windows.max_context_index(all_spans, 23) is None
    # Piece 4 sits in [0, 8) with left 4 and right 3, in [3, 11) with left 1: the first wins.
    assert windows.max_context_index(all_spans, 4) == 0


@pytest.mark.parametrize("bad", [(0, 1), (1, 0)])
def test_an_empty_window_or_stride_is_refused(bad):
    with pytest.raises(ValueError, match="must be at least 1"):
        windows.spans(5, *bad)


def test_the_graph_builds_the_same_windows_and_max_context():
    graph_windows = pytest.importorskip("modeling.export.windows")
    num_tokens = np.arange(30)
    for window, stride in itertools.product((1, 2, 5, 8), (1, 3, 4, 9)):
        starts, lengths = graph_windows.spans(num_tokens, window, stride)
        best = graph_windows.max_context_windows(starts, lengths).to_list()
        starts, lengths = starts.to_list(), lengths.to_list()
        for row, n in enumerate(num_tokens):
            expected = windows.spans(int(n), window, stride)
            got = list(zip(starts[row], lengths[row]))
            assert got == [tuple(span) for span in expected], (n, window, stride)
            assert best[row] == [
                windows.max_context_index(expected, p) for p in range(n)], (n, window, stride)


def test_first_argmax_takes_the_first_of_equal_values():
    graph_windows = pytest.importorskip("modeling.export.windows")
    values = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    assert graph_windows.first_argmax(values, axis=1).numpy().tolist() == [1, 0]
    assert graph_windows.first_argmax(values.T, axis=0).numpy().tolist() == [1, 0]


def test_head_tail_keeps_sun_et_als_128_and_382_of_510():
    assert windows.head_tail(600, 510) == (128, 382)
    assert windows.head_tail(511, 510) == (128, 382)
    assert windows.head_tail(510, 510) == (510, 0)  # fits: nothing cut
    assert windows.head_tail(300, 126) == (32, 94)  # 126 * 128 / 510 = 31.6
    assert windows.head_tail(5, 1) == (0, 1)


def test_documents_aggregate_their_windows_mean_of_probabilities_or_max_of_logits():
    logits = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [3.0, -1.0]])
    counts = [1, 2, 1]  # documents of 1, 2 and 1 windows
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    mean = windows.document_probabilities(logits, counts, "mean")
    np.testing.assert_allclose(mean, [softmax[0], softmax[1:3].mean(axis=0), softmax[3]])
    largest = windows.document_probabilities(logits, counts, "max")
    np.testing.assert_allclose(largest[1], np.exp([2.0, 1.0]) / np.exp([2.0, 1.0]).sum())
    np.testing.assert_allclose(largest[[0, 2]], softmax[[0, 3]])  # one window: its softmax
    assert windows.document_probabilities(np.zeros([0, 3]), [], "mean").shape == (0, 3)
    with pytest.raises(ValueError, match="do not split 4 windows"):
        windows.document_probabilities(logits, [2, 0, 2], "mean")
    with pytest.raises(ValueError, match="unknown aggregation 'vote'"):
        windows.document_probabilities(logits, counts, "vote")


def test_the_graph_cuts_aggregates_and_gathers_windows_as_python():
    graph_windows = pytest.importorskip("modeling.export.windows")
    import tensorflow as tf
    rows = [list(range(100, 100 + n)) for n in (0, 1, 7, 8, 9, 30)]
    ids = tf.ragged.constant(rows, dtype=tf.int32)
    for window in (1, 4, 8):
        cut = graph_windows.head_tail(ids, window).to_list()
        for row, got in zip(rows, cut):
            head, tail = windows.head_tail(len(row), window)
            assert got == row[:head] + row[len(row) - tail:], (len(row), window)
    starts, lengths = graph_windows.spans(ids.row_lengths(), 8, 3)
    pieces = graph_windows.window_pieces(ids, starts, lengths).to_list()
    assert pieces == [row[s:s + n] for row in rows for s, n in windows.spans(len(row), 8, 3)]
    rng = np.random.default_rng(0)
    counts = np.array([1, 3, 2, 5])
    logits = rng.normal(size=[counts.sum(), 3]).astype(np.float32)
    splits = np.concatenate([[0], np.cumsum(counts)])
    for aggregation in windows.AGGREGATIONS:
        np.testing.assert_allclose(
            graph_windows.document_probabilities(logits, splits, aggregation),
            windows.document_probabilities(logits, counts, aggregation), atol=1e-6)


@pytest.mark.parametrize("stride, window", [(0, 10), (10, 10), (11, 10), (-1, 10)])
def test_check_stride_refuses_a_stride_outside_one_to_below_the_window(stride, window):
    with pytest.raises(ValueError, match=rf"^--doc_stride={stride} must be at least 1 and "
                                         rf"below the {window} pieces of a window \(why\)$"):
        windows.check_stride(stride, window, "--doc_stride", "why")


@pytest.mark.parametrize("stride", [1, 5, 9])
def test_check_stride_takes_one_to_below_the_window(stride):
    windows.check_stride(stride, 10, "--doc_stride", "why")


def test_word_spans_keep_words_whole_and_give_each_word_one_window():
    # Words of 1, 2, 3 and 1 pieces in windows of 4 pieces, starts 2 pieces apart.
    spans, owners = windows.word_spans([1, 2, 3, 1], 4, 2)
    assert spans == [(0, 2), (2, 4)]  # [a b b] [c c c d]: the third word does not fit the first
    assert owners == [0, 0, 1, 1]
    assert windows.word_spans([], 4, 2) == ([(0, 0)], [])
    assert windows.word_spans([9], 4, 2) == ([(0, 1)], [0])  # a word longer than a window
