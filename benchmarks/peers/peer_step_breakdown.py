"""The peer's side of benchmarks/bench_step_breakdown.py: one fine-tuning step of a MiniLM
classifier in transformers on PyTorch, timed by parts, and the same matmuls timed alone.

  /work/peer-venv/bin/python benchmarks/peers/peer_step_breakdown.py --inventory=FILE \
      --autocast=bfloat16 --fused_optimizer

The model is `BertForSequenceClassification` with MiniLM's shapes and random weights (nothing
is loaded), trained as `peer_training.optimizer_step` trains it: the batch under `--autocast`,
backward, clipping to global norm 1.0, the original's update (fused with --fused_optimizer).
Forward, forward+backward and the whole step are timed in turn each round, medians, as the
project's script times its own. Then each matmul of the inventory the project's script wrote
(a JSON list of [batch dims, m, k, n, transpose_a, transpose_b]) is timed in the matmuls'
dtype (bfloat16 under autocast), ten in a row on inputs of their own, and a 2048^3 one.
Prints one JSON line.
"""
import argparse
import json
import statistics
import time

import peer_training  # noqa: F401  (offline mode first)
import torch
import transformers

MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, hidden_act="gelu", num_labels=2)


def median_seconds(function, repeats):
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_seconds(dims, m, k, n, transpose_a, transpose_b, repeats, dtype, chain=10):
    """Median seconds of one such torch.matmul: `chain` of them in a row, each on inputs of
    its own, timed whole (as the project's script times its own)."""
    def operand(rows, columns, transposed):
        tensor = torch.randn(*dims, *((columns, rows) if transposed else (rows, columns)))
        tensor = tensor.to(dtype)
        return tensor.transpose(-1, -2) if transposed else tensor
    operands = [(operand(m, k, transpose_a), operand(k, n, transpose_b)) for _ in range(chain)]

    def products():
        for a, b in operands:
            torch.matmul(a, b)
    with torch.no_grad():
        return median_seconds(products, repeats) / chain


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inventory", required=True, help="The matmuls, a JSON file.")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=53)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--matmul_repeats", type=int, default=9)
    parser.add_argument("--autocast", choices=("none", "bfloat16"), default="none")
    parser.add_argument("--fused_optimizer", action="store_true")
    parser.add_argument("--num_threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(transformers.BertConfig(**MINILM))
    model.train()
    optimizer = peer_training.make_optimizer(model, 2e-5, fused=args.fused_optimizer)
    batch_size, length = args.batch_size, args.seq_length
    batch = {"input_ids": torch.randint(0, MINILM["vocab_size"], (batch_size, length)),
             "attention_mask": torch.ones(batch_size, length, dtype=torch.long),
             "token_type_ids": torch.zeros(batch_size, length, dtype=torch.long),
             "labels": torch.randint(0, 2, (batch_size,))}
    autocast = args.autocast == "bfloat16"

    def forward():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return model(**batch).loss

    def forward_only():
        forward().detach()

    def forward_backward():
        forward().backward()
        optimizer.zero_grad(set_to_none=True)

    def whole_step():
        peer_training.optimizer_step(model, model, optimizer, batch, args.autocast)

    functions = {"forward": forward_only, "forward+backward": forward_backward,
                 "step": whole_step}
    for function in functions.values():
        function()
    times = {name: [] for name in functions}
    for _ in range(args.rounds):  # interleaved, as the project's script
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    dtype = torch.bfloat16 if autocast else torch.float32
    with open(args.inventory, encoding="utf-8") as inventory:
        matmuls = [matmul_seconds(tuple(dims), m, k, n, transpose_a, transpose_b,
                                  args.matmul_repeats, dtype)
                   for dims, m, k, n, transpose_a, transpose_b in json.load(inventory)]
    peak = matmul_seconds((), 2048, 2048, 2048, False, False, 5, dtype, chain=3)
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "seconds": {name: statistics.median(values)
                                  for name, values in times.items()},
                      "matmul_seconds": matmuls,
                      "peak_gflops": 2 * 2048 ** 3 / peak / 1e9}))


if __name__ == "__main__":
    main()
