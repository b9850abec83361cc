"""Peer for the MRPC fine-tuning benchmark (issue 16): Hugging Face transformers on PyTorch,
`BertForSequenceClassification` from all-MiniLM-L6-v2, on the real GLUE MRPC files, with the
original BERT protocol (see peer_training.py): lr 2e-5, 3 epochs, batch 32, pairs cut to 128
word pieces, float32, 2 threads; batches padded as --batching says (by default the peer's
fastest: each to its longest pair, in the Trainer's group_by_length order). Runs in its own
venv (README.md beside this file):

  /work/peer-venv/bin/python benchmarks/peers/hf_mrpc.py --seed=1 --output=/tmp/mrpc_1.json

Prints one JSON line: task, seed, accuracy and F1 of class 1 on dev (fractions; null with
--max_steps), train_examples_per_second, train_seconds, wall_seconds, peak_rss_mb, and the
step counts and median step time.
"""
import argparse
import os

import peer_training  # first: sets offline mode before transformers loads

import torch
from transformers import AutoTokenizer, BertForSequenceClassification

# The GLUE-downloader MRPC files: a header naming the columns, a UTF-8 BOM before it.
_LABEL, _FIRST, _SECOND = "Quality", "#1 String", "#2 String"


def read_mrpc(path, limit=0):
    """Reads an MRPC train or dev TSV.

    Args:
      path: str, the file.
      limit: int, keep only the first `limit` pairs (a fixed subset); 0 keeps all.

    Returns:
      (first sentences, second sentences, labels): lists of str, str, int.

    Raises:
      ValueError: naming file:line, for a row of another column count than the header's or a
        label other than 0 or 1.
    """
    # Split on tabs only: the sentences hold unescaped quotes, which csv would interpret.
    with open(path, encoding="utf-8-sig") as reader:
        rows = [line.rstrip("\r\n").split("\t") for line in reader]
    header = rows[0]
    label, first, second = (header.index(name) for name in (_LABEL, _FIRST, _SECOND))
    firsts, seconds, labels = [], [], []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header) or row[label] not in ("0", "1"):
            raise ValueError(f"{path}:{number}: expected {len(header)} tab-separated columns "
                             f"with {_LABEL} 0 or 1, found {row!r}")
        firsts.append(row[first])
        seconds.append(row[second])
        labels.append(int(row[label]))
    return (firsts[:limit], seconds[:limit], labels[:limit]) if limit else (firsts, seconds,
                                                                            labels)


def encode(tokenizer, firsts, seconds, labels, max_seq_length):
    """`[CLS] A [SEP] B [SEP]` pairs, cut longest-first to `max_seq_length` and padded to it:
    dict of int64 tensors [pairs, max_seq_length] (and `labels` [pairs]). Training cuts each
    batch to its longest pair unless --batching=padded."""
    features = tokenizer(firsts, seconds, truncation="longest_first", max_length=max_seq_length,
                         padding="max_length", return_tensors="pt")
    features = dict(features)
    features["labels"] = torch.tensor(labels)
    return features


def accuracy_and_f1(predicted, labels):
    """Accuracy and F1 of class 1 (floats) of int tensors [examples]."""
    true_positives = int(((predicted == 1) & (labels == 1)).sum())
    predicted_positives, gold_positives = int((predicted == 1).sum()), int((labels == 1).sum())
    f1 = (2 * true_positives / (predicted_positives + gold_positives)
          if predicted_positives + gold_positives else 0.0)
    return float((predicted == labels).float().mean()), f1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    peer_training.add_common_flags(parser, learning_rate=2e-5,
                                   default_data_dir=peer_training.SHARED_DATA / "glue" / "MRPC")
    parser.add_argument("--max_train_examples", type=int, default=0,
                        help="Train on the first N pairs of train.tsv only; 0: all 3668.")
    args = parser.parse_args()
    peer_training.start(args)

    directory = peer_training.model_dir(args.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = peer_training.load_model(BertForSequenceClassification, directory, num_labels=2)
    train = encode(tokenizer, *read_mrpc(os.path.join(args.data_dir, "train.tsv"),
                                         args.max_train_examples), args.max_seq_length)
    num_steps = peer_training.num_train_steps(len(train["labels"]), args)
    result = {"task": "mrpc", "seed": args.seed, "accuracy": None, "f1": None}
    result.update(peer_training.train(model, train, args, num_steps))

    if not args.max_steps:
        dev = encode(tokenizer, *read_mrpc(os.path.join(args.data_dir, "dev.tsv")),
                     args.max_seq_length)
        labels = dev.pop("labels")
        logits = peer_training.predict_in_batches(model, dev, args.batch_size)
        accuracy, f1 = accuracy_and_f1(logits.argmax(-1), labels)
        result.update(accuracy=round(accuracy, 4), f1=round(f1, 4), dev_examples=len(labels))
    peer_training.finish(result, args.output)


if __name__ == "__main__":
    main()
