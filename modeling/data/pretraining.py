"""Masked-LM / next-sentence training instances, exactly as the original
`create_pretraining_data.py` makes them for the same seed.

Exactness rests on making the same `random.Random` calls in the same order as the original
(see ../shared/refs/README.md, pitfall 3). Speed comes from working on token ids instead of
strings, truncating by moving indices instead of deleting list heads, and serializing each
Example straight to bytes (modeling/data/records.py). No TensorFlow is imported here.
"""
import dataclasses
import itertools
import random

from modeling.data import records



@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's flags that shape an instance."""
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    # Of the positions chosen for prediction, the percentages replaced by [MASK], kept as they
    # are and replaced by a random token: the paper's Table 8 rows (80/10/10 the original's).
    mask_proportions: tuple = (80, 10, 10)
    # A key of OBJECTIVES: the original's records, or those of an ablation of the paper.
    objective: str = "mlm_nsp"

    def __post_init__(self):
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP] with a "
                             f"and b of 2 tokens to choose from), got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be positive, "
                             f"got {self.max_predictions_per_seq}")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        proportions = self.mask_proportions
        if (len(proportions) != 3 or any(p < 0 for p in proportions)
                or abs(sum(proportions) - 100) > 1e-9):
            raise ValueError(f"--mask_proportions are three percentages (MASK, SAME, RND) "
                             f"summing to 100, got {','.join(f'{p:g}' for p in proportions)}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--pretraining_objective must be one of {sorted(OBJECTIVES)}, "
                             f"got {self.objective!r}")
        if self.objective == "ltr" and (self.do_whole_word_mask
                                        or tuple(proportions) != (80, 10, 10)):
            raise ValueError("--pretraining_objective=ltr predicts every next token and masks "
                             "none: --do_whole_word_mask and --mask_proportions do not apply")


@dataclasses.dataclass
class Instance:
    """One training instance, in ids; `input_ids` are unpadded and already masked."""
    input_ids: list
    segment_ids: list
    masked_lm_positions: list
    masked_lm_ids: list
    is_random_next: bool


def read_documents(lines, tokenizer):
    """Groups tokenized lines into documents, as the original does.

    A line that is empty after `strip()` ends the document; a line that tokenizes to nothing is
    skipped without ending it; documents left empty are dropped.

    Args:
      lines: iterable of str, without line terminators.
      tokenizer: a `FullTokenizer`.

    Returns:
      list of documents, each a list of segments, each a non-empty list of int ids.
    """
    documents = [[]]
    for line in lines:
        line = line.strip()
        if not line:
            documents.append([])
            continue
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
        if ids:
            documents[-1].append(ids)
    return [document for document in documents if document]


