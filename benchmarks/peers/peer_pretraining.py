"""The peer's pre-training step, for `bench_pretraining.py`: transformers' `BertForPreTraining`
(BERT-Base, random weights) trained on synthetic batches of the benchmark's shapes, as its users
write the loop: masked-LM labels -100 except at the masked positions, the next-sentence label,
AdamW, gradients clipped to global norm 1.0.

One JSON line: examples/s over the timed steps, peak RSS, and the process's user and system
CPU seconds. Runs in the peer venv (README.md here), never the project's environment.

  /work/peer-venv/bin/python benchmarks/peers/peer_pretraining.py --steps=5 --autocast=bfloat16
"""
import argparse
import json
import resource
import time

import peer_training  # first: sets offline mode before transformers loads
import torch
import transformers

BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)


def synthetic_batch(batch, seq, predictions, generator):
    """The benchmark's batch: random ids, two segments of seq / 2, `predictions` masked
    positions per sequence (distinct, never [CLS]), random next-sentence labels."""
    input_ids = torch.randint(0, BERT_BASE["vocab_size"], (batch, seq), generator=generator)
    token_type_ids = torch.cat([torch.zeros(batch, seq // 2, dtype=torch.long),
                                torch.ones(batch, seq - seq // 2, dtype=torch.long)], dim=1)
    labels = torch.full((batch, seq), -100, dtype=torch.long)
    for row in range(batch):
        positions = torch.randperm(seq - 1, generator=generator)[:predictions] + 1
        labels[row, positions] = input_ids[row, positions]
    return {"input_ids": input_ids, "attention_mask": torch.ones(batch, seq, dtype=torch.long),
            "token_type_ids": token_type_ids, "labels": labels,
            "next_sentence_label": torch.randint(0, 2, (batch,), generator=generator)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=5, help="timed steps")
    parser.add_argument("--warmup_steps", type=int, default=3, help="untimed steps first")
    parser.add_argument("--autocast", choices=["none", "bfloat16"], default="none",
                        help="torch.autocast on the CPU (the peer's mixed precision)")
    parser.add_argument("--torch_compile", action="store_true")
    parser.add_argument("--fused_optimizer", action="store_true",
                        help="AdamW by torch's fused kernel (transformers' adamw_torch_fused)")
    args = parser.parse_args()

    torch.manual_seed(1)
    model = transformers.BertForPreTraining(transformers.BertConfig(**BERT_BASE)).train()
    step_model = torch.compile(model) if args.torch_compile else model
    decay = [p for n, p in model.named_parameters() if "LayerNorm" not in n and "bias" not in n]
    no_decay = [p for n, p in model.named_parameters() if "LayerNorm" in n or "bias" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=1e-4, eps=1e-6,
                                  fused=args.fused_optimizer or None)
    batch = synthetic_batch(args.batch, args.seq, args.predictions,
                            torch.Generator().manual_seed(1))

    def step():
        return peer_training.optimizer_step(step_model, model, optimizer, batch,
                                            args.autocast).item()

    for _ in range(args.warmup_steps):  # compilation, and the heap's working set
        step()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"examples_per_s": args.batch * args.steps / seconds,
                      "rss_gb": after.ru_maxrss / 1e6, "loss": loss,
                      "user_s": after.ru_utime - usage.ru_utime,
                      "system_s": after.ru_stime - usage.ru_stime}))


if __name__ == "__main__":
    main()
