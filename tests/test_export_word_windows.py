"""The NER windows in the graph (`modeling.export.word_windows`) equal run_ner.py's
(`modeling.data.windows.word_spans`): the same windows and the same owning window of every word."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.data.windows import word_spans
from modeling.export import word_windows

_SIGNATURE = [tf.RaggedTensorSpec([None, None], tf.int64, row_splits_dtype=tf.int64),
              tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64)]
# One trace for every batch, window and stride (a Python int would trace each anew).
_windows_in_graph = tf.function(word_windows.windows, input_signature=_SIGNATURE)


def graph_windows(rows, max_pieces, stride):
    """[(windows, owners)] of each row of piece counts, through the graph."""
    counts = tf.RaggedTensor.from_row_lengths(
        np.array([c for row in rows for c in row], np.int64), [len(row) for row in rows])
    firsts, ends, owners = _windows_in_graph(counts, max_pieces, stride)
    return [(list(zip(f, e)), o) for f, e, o in zip(firsts.to_list(), ends.to_list(),
                                                     owners.to_list())]


def test_random_sentences_get_the_windows_and_owners_of_run_ner():
    rng = np.random.default_rng(26)
    several = 0
    for _ in range(60):
        max_pieces = int(rng.integers(1, 13))
        stride = int(rng.integers(1, max_pieces + 1))
        # Mostly what convert_sentence passes (1 to max_pieces pieces a word), some words of
        # no pieces or of more than a window, to check the rule itself; some empty rows.
        rows = [[int(rng.integers(1, max_pieces + 1)) if rng.random() < 0.9
                 else int(rng.integers(0, max_pieces + 5)) for _ in range(rng.integers(0, 45))]
                for _ in range(rng.integers(1, 9))]
        for row, got in zip(rows, graph_windows(rows, max_pieces, stride)):
            assert got == word_spans(row, max_pieces, stride), (row, max_pieces, stride)
            several += len(got[0]) > 2
    assert several > 200  # rows of three windows or more (225 of 238)


@pytest.mark.parametrize("row, max_pieces, expected", [
    # Word 1 has context 0 in both windows, of 2 pieces each: the earlier takes it.
    ([1, 1, 1], 2, ([(0, 2), (1, 3)], [0, 0, 1])),
    # Context 0 in both, the later window longer (3 pieces against 2): the later takes it.
    ([1, 1, 2], 3, ([(0, 2), (1, 3)], [0, 1, 1])),
    # Context 0 in both, the earlier longer: the earlier.
    ([1, 1, 2], 2, ([(0, 2), (1, 2), (2, 3)], [0, 0, 2])),
    ([], 2, ([(0, 0)], [])),  # no words: one window of [CLS] [SEP]
])
def test_ties_go_to_the_longer_then_the_earlier_window(row, max_pieces, expected):
    assert word_spans(row, max_pieces, 1) == expected
    assert graph_windows([row], max_pieces, 1) == [expected]


def test_an_empty_batch_has_no_windows():
    assert graph_windows([], 4, 2) == []
