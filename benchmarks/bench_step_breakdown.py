"""Where a fine-tuning step's time goes, against the speed of its own matmuls (issue 25).

  python benchmarks/bench_step_breakdown.py                    # MiniLM, 32 x 53, 7 rounds
  python benchmarks/bench_step_breakdown.py --seq_length=128 --rounds=5
  python benchmarks/bench_step_breakdown.py --precision=mixed_bfloat16   # bfloat16 matmuls
  python benchmarks/bench_step_breakdown.py --precision=mixed_bfloat16 --with_peer

A MiniLM classifier (random weights) at the real shapes of an MRPC step: batch 32 and a length
t of real tokens (53 is the mean pair, and a length bucket's mean). Three compiled functions
are timed in turn each round: the forward pass (training=True, with the loss), forward and
backward (the dense gradients), and the whole step (clipping and the original's Adam update
too). Then every distinct matmul of the step is timed alone at its own shape and transposes:
the [B*t, H] projections, the feed-forward pair, the attention's batched [t, d] x [d, t]
products, the last layer's at [CLS] alone (what the classifier reads), and in the backward pass
each one's two products (the input's gradient and the weight's). Their times, each multiplied
by how often the step runs it, add up to the step's arithmetic at the speed
this CPU reaches on those shapes: the limit the step can approach by removing everything else
(element-wise ops, softmax, LayerNorm, the update, the framework). Medians over rounds. Under
--precision=mixed_bfloat16 the model computes in bfloat16 and the matmuls are timed in bfloat16.
Last, a few steps under TensorFlow's profiler say where the time beside the matmuls goes.

--with_peer also runs benchmarks/peers/peer_step_breakdown.py (transformers on PyTorch, the
peer's best: autocast to bfloat16 under --precision=mixed_bfloat16, torch's fused update) on
the same shapes, after ours: its step by the same parts and the same matmuls timed by torch, so
that the two steps' arithmetic and the rest can be compared side by side.
"""
import argparse
import collections
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from modeling.runtime import cpu_kernels, quiet  # noqa: E402

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()
import tensorflow as tf  # noqa: E402

# matmul_seconds traces a function for each shape on purpose: no retracing warnings.
tf.get_logger().setLevel("ERROR")

from modeling import BertConfig  # noqa: E402
from modeling.models.classifier import BertClassifier  # noqa: E402
from modeling.training import optimization, trainer  # noqa: E402

from bench_finetuning import PEER_PYTHON  # noqa: E402  (one peer venv for all benchmarks)
from step_limit import step_matmuls  # noqa: E402  (the limit's own count of the matmuls)

CHAIN = 10  # matmuls timed together (see matmul_seconds)
PEER_SCRIPT = pathlib.Path(__file__).resolve().parent / "peers" / "peer_step_breakdown.py"
MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, hidden_act="gelu_exact")


def matmul_seconds(dims, m, k, n, transpose_a, transpose_b, repeats, dtype=tf.float32,
                   chain=CHAIN):
    """Median seconds of one such tf.matmul: a compiled chain of `chain` of them, each on
    inputs of its own and after the previous one, as a step runs them, timed whole. (Timed one
    call at a time, the call's own cost, about 0.3 ms, was most of a small matmul's time.)"""
    def operand(rows, columns):
        return tf.random.normal(dims + (rows, columns), dtype=dtype)
    operands = [(operand(*((k, m) if transpose_a else (m, k))),
                 operand(*((n, k) if transpose_b else (k, n)))) for _ in range(chain)]

    @tf.function
    def products():
        corners, previous = [], []
        for a, b in operands:
            with tf.control_dependencies(previous):
                product = tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
            previous = [product]
            corners.append(product[..., :1, :1])
        return tf.stack(corners)
    products().numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        products().numpy()
        times.append((time.perf_counter() - start) / chain)
    return statistics.median(times)


def step_functions(batch_inputs):
    model = BertClassifier(BertConfig(**MINILM), 2)
    optimizer = optimization.create_optimizer(2e-5, 1000, 100)
    variables = model.trainable_variables
    optimizer.build(variables)

    def gradients():
        with tf.GradientTape() as tape:
            loss = model(batch_inputs, training=True)["loss"]
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]

    @tf.function
    def forward():
        return model(batch_inputs, training=True)["loss"]

    @tf.function
    def forward_backward():
        return tf.add_n([tf.reduce_sum(g[:1]) for g in gradients()])

    @tf.function
    def whole_step():  # as the trainer's: the update applies the clipping's factor
        dense = gradients()
        scale, _ = optimization.clip_scale(dense)
        optimizer.apply_scaled_gradients(zip(dense, variables), scale)
        return optimizer.iterations

    return {"forward": forward, "forward+backward": forward_backward, "step": whole_step}


