"""The matmul count behind bench_finetuning.py's matmul-bound limit (benchmarks/step_limit.py)."""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import step_limit  # noqa: E402


def test_a_small_encoders_training_matmuls_counted_by_hand():
    # 3 pieces, 4 wide, feed-forward 6, 2 layers, the head reading [CLS] alone.
    first_layer = (2 * 3 * 4 * 4 * 4  # query, key, value, attention output: [3, 4] x [4, 4]
                   + 2 * 2 * 3 * 4 * 6  # [3, 4] x [4, 6] and [3, 6] x [6, 4]
                   + 2 * 2 * 3 * 3 * 4)  # scores [3, 4] x [4, 3] and their sum of V
    last_layer = (2 * 2 * 3 * 4 * 4  # keys and values of the 3 pieces
                  + 2 * 2 * 1 * 4 * 4  # the [CLS] row's query and attention output
                  + 2 * 2 * 1 * 4 * 6  # its feed-forward
                  + 2 * 2 * 1 * 3 * 4)  # its scores and their sum of V
    assert step_limit.training_flops(3, 1, 4, 6, 2) == 3 * (first_layer + last_layer)


@pytest.mark.parametrize("length", [2, 7, 128])
def test_a_head_reading_every_piece_makes_the_last_layer_a_full_one(length):
    one = step_limit.training_flops(length, length, 32, 37, 1)
    assert step_limit.training_flops(length, length, 32, 37, 3) == 3 * one
    assert step_limit.training_flops(length, 1, 32, 37, 3) < 3 * one