class InstanceMaker:
    """Makes the instances of one document at a time, drawing from one `random.Random`."""

    def __init__(self, vocab, options, rng):
        """Args: vocab, token -> id in file order (no duplicates); options; rng."""
        self.options = options
        self.rng = rng
        self.vocab_size = len(vocab)
        self.cls_id, self.sep_id, self.mask_id = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
        self.is_continuation = [token.startswith("##") for token in vocab]
        # bit_lengths[i] is (i + 1).bit_length(): what `_shuffle` draws to pick j <= i.
        self.bit_lengths = [n.bit_length() for n in range(1, options.max_seq_length + 1)]
        # The original's two draws per position: the first below `mask_below` makes it [MASK];
        # otherwise the second below `keep_below` keeps it, else it becomes a random token.
        # 80/10/10 gives the original's thresholds, 0.8 and 0.5, to the bit.
        mask, same, random_token = options.mask_proportions
        self.mask_below = mask / 100
        self.keep_below = same / (same + random_token) if same + random_token else 1.0

    def _randint(self, low, high):
        # Exactly what random.Random.randint does (randrange -> _randbelow), without its
        # argument checking, which dominates the cost of the many small draws made here.
        return low + self.rng._randbelow(high - low + 1)

    def _shuffle(self, items):
        """Exactly `random.Random.shuffle`: the same `getrandbits` calls (the rejection
        sampling of `_randbelow`), inlined because this loop is the hottest of the whole run.
        Bit lengths come from a table: computing them took a fifth of the loop's time."""
        getrandbits, bits = self.rng.getrandbits, self.bit_lengths
        if len(items) > len(bits):
            bits = self.bit_lengths = [n.bit_length() for n in range(1, len(items) + 1)]
        for i in range(len(items) - 1, 0, -1):
            j = getrandbits(bits[i])  # j <= i, as randbelow(i + 1)
            while j > i:
                j = getrandbits(bits[i])
            items[i], items[j] = items[j], items[i]

    def from_document(self, documents, document_index):
        """The original `create_instances_from_document`, in ids.

        Returns:
          list of `Instance`.
        """
        rng, randint = self.rng, self._randint
        document = documents[document_index]
        max_num_tokens = self.options.max_seq_length - 3  # [CLS], [SEP], [SEP]
        # Mostly fill the whole sequence, sometimes a shorter one, so that fine-tuning on short
        # inputs is not out of distribution.
        target_seq_length = max_num_tokens
        if rng.random() < self.options.short_seq_prob:
            target_seq_length = randint(2, max_num_tokens)

        instances = []
        chunk, chunk_length = [], 0
        i = 0
        while i < len(document):
            chunk.append(document[i])
            chunk_length += len(document[i])
            if i == len(document) - 1 or chunk_length >= target_seq_length:
                tokens_a, tokens_b, is_random_next, unused = self._pair(
                    chunk, documents, document_index, target_seq_length)
                i -= unused
                tokens_a, tokens_b = self._truncate_pair(tokens_a, tokens_b, max_num_tokens)
                input_ids = [self.cls_id, *tokens_a, self.sep_id, *tokens_b, self.sep_id]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                masked_ids, positions, labels = self._mask(input_ids)
                instances.append(Instance(masked_ids, segment_ids, positions, labels,
                                          is_random_next))
                chunk, chunk_length = [], 0
            i += 1
        return instances

    def _pair(self, chunk, documents, document_index, target_seq_length):
        """Segments A and B of one instance from a chunk of consecutive segments: B is the
        rest of the chunk, or half the time (always for a one-segment chunk) text from
        another document.

        Returns:
          (tokens_a, tokens_b, is_random_next, how many segments at the chunk's end are
          unused, to be read again for the next instance).
        """
        flatten = itertools.chain.from_iterable
        a_end = self._randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
        tokens_a = list(flatten(chunk[:a_end]))
        if len(chunk) == 1 or self.rng.random() < 0.5:
            tokens_b = self._random_next(documents, document_index,
                                         target_seq_length - len(tokens_a))
            return tokens_a, tokens_b, True, len(chunk) - a_end
        return tokens_a, list(flatten(chunk[a_end:])), False, 0

    def _random_next(self, documents, document_index, target_b_length):
        randint = self._randint
        # Ten tries at another document; a one-document corpus falls back to its own.
        for _ in range(10):
            random_index = randint(0, len(documents) - 1)
            if random_index != document_index:
                break
        random_document = documents[random_index]
        tokens_b = []
        for segment in random_document[randint(0, len(random_document) - 1):]:
            tokens_b.extend(segment)
            if len(tokens_b) >= target_b_length:
                break
        return tokens_b

    def _truncate_pair(self, tokens_a, tokens_b, max_num_tokens):
        """Trims the longer list, from the front or the back at random, until both fit."""
        a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
        random_draw = self.rng.random
        while (a_end - a_start) + (b_end - b_start) > max_num_tokens:
            trim_a = (a_end - a_start) > (b_end - b_start)
            front = random_draw() < 0.5
            if trim_a:
                a_start, a_end = (a_start + 1, a_end) if front else (a_start, a_end - 1)
            else:
                b_start, b_end = (b_start + 1, b_end) if front else (b_start, b_end - 1)
        return tokens_a[a_start:a_end], tokens_b[b_start:b_end]

    def _mask(self, input_ids):
        """The original `create_masked_lm_predictions`, in ids.

        Which positions are masked depends on the candidates' shuffle alone; the draws that
        decide each position's fate come after it, in the order the positions were chosen.

        Returns:
          (masked input ids, sorted positions, original ids at those positions).
        """
        options = self.options
        count = min(options.max_predictions_per_seq,
                    max(1, int(round(len(input_ids) * options.masked_lm_prob))))
        if options.do_whole_word_mask:
            positions = self._choose_words(input_ids, count)
        else:
            positions = self._choose_tokens(input_ids, count)
        output = input_ids[:]
        random_draw, mask_id = self.rng.random, self.mask_id
        mask_below, keep_below = self.mask_below, self.keep_below
        for index in positions:
            if random_draw() < mask_below:
                output[index] = mask_id
            elif random_draw() >= keep_below:  # else the original token stays
                output[index] = self._randint(0, self.vocab_size - 1)
        positions.sort()
        return output, positions, [input_ids[index] for index in positions]

    def _choose_tokens(self, input_ids, count):
        """The first `count` maskable positions after the original's shuffle of them: each
        candidate is one position, so the original skips none for overflowing the budget."""
        candidates = self._maskable_positions(input_ids)
        self._shuffle(candidates)
        del candidates[count:]
        return candidates

    def _maskable_positions(self, input_ids):
        """Every position but those of [CLS] and [SEP], in order."""
        cls_id, sep_id = self.cls_id, self.sep_id
        last = len(input_ids) - 1
        # The usual [CLS] A [SEP] B [SEP], with neither id inside A or B: ranges, found by
        # C-speed scans, instead of comparing every token in Python.
        if (input_ids[0] == cls_id and input_ids[last] == sep_id
                and input_ids.count(cls_id) == 1 and input_ids.count(sep_id) == 2):
            middle = input_ids.index(sep_id)
            return [*range(1, middle), *range(middle + 1, last)]
        return [index for index, token in enumerate(input_ids)
                if token != cls_id and token != sep_id]

    def _choose_words(self, input_ids, count):
        """Whole-word masking: the positions of the first shuffled words that fit in `count`.

        A word is a maskable token and the "##" pieces after it. Words never share a
        position, so the original's check for already covered positions never fires.
        """
        words = []
        is_continuation = self.is_continuation
        for index in self._maskable_positions(input_ids):
            if words and is_continuation[input_ids[index]]:
                words[-1].append(index)
            else:
                words.append([index])
        self._shuffle(words)
        positions = []
        for word in words:
            if len(positions) >= count:
                break
            # A whole word that would overflow the budget is skipped, not cut.
            if len(positions) + len(word) <= count:
                positions.extend(word)
        return positions