# What an op's time counts as, first match on (op name, op type) wins. An XLA-compiled call
# (fused.py's element-wise passes, the optimizer's update) is of type "XLA".
CATEGORIES = (
    ("matmuls", lambda name, kind: "MatMul" in kind),
    ("clipping and the update", lambda name, kind: any(
        part in name for part in ("adam_weight_decay", "global_norm"))
        or kind in ("AssignVariableOp", "ReadVariableOp")),
    ("GELU and its derivative (compiled; padding rows included)",
     lambda name, kind: "gelu" in name),
    ("dropout + residual + LayerNorm and derivative (compiled; padding rows included)",
     lambda name, kind: "dropout_add_layer_norm" in name),
    ("dropout masks", lambda name, kind: "dropout" in name),
    ("token rows: gathers", lambda name, kind: kind in (
        "GatherNd", "ScatterNd", "Where", "Cumsum")
        or (kind in ("GatherV2", "ConcatV2") and "embeddings" not in name)),
    ("attention: softmax, scale, mask, transposes", lambda name, kind: "attention" in name
        and "self" in name),
    ("bias gradients", lambda name, kind: kind == "BiasAddGrad"),
    ("embeddings", lambda name, kind: "embeddings" in name or kind == "UnsortedSegmentSum"),
    ("casts", lambda name, kind: kind == "Cast"),
)


