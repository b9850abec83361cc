"""bench_finetuning.py's limit table: each row set against its own TensorFlow's limit."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_finetuning  # noqa: E402


def _limit(float32, bfloat16):
    return {"records": 100, "mean_length": 50.0, "gflop_per_batch": 100.0,
            "matmul_gflops": {"float32": 1.0, "bfloat16": 2.0},
            "examples_per_second": {"float32": float32, "bfloat16": bfloat16}}


def _run(config, speed):
    return {"task": "mrpc", "config": config, "after_first_step_per_second": speed}


def _row(table, name):
    return next(line for line in table.splitlines() if line.startswith(f"| {name} "))


def test_nightly_rows_are_shares_of_the_nightly_limit_and_ratios_to_the_same_peer():
    runs = [_run("buckets_bfloat16", 80.0), _run("buckets_bfloat16_nightly", 90.0),
            _run("peer_grouped_bfloat16_fused", 60.0)]
    table = bench_finetuning.limit_table(
        "mrpc", runs, ["buckets_bfloat16", "buckets_bfloat16_nightly"],
        _limit(100.0, 200.0), _limit(100.0, 300.0))
    assert _row(table, "buckets_bfloat16").endswith("| 80.00 | 1.33x | 40% |")
    assert _row(table, "buckets_bfloat16_nightly").endswith("| 90.00 | 1.50x | 30% |")
    assert _row(table, "limit, bfloat16_nightly").endswith("| 300.00 | 5.00x (90%: 4.50x) | 100% |")


def test_without_a_nightly_limit_there_are_no_nightly_limit_rows():
    runs = [_run("buckets_bfloat16", 80.0), _run("peer_grouped_bfloat16_fused", 60.0)]
    table = bench_finetuning.limit_table("mrpc", runs, ["buckets_bfloat16"],
                                         _limit(100.0, 200.0))
    assert "nightly" not in table
    assert _row(table, "limit, bfloat16").endswith("| 200.00 | 3.33x (90%: 3.00x) | 100% |")