class ContiguousInstanceMaker(InstanceMaker):
    """Instances without next-sentence pairs, for the paper's "No NSP" model: A and B are
    always one run of contiguous text, cut at a segment boundary (inside the segment when
    the chunk is one segment); `is_random_next` is always False."""

    def _pair(self, chunk, documents, document_index, target_seq_length):
        if len(chunk) >= 2:
            a_end = self._randint(1, len(chunk) - 1)
            flatten = itertools.chain.from_iterable
            return list(flatten(chunk[:a_end])), list(flatten(chunk[a_end:])), False, 0
        tokens = chunk[0]
        cut = self._randint(1, len(tokens) - 1) if len(tokens) >= 2 else len(tokens)
        return tokens[:cut], tokens[cut:], False, 0


class LeftToRightInstanceMaker(ContiguousInstanceMaker):
    """The "No NSP" instances unmasked, for the paper's left-to-right model, which predicts
    every next token: `masked_lm_positions` and `masked_lm_ids` are empty."""

    def _mask(self, input_ids):
        return input_ids, [], []


def create_instances(documents, maker, dupe_factor, progress=None, convert=None):
    """All instances of a corpus, in the original's order: shuffle the documents, make
    `dupe_factor` passes over them (different masks each time), shuffle the instances.

    Args:
      documents: list of documents (shuffled in place).
      maker: an `InstanceMaker`, whose rng drives everything.
      dupe_factor: int.
      progress: optional callable, called with the number of new instances after each
        document.
      convert: optional callable applied to each instance as it is made, whose results are
        shuffled and returned instead. Serialized records hold a corpus in a fraction of the
        memory of `Instance`s, and leave the garbage collector no lists to scan (which,
        with every instance kept, took a sixth of the run's time).

    Returns:
      list of `Instance`, or of what `convert` returns.
    """
    maker.rng.shuffle(documents)
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            made = maker.from_document(documents, document_index)
            instances.extend(map(convert, made) if convert else made)
            if progress:
                progress(len(made))
    maker.rng.shuffle(instances)
    return instances


# One instance, as the original writes it: `ExampleEncoder` writes it,
# `modeling.tasks.pretraining` reads it.
RECORD_SCHEMA = records.Schema(
    input_ids=records.int64s("max_seq_length"),
    input_mask=records.int64s("max_seq_length"),
    segment_ids=records.int64s("max_seq_length"),
    masked_lm_positions=records.int64s("max_predictions_per_seq"),
    masked_lm_ids=records.int64s("max_predictions_per_seq"),
    masked_lm_weights=records.floats("max_predictions_per_seq"),
    next_sentence_labels=records.int64s(1))


