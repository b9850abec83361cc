"""Peer for the long-document memory benchmark (`bench_long_documents.py --memory`): Hugging
Face transformers on PyTorch, `BertForSequenceClassification` from all-MiniLM-L6-v2, trained and
then predicting on the very windows the project's run reads.

The benchmark writes those windows (the project's Hyperpartisan reader and windowing, so that
both sides see the same shapes) to an .npz file: `train_input_ids`, `train_attention_mask`,
`train_token_type_ids`, `train_labels`, and the same four for `test` (int64 [windows, T]). This
script trains --max_steps steps on the train windows with the original protocol
(peer_training.py), then predicts the test windows, and reports the process's peak resident
memory after each stage (`ru_maxrss`, which only grows: the predict figure is the run's peak).

  /work/peer-venv/bin/python benchmarks/peers/hf_long_documents.py --windows=W.npz \\
    --batch_size=16 --autocast=bfloat16 --max_steps=3 --max_seq_length=512

Prints one JSON line: train_peak_rss_mb, predict_peak_rss_mb, peak_rss_mb, the step counts
and times.
"""
import argparse
import resource

import peer_training  # first: sets offline mode before transformers loads

import numpy as np
import torch
from transformers import BertForSequenceClassification


def peak_mb():
    """The process's peak resident memory so far, MB (Linux reports ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def split(windows, name):
    """dict of int64 tensors [windows, T] for `name` ("train" or "test") of the .npz file."""
    return {key: torch.from_numpy(windows[f"{name}_{key}"].astype(np.int64))
            for key in ("input_ids", "attention_mask", "token_type_ids", "labels")
            if f"{name}_{key}" in windows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    peer_training.add_common_flags(parser, learning_rate=5e-5,
                                   default_data_dir=peer_training.SHARED_DATA / "hyperpartisan")
    parser.add_argument("--windows", required=True, help="The .npz file of the windows.")
    parser.add_argument("--predict_batch_size", type=int, default=32)
    args = parser.parse_args()
    peer_training.start(args)

    windows = np.load(args.windows)
    model = peer_training.load_model(BertForSequenceClassification,
                                     peer_training.model_dir(args.model_dir), num_labels=2)
    train = split(windows, "train")
    num_steps = peer_training.num_train_steps(len(train["labels"]), args)
    result = {"task": "hyperpartisan windows", "seed": args.seed}
    result.update(peer_training.train(model, train, args, num_steps))
    result["train_peak_rss_mb"] = peak_mb()
    test = split(windows, "test")
    test.pop("labels", None)
    logits = peer_training.predict_in_batches(model, test, args.predict_batch_size)
    result.update(predict_windows=len(logits), predict_peak_rss_mb=peak_mb())
    peer_training.finish(result, args.output)


if __name__ == "__main__":
    main()
