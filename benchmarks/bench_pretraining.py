"""Pre-training speed: examples/s of the full training step (BertPretrainer forward and
backward, all-reduce, clip, AdamWeightDecay) for BERT-Base shapes, side by side with the peer's
(transformers `BertForPreTraining`, `peers/peer_pretraining.py`, in the peer venv).

  python benchmarks/bench_pretraining.py                       # ours and the peer, interleaved
  python benchmarks/bench_pretraining.py --steps=3 --configs=bf16 --peer_configs=

Random weights, synthetic batches (seq 128, 20 masked positions, global batch 32), one device.
Each configuration runs in its own process (the dtype policy is global; peak RSS is its own),
configurations are interleaved round by round, and medians are reported, with each run's share
of CPU time in the kernel over the timed steps. The ratio is against the peer's fastest
configuration in the same run.
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

from bench_finetuning import PEER_PYTHON  # one peer venv for all benchmarks

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = {"fp32": ("float32", False), "fp32_xla": ("float32", True),
           "bf16": ("mixed_bfloat16", False), "bf16_xla": ("mixed_bfloat16", True)}
PEER_CONFIGS = {"peer_fp32": [], "peer_bf16": ["--autocast=bfloat16"],
                "peer_bf16_fused": ["--autocast=bfloat16", "--fused_optimizer"],
                "peer_fp32_compiled": ["--torch_compile"]}
BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)


def child(args):
    sys.path.insert(0, str(ROOT))
    import tensorflow as tf
    from modeling import BertConfig
    from modeling.tasks.pretraining import MaskedLMNextSentenceObjective
    from modeling.training import distribution, trainer
    precision, xla = CONFIGS[args.child]
    trainer.set_precision(precision)
    batch, seq, predictions = args.batch, 128, 20
    rng = tf.random.Generator.from_seed(1)
    example = {
        "input_ids": rng.uniform([batch, seq], 0, 30522, tf.int32),
        "input_mask": tf.ones([batch, seq], tf.int32),
        "token_type_ids": tf.concat([tf.zeros([batch, 64], tf.int32),
                                     tf.ones([batch, 64], tf.int32)], 1),
        "masked_lm_positions": rng.uniform([batch, predictions], 1, seq, tf.int32),
        "masked_lm_ids": rng.uniform([batch, predictions], 0, 30522, tf.int32),
        "masked_lm_weights": tf.ones([batch, predictions], tf.float32),
        "next_sentence_labels": rng.uniform([batch, 1], 0, 2, tf.int32),
    }
    strategy = distribution.get_strategy("one_device")
    pretrainer = trainer.Trainer(MaskedLMNextSentenceObjective(), strategy,
                                 BertConfig(**BERT_BASE), 1e-4, 10000, 100, use_xla=xla)
    dataset = tf.data.Dataset.from_tensors(example).repeat()
    iterator = distribution.per_replica_batches(strategy, dataset)
    pretrainer._train_loop(iterator, tf.constant(1))  # compile
    pretrainer._train_loop(iterator, tf.constant(args.warmup_steps - 1))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    pretrainer._train_loop(iterator, tf.constant(args.steps))
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"examples_per_s": batch * args.steps / seconds,
                      "rss_gb": after.ru_maxrss / 1e6,
                      "user_s": after.ru_utime - usage.ru_utime,
                      "system_s": after.ru_stime - usage.ru_stime}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per run")
    parser.add_argument("--warmup_steps", type=int, default=3,
                        help="untimed steps first: the first compiles, and the heap reaches its "
                             "working set only by the third (what a long run's steps cost)")
    parser.add_argument("--batch", type=int, default=32, help="global batch")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--configs", default="fp32,bf16")
    parser.add_argument("--peer_configs", default="peer_fp32,peer_bf16",
                        help=f"among {', '.join(PEER_CONFIGS)}; empty for none")
    parser.add_argument("--child", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup_steps < 1:
        parser.error(f"--warmup_steps={args.warmup_steps}: at least 1 (the compiling step)")
    if args.child:
        return child(args)
    names = [n for n in args.configs.split(",") if n]
    peers = [n for n in args.peer_configs.split(",") if n]
    if peers and not PEER_PYTHON.exists():
        sys.exit(f"--peer_configs: {PEER_PYTHON} is absent (benchmarks/peers/README.md)")
    runs = {name: [] for name in names + peers}
    for round_index in range(args.repeats):
        for name in names + peers:
            common = ["--steps", str(args.steps), "--warmup_steps", str(args.warmup_steps),
                      "--batch", str(args.batch)]
            command = ([str(PEER_PYTHON), str(ROOT / "benchmarks/peers/peer_pretraining.py"),
                        *common, *PEER_CONFIGS[name]] if name in PEER_CONFIGS
                       else [sys.executable, __file__, "--child", name, *common])
            result = subprocess.run(command, check=True, capture_output=True, text=True,
                                    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
            runs[name].append(json.loads(result.stdout.strip().splitlines()[-1]))
            print(f"round {round_index + 1} {name}: {runs[name][-1]}", file=sys.stderr)
    median = {name: {key: statistics.median(run[key] for run in runs[name])
                     for key in ("examples_per_s", "rss_gb", "user_s", "system_s")}
              for name in runs}
    best_peer = max(peers, key=lambda n: median[n]["examples_per_s"]) if peers else None
    print(f"BERT-Base, seq 128, global batch {args.batch}, {args.steps} timed steps, "
          f"{args.repeats} rounds, medians; the peer's best: {best_peer}")
    print(f"{'config':20} {'examples/s':>10} {'peak RSS GB':>11} {'kernel':>7} "
          f"{'vs peer best':>12}")
    for name in names + peers:
        figures = median[name]
        kernel = figures["system_s"] / max(figures["user_s"] + figures["system_s"], 1e-9)
        ratio = (f"{figures['examples_per_s'] / median[best_peer]['examples_per_s']:.2f}x"
                 if best_peer else "")
        print(f"{name:20} {figures['examples_per_s']:>10.2f} {figures['rss_gb']:>11.2f} "
              f"{kernel:>7.1%} {ratio:>12}")


if __name__ == "__main__":
    main()