# The paper's "No NSP" instances (`ContiguousInstanceMaker`): no next-sentence label.
MASKED_LM_RECORD_SCHEMA = records.Schema(**{
    name: feature for name, feature in RECORD_SCHEMA.features.items()
    if name != "next_sentence_labels"})

# Its left-to-right instances (`LeftToRightInstanceMaker`): the text alone, every next token
# a label.
LEFT_TO_RIGHT_RECORD_SCHEMA = records.Schema(
    input_ids=records.int64s("max_seq_length"),
    input_mask=records.int64s("max_seq_length"),
    segment_ids=records.int64s("max_seq_length"))


class ExampleEncoder:
    """Serializes instances as the original's `tf.train.Example`s (`RECORD_SCHEMA`), padded to
    fixed lengths."""
    SCHEMA = RECORD_SCHEMA

    def __init__(self, vocab_size, max_seq_length, max_predictions_per_seq):
        self.max_seq_length = max_seq_length
        self.max_predictions = max_predictions_per_seq
        self.varints = records.VarintTable(max(vocab_size, max_seq_length, 2))
        self.encoder = self.SCHEMA.encoder(max_seq_length=max_seq_length,
                                           max_predictions_per_seq=max_predictions_per_seq)

    def encode(self, instance):
        """Returns the serialized Example (bytes)."""
        return self.encoder.serialize(self._values(instance))

    def _values(self, instance):
        """Each feature's packed varints or floats (`RecordEncoder.serialize`)."""
        encode, encode_small = self.varints.encode, self.varints.encode_small
        length = len(instance.input_ids)
        if length > self.max_seq_length:
            raise ValueError(f"instance of {length} tokens exceeds max_seq_length "
                             f"{self.max_seq_length}")
        pad = self.max_seq_length - length
        predictions = len(instance.masked_lm_positions)
        pred_pad = self.max_predictions - predictions
        # Varints of 0 and 1 are the bytes 0 and 1: the padding and the mask are plain bytes.
        return {
            "input_ids": encode(instance.input_ids) + b"\0" * pad,
            "input_mask": b"\1" * length + b"\0" * pad,
            "segment_ids": encode_small(instance.segment_ids) + b"\0" * pad,
            "masked_lm_positions": encode_small(instance.masked_lm_positions) + b"\0" * pred_pad,
            "masked_lm_ids": encode(instance.masked_lm_ids) + b"\0" * pred_pad,
            "masked_lm_weights": [1.0] * predictions + [0.0] * pred_pad,
            "next_sentence_labels": b"\1" if instance.is_random_next else b"\0",
        }


class MaskedLMExampleEncoder(ExampleEncoder):
    """Serializes "No NSP" instances (`MASKED_LM_RECORD_SCHEMA`)."""
    SCHEMA = MASKED_LM_RECORD_SCHEMA
    DROPPED = ("next_sentence_labels",)

    def _values(self, instance):
        values = super()._values(instance)
        for name in self.DROPPED:
            del values[name]
        return values


class LeftToRightExampleEncoder(MaskedLMExampleEncoder):
    """Serializes left-to-right instances (`LEFT_TO_RIGHT_RECORD_SCHEMA`)."""
    SCHEMA = LEFT_TO_RIGHT_RECORD_SCHEMA
    DROPPED = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
               "next_sentence_labels")


@dataclasses.dataclass(frozen=True)
class Objective:
    """What one pre-training objective's records are: how instances are made and written."""
    maker: type
    encoder: type

    @property
    def schema(self):
        return self.encoder.SCHEMA


# --pretraining_objective: the original's masked LM and next sentence, and the paper's
# Table 5 ablations "No NSP" and "LTR & No NSP".
OBJECTIVES = {
    "mlm_nsp": Objective(InstanceMaker, ExampleEncoder),
    "mlm": Objective(ContiguousInstanceMaker, MaskedLMExampleEncoder),
    "ltr": Objective(LeftToRightInstanceMaker, LeftToRightExampleEncoder),
}


def shard_rng(random_seed, shard):
    """The rng of one shard: `Random(random_seed)` for the single, exact shard; otherwise one
    derived from the seed and the shard number (a str seed hashes with SHA-512: stable)."""
    return random.Random(random_seed if shard is None else f"{random_seed}/{shard}")