def op_times(function, steps):
    """Seconds per step of each category of CATEGORIES (and "other ops"), summed over the
    threads that ran them, from TensorFlow's profiler over `steps` calls of `function`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with tempfile.TemporaryDirectory(prefix="step_profile_") as directory:
        tf.profiler.experimental.start(directory)
        for _ in range(steps):
            function().numpy()
        tf.profiler.experimental.stop()
        path = next(pathlib.Path(directory).rglob("*.xplane.pb"))
        space.ParseFromString(path.read_bytes())
    totals = collections.Counter()
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        for line in plane.lines:
            for event in line.events:
                label = plane.event_metadata[event.metadata_id].name
                if label == "ExecutorState::ProcessAsync::Start":  # runs an XLA-compiled call
                    stats = {plane.stat_metadata[s.metadata_id].name:
                             s.str_value or plane.stat_metadata[s.ref_value].name
                             for s in event.stats}
                    name, kind = stats.get("name", ""), "XLA"
                elif "::" not in label and ":" in label:
                    name, kind = label.rsplit(":", 1)
                    if not kind[:1].isupper() and kind[:1] != "_":
                        continue
                else:
                    continue
                category = next((c for c, test in CATEGORIES if test(name, kind)), "other ops")
                totals[category] += event.duration_ps / 1e12 / steps
    return totals


def run_peer(inventory, args):
    """The peer's figures (peer_step_breakdown.py's JSON) on the same shapes."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as shapes:
        json.dump([[list(dims), m, k, n, transpose_a, transpose_b]
                   for _, _, dims, m, k, n, transpose_a, transpose_b, _ in inventory], shapes)
        shapes.flush()
        autocast = "bfloat16" if args.precision == "mixed_bfloat16" else "none"
        output = subprocess.run(
            [str(PEER_PYTHON), str(PEER_SCRIPT), f"--inventory={shapes.name}",
             f"--batch_size={args.batch_size}", f"--seq_length={args.seq_length}",
             f"--rounds={args.rounds}", f"--matmul_repeats={args.matmul_repeats}",
             f"--autocast={autocast}", "--fused_optimizer"],
            check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def print_matmuls(rows, peer):
    """The matmul table: ours, and the peer's times at the same shapes beside them."""
    header = "| phase | matmul | shape (batch) m x k x n | per step | ms each | GFLOP/s |"
    rule = "|---|---|---|---:|---:|---:|"
    if peer:
        header += " peer ms each | peer GFLOP/s |"
        rule += "---:|---:|"
    print(f"\n{header}\n{rule}")
    for index, (phase, name, dims, m, k, n, count, seconds, gflops) in enumerate(rows):
        shape = f"({dims[0]}) " if dims else ""
        line = (f"| {phase} | {name} | {shape}{m} x {k} x {n} | {count} | "
                f"{seconds * 1e3:.3f} | {gflops:.0f} |")
        if peer:
            theirs = peer["matmul_seconds"][index]
            line += f" {theirs * 1e3:.3f} | {gflops * seconds / theirs:.0f} |"
        print(line)


def print_parts(measured, implied, rows, peer):
    """The step by parts against its matmuls' time; with the peer's, side by side."""
    forward, backward = measured["forward"], measured["forward+backward"] - measured["forward"]
    update = measured["step"] - measured["forward+backward"]
    arithmetic = implied["forward"] + implied["backward"]
    parts = [("forward", forward, implied["forward"]),
             ("backward", backward, implied["backward"]),
             ("clip + update", update, 0.0), ("whole step", measured["step"], arithmetic)]
    if peer:
        theirs = peer["seconds"]
        their_implied = {"forward": 0.0, "backward": 0.0}
        for row, seconds in zip(rows, peer["matmul_seconds"]):
            their_implied[row[0]] += seconds * row[6]
        their_parts = [theirs["forward"], theirs["forward+backward"] - theirs["forward"],
                       theirs["step"] - theirs["forward+backward"], theirs["step"]]
        their_matmuls = [their_implied["forward"], their_implied["backward"], 0.0,
                         sum(their_implied.values())]
        print("\n| part | ours ms | its matmuls ms | the rest ms | peer ms | its matmuls ms | "
              "the rest ms | peer / ours |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for (name, ours, matmuls), peer_ms, peer_matmuls in zip(parts, their_parts,
                                                                their_matmuls):
            print(f"| {name} | {ours * 1e3:.0f} | {matmuls * 1e3:.0f} | "
                  f"{(ours - matmuls) * 1e3:.0f} | {peer_ms * 1e3:.0f} | "
                  f"{peer_matmuls * 1e3:.0f} | {(peer_ms - peer_matmuls) * 1e3:.0f} | "
                  f"{peer_ms / ours:.2f} |")
        return
    print("\n| part | measured ms | its matmuls at their own speed, ms | matmul share |")
    print("|---|---:|---:|---:|")
    for name, ours, matmuls in parts:
        print(f"| {name} | {ours * 1e3:.0f} | {matmuls * 1e3:.0f} | {matmuls / ours:.0%} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=53)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--matmul_repeats", type=int, default=9)
    parser.add_argument("--precision", choices=["float32", "mixed_bfloat16"], default="float32")
    parser.add_argument("--profile_steps", type=int, default=5)
    parser.add_argument("--with_peer", action="store_true",
                        help=f"Also time the peer's step and matmuls with {PEER_PYTHON}.")
    args = parser.parse_args()
    if args.with_peer and not PEER_PYTHON.exists():
        sys.exit(f"--with_peer needs {PEER_PYTHON} (see benchmarks/peers/README.md)")
    trainer.set_precision(args.precision)
    dtype = tf.bfloat16 if args.precision == "mixed_bfloat16" else tf.float32
    batch, length = args.batch_size, args.seq_length
    inputs = {"input_ids": tf.random.uniform([batch, length], 0, 30522, tf.int32),
              "input_mask": tf.ones([batch, length], tf.int32),
              "token_type_ids": tf.zeros([batch, length], tf.int32),
              "label_ids": tf.random.uniform([batch], 0, 2, tf.int32)}
    functions = step_functions(inputs)
    for function in functions.values():
        function().numpy()  # trace and warm up
    times = {name: [] for name in functions}
    for _ in range(args.rounds):  # interleaved: drift hits every phase alike
        for name, function in functions.items():
            start = time.perf_counter()
            function().numpy()
            times[name].append(time.perf_counter() - start)
    measured = {name: statistics.median(values) for name, values in times.items()}

    inventory = step_matmuls(batch, length, MINILM)
    rows, implied = [], {"forward": 0.0, "backward": 0.0}
    for phase, name, dims, m, k, n, transpose_a, transpose_b, count in inventory:
        seconds = matmul_seconds(dims, m, k, n, transpose_a, transpose_b, args.matmul_repeats,
                                 dtype)
        flops = 2 * m * k * n * (dims[0] if dims else 1)
        implied[phase] += seconds * count
        rows.append((phase, name, dims, m, k, n, count, seconds, flops / seconds / 1e9))
    peak = 2 * 2048 ** 3 / matmul_seconds((), 2048, 2048, 2048, False, False, 5, dtype,
                                            chain=3) / 1e9
    peer = run_peer(inventory, args) if args.with_peer else None

    print(f"MiniLM classifier, {args.precision}, batch {batch} x {length} tokens, "
          f"{args.rounds} rounds, medians; 2048^3 {dtype.name} matmul: {peak:.0f} GFLOP/s"
          + (f" (the peer's: {peer['peak_gflops']:.0f}; torch {peer['torch']}, transformers "
             f"{peer['transformers']})" if peer else ""))
    print_matmuls(rows, peer)
    print_parts(measured, implied, rows, peer)
    arithmetic = implied["forward"] + implied["backward"]
    shares = op_times(functions["step"], args.profile_steps)
    total = sum(shares.values())
    print(f"\nWhere the step's op time goes (TensorFlow's profiler, {args.profile_steps} steps; "
          f"time of ops summed over the threads that ran them, {total * 1e3:.0f} ms a step):\n")
    print("| ops | ms a step | share |")
    print("|---|---:|---:|")
    for category, seconds in shares.most_common():
        print(f"| {category} | {seconds * 1e3:.1f} | {seconds / total:.0%} |")
    print(f"\nThe step at its matmuls' own speed would take {arithmetic * 1e3:.0f} ms: the "
          f"step takes {measured['step'] / arithmetic:.2f}x that; {batch / arithmetic:.1f} "
          f"examples/s is this CPU's limit at these shapes, {batch / measured['step']:.1f} "
          f"is reached.")


if __name__ == "__main__":
    main()
