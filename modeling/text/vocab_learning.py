"""Learns a WordPiece vocabulary with tensorflow-text's learner, laid out as Google's.

Words are split by this project's `BasicTokenizer` (the original's cleaning, lower-casing,
accent stripping and punctuation splitting) rather than tensorflow-text's, whose case folding
differs, so that the vocabulary fits the tokenizer that will use it.
"""
import collections

from modeling.text import tokenization

SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
UNUSED_BEFORE_UNK = 99  # Google's uncased layout: [PAD], [unused0..98], [UNK], ... [unused99..]


def count_words(lines, do_lower_case):
    """Counts the words `BasicTokenizer` makes of `lines` (an iterable of str)."""
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter()
    for line in lines:
        counts.update(basic.tokenize(line))
    return counts


def layout(learned, vocab_size, num_unused):
    """Google's layout: [PAD], some [unusedN], [UNK] [CLS] [SEP] [MASK], the other [unusedN]
    (slots to fine-tune new tokens into), then the learned pieces, without duplicates."""
    before = min(num_unused, UNUSED_BEFORE_UNK)
    vocab = (["[PAD]"] + [f"[unused{i}]" for i in range(before)] + list(SPECIAL_TOKENS)
             + [f"[unused{i}]" for i in range(before, num_unused)])
    seen = set(vocab)
    for token in learned:
        if token not in seen and len(vocab) < vocab_size:
            vocab.append(token)
            seen.add(token)
    return vocab


def learn_vocabulary(word_counts, vocab_size, num_unused, min_count, max_unique_chars):
    """Returns the vocabulary as a list of tokens, at most `vocab_size` long.

    Raises:
      ValueError: `vocab_size` leaves no room for learned pieces, or the corpus is empty.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib
    budget = vocab_size - 1 - len(SPECIAL_TOKENS) - num_unused
    if budget < 1:
        raise ValueError(f"vocab_size {vocab_size} leaves no room for learned tokens after "
                         f"[PAD], {len(SPECIAL_TOKENS)} special tokens and {num_unused} unused")
    if not word_counts:
        raise ValueError("the corpus has no words to learn a vocabulary from")
    learned = wordpiece_tokenizer_learner_lib.learn(
        word_counts, budget + 5, reserved_tokens=["[PAD]", *SPECIAL_TOKENS],
        lower_thresh=min_count, max_unique_chars=max_unique_chars)
    return layout(learned, vocab_size, num_unused)
