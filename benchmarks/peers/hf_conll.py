"""Peer for the CoNLL-2003 NER benchmark (issue 16): Hugging Face transformers on PyTorch,
`BertForTokenClassification` from all-MiniLM-L6-v2, on the real CoNLL-2003 files, with the
original BERT protocol (see peer_training.py) and the paper's NER recipe (section 4.3): each
word is split into word pieces and only its first piece carries the word's tag (the others,
[CLS], [SEP] and padding get label -100: no loss, no prediction); no CRF. Sentences are cut
to 128 pieces (1 train and 3 dev sentences of the files staged in shared/: their cut-off words
are predicted O and still scored); training batches are padded as --batching says. lr defaults to 5e-5, run_ner.py's
default (the paper gives no NER value, only the 2e-5..5e-5 grid); 3 epochs, batch 32.

  /work/peer-venv/bin/python benchmarks/peers/hf_conll.py --seed=1 --output=/tmp/conll_1.json

Prints one JSON line: task, seed, dev entity precision, recall and F1 (fractions, conlleval's
counting; null with --max_steps), token_accuracy, train_examples_per_second (sentences),
train_seconds, wall_seconds, peak_rss_mb, and the step counts and median step time.
"""
import argparse
import os

import chunk_f1
import peer_training  # first of the ML imports: sets offline mode before transformers loads

import torch
from transformers import AutoTokenizer, BertForTokenClassification

_DOCSTART = "-DOCSTART-"
_IGNORED = -100  # transformers' cross-entropy ignore_index


def read_conll(path, limit=0):
    """Reads a CoNLL column file: `word ... tag` per line, a blank line between sentences,
    `-DOCSTART-` lines dropped (they also end a sentence).

    Args:
      path: str, the file.
      limit: int, keep only the first `limit` sentences, in file order (a fixed subset);
        0 keeps all.

    Returns:
      list of (words, tags) pairs of lists of str.
    """
    sentences, words, tags = [], [], []
    with open(path, encoding="utf-8") as reader:
        for line in reader:
            columns = line.split()
            if not columns or columns[0] == _DOCSTART:
                if words:
                    sentences.append((words, tags))
                    words, tags = [], []
                continue
            words.append(columns[0])
            tags.append(columns[-1])
    if words:
        sentences.append((words, tags))
    return sentences[:limit] if limit else sentences


def label_list(sentences):
    """"O" first, then the other tags of `sentences`, sorted (list of str)."""
    return ["O"] + sorted({tag for _, tags in sentences for tag in tags} - {"O"})


def encode(tokenizer, sentences, labels, max_seq_length):
    """Word pieces of each sentence's words, `[CLS] pieces [SEP]`, cut and padded to
    `max_seq_length`, with each word's tag id on its first piece.

    Returns:
      (features, first_pieces): features is a dict of int64 tensors [sentences,
      max_seq_length] (input_ids, token_type_ids, attention_mask, labels); first_pieces[i] is
      a list of (word index, position) pairs of sentence i's words that kept a first piece.

    Raises:
      ValueError: for a tag that is not in `labels`.
    """
    label_ids = {label: index for index, label in enumerate(labels)}
    encoding = tokenizer([words for words, _ in sentences], is_split_into_words=True,
                         truncation=True, max_length=max_seq_length, padding="max_length",
                         return_tensors="pt")
    features = dict(encoding)
    features["labels"] = torch.full_like(encoding["input_ids"], _IGNORED)
    first_pieces = []
    for index, (_, tags) in enumerate(sentences):
        firsts, previous = [], None
        for position, word in enumerate(encoding.word_ids(index)):
            if word is not None and word != previous:
                if tags[word] not in label_ids:
                    raise ValueError(f"Tag {tags[word]!r} of sentence {index} is not among "
                                     f"the training tags {labels}")
                features["labels"][index, position] = label_ids[tags[word]]
                firsts.append((word, position))
            previous = word
        first_pieces.append(firsts)
    return features, first_pieces


def predicted_tags(logits, sentences, first_pieces, labels):
    """One tag per word (list of lists of str) from logits [sentences, seq, labels]: the
    argmax at each word's first piece, O for a word cut off."""
    best = logits.argmax(-1)
    tags = []
    for index, (words, _) in enumerate(sentences):
        sentence_tags = ["O"] * len(words)
        for word, position in first_pieces[index]:
            sentence_tags[word] = labels[best[index, position]]
        tags.append(sentence_tags)
    return tags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    peer_training.add_common_flags(parser, learning_rate=5e-5,
                                   default_data_dir=peer_training.SHARED_DATA / "conll2003")
    parser.add_argument("--max_train_sentences", type=int, default=0,
                        help="Train on the first N sentences of train.txt only; 0: all 14041.")
    args = parser.parse_args()
    peer_training.start(args)

    train_sentences = read_conll(os.path.join(args.data_dir, "train.txt"),
                                 args.max_train_sentences)
    # From the full training file, so that a subset still knows every tag.
    labels = label_list(read_conll(os.path.join(args.data_dir, "train.txt")))
    directory = peer_training.model_dir(args.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    # A token classifier has no pooler: the checkpoint's is the one tensor left unused.
    model = peer_training.load_model(
        BertForTokenClassification, directory, len(labels),
        skipped=("pooler.",))
    train, _ = encode(tokenizer, train_sentences, labels, args.max_seq_length)
    num_steps = peer_training.num_train_steps(len(train["labels"]), args)
    result = {"task": "conll2003", "seed": args.seed, "precision": None, "recall": None,
              "f1": None, "token_accuracy": None}
    result.update(peer_training.train(model, train, args, num_steps))

    if not args.max_steps:
        dev_sentences = read_conll(os.path.join(args.data_dir, "valid.txt"))
        dev, first_pieces = encode(tokenizer, dev_sentences, labels, args.max_seq_length)
        dev.pop("labels")
        logits = peer_training.predict_in_batches(model, dev, args.batch_size)
        predicted = predicted_tags(logits, dev_sentences, first_pieces, labels)
        gold = [tags for _, tags in dev_sentences]
        scores = chunk_f1.score(gold, predicted)
        words = sum(len(tags) for tags in gold)
        right = sum(g == p for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps))
        result.update(precision=round(scores.precision, 4), recall=round(scores.recall, 4),
                      f1=round(scores.f1, 4), token_accuracy=round(right / words, 4),
                      dev_sentences=len(dev_sentences), dev_entities=scores.gold,
                      dev_words_cut_off=words - sum(len(f) for f in first_pieces))
    peer_training.finish(result, args.output)


if __name__ == "__main__":
    main()
