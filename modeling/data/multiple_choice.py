"""Multiple-choice data: the SWAG CSV files and their four `[CLS] context [SEP] ending [SEP]`
sequences per example, as the BERT paper's SWAG setup (a vector scoring each choice's pooled
output, softmax over the four).

No TensorFlow is imported here.
"""
import csv
import dataclasses

from modeling.data import records, text
from modeling.runtime import files

NUM_CHOICES = 4
LABELS = tuple(str(index) for index in range(NUM_CHOICES))


class PaddingInputExample:
    """A fake example that pads the last eval/predict batch (TPUs need fixed batches); its
    features are all zeros and `is_real_example` is 0, so metrics and outputs skip it."""


@dataclasses.dataclass
class SwagExample:
    """One question: `context` is `sent1`; each ending is `sent2 + " " + endingN`, so that
    `[CLS] context [SEP] ending [SEP]` reads as the whole candidate sentence. `label` is the
    index (int) of the right ending, or None for test sets."""
    example_id: str
    context: str
    endings: list
    label: int = None


@dataclasses.dataclass
class MultipleChoiceFeatures:
    """`input_ids`, `input_mask`, `segment_ids`: int lists of shape [NUM_CHOICES, T]."""
    input_ids: list
    input_mask: list
    segment_ids: list
    label: int
    is_real_example: bool = True


def read_swag(path, has_labels):
    """Reads a SWAG CSV (comma-separated, quoted, with a header; a UTF-8 BOM tolerated).

    Columns are found by name, so the released layout (`,video-id,fold-ind,startphrase,sent1,
    sent2,gold-source,ending0,ending1,ending2,ending3,label`) and any other holding `sent1`,
    `sent2`, `ending0`..`ending3` (and `label` when `has_labels`) both read. The id is the
    unnamed first column (the released files' index) if there is one, else the line number.

    Returns:
      A list of `SwagExample`s, `label` None unless `has_labels`.

    Raises:
      ValueError: naming file:line, for a missing column, a row whose field count differs from
        the header's, or a label outside 0..3; naming both lines, for an id used twice
        (test_results.tsv is keyed by id).
    """
    csv.field_size_limit(text.FIELD_SIZE_LIMIT)
    with open(path, encoding="utf-8-sig", newline="") as reader:
        rows = csv.reader(reader)
        header = next(rows, None)
        if header is None:
            raise ValueError(f"{path}:1: empty file; expected a header")
        required = ["sent1", "sent2"] + [f"ending{i}" for i in range(NUM_CHOICES)]
        required += ["label"] if has_labels else []
        missing = [name for name in required if name not in header]
        if missing:
            raise ValueError(f"{path}:1: missing column(s) {missing}; header is {header}")
        column = {name: header.index(name) for name in required}
        has_index = header[0] == ""
        examples, ids, line = [], [], rows.line_num
        for row in rows:
            number, line = line + 1, rows.line_num  # a quoted field may span lines
            if not row:
                continue
            if len(row) != len(header):
                raise ValueError(f"{path}:{number}: expected {len(header)} comma-separated "
                                 f"fields as in the header, found {len(row)}")
            label = None
            if has_labels:
                label = row[column["label"]].strip()
                if label not in LABELS:
                    raise ValueError(f"{path}:{number}: label {label!r} is not one of "
                                     f"{list(LABELS)}")
                label = int(label)
            sent2 = row[column["sent2"]]
            endings = [f"{sent2} {row[column[f'ending{i}']]}" for i in range(NUM_CHOICES)]
            example_id = row[0] if has_index else str(number)
            examples.append(SwagExample(example_id, row[column["sent1"]], endings, label))
            ids.append((example_id, f"line {number}"))
    text.check_unique_ids(path, ids)
    return examples


def convert_example(example, max_seq_length, tokenizer):
    """Packs each ending as `[CLS] context [SEP] ending [SEP]`, segment 0 then 1, zero-padded.

    Each pair is truncated to `max_seq_length - 3` tokens as the original's
    `_truncate_seq_pair`: pop from the end of the longer side (the ending on a tie). A test
    example (label None) gets label 0; a `PaddingInputExample` becomes all zeros with
    `is_real_example` False.

    Returns:
      `MultipleChoiceFeatures` with [NUM_CHOICES, max_seq_length] int lists.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length {max_seq_length} leaves no room for "
                         f"[CLS] and two [SEP]s")
    if isinstance(example, PaddingInputExample):
        zeros = [[0] * max_seq_length for _ in range(NUM_CHOICES)]
        return MultipleChoiceFeatures(zeros, [list(z) for z in zeros], [list(z) for z in zeros],
                                      0, is_real_example=False)
    if len(example.endings) != NUM_CHOICES:
        raise ValueError(f"example {example.example_id}: {len(example.endings)} endings, "
                         f"expected {NUM_CHOICES}")
    context = tokenizer.tokenize(example.context)
    features = MultipleChoiceFeatures([], [], [], 0 if example.label is None else example.label)
    for ending in example.endings:
        tokens_a, tokens_b = list(context), tokenizer.tokenize(ending)
        text.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
        tokens, segment_ids = text.pack(tokens_a, tokens_b)
        input_ids, input_mask = text.padded(tokenizer.convert_tokens_to_ids(tokens),
                                            max_seq_length)
        features.input_ids.append(input_ids)
        features.input_mask.append(input_mask)
        features.segment_ids.append(text.padded(segment_ids, max_seq_length)[0])
    return features


# One example: `write_features` writes it, `modeling.tasks.multiple_choice` reads it.
RECORD_SCHEMA = records.Schema(
    input_ids=records.int64s(NUM_CHOICES, "max_seq_length"),
    input_mask=records.int64s(NUM_CHOICES, "max_seq_length"),
    segment_ids=records.int64s(NUM_CHOICES, "max_seq_length"),
    label_ids=records.int64s(1),
    is_real_example=records.int64s(1))


def write_features(examples, max_seq_length, tokenizer, path):
    """Writes the examples' features as TFRecords of `tf.train.Example`s (`RECORD_SCHEMA`),
    atomically.

    Each record holds, all int64:
      input_ids, input_mask, segment_ids: the [NUM_CHOICES, T] arrays flattened row-major
        (choice 0's T values first), as a [NUM_CHOICES, T] feature reads them.
      label_ids: [1], the right ending's index (0 for test and padding examples).
      is_real_example: [1], 0 for a `PaddingInputExample`.

    Returns:
      The number of records written (int).
    """
    varints = records.VarintTable(max(len(tokenizer.vocab), max_seq_length, NUM_CHOICES))
    encoder = RECORD_SCHEMA.encoder(max_seq_length=max_seq_length)
    with files.atomic_write(path, "wb") as writer:
        for example in examples:
            features = convert_example(example, max_seq_length, tokenizer)
            values = {name: varints.encode([value for row in getattr(features, name)
                                            for value in row])
                      for name in ("input_ids", "input_mask", "segment_ids")}
            values.update(label_ids=varints.encode([features.label]),
                          is_real_example=varints.encode([int(features.is_real_example)]))
            writer.write(records.frame(encoder.serialize(values)))
    return len(examples)


def write_predictions(examples, probabilities, path):
    """Writes one line per example, atomically: its id, then its NUM_CHOICES probabilities,
    tab-separated, no header (the original's test_results.tsv with the id in front).

    Args:
      examples: the real `SwagExample`s, in the order of `probabilities`.
      probabilities: float [len(examples), NUM_CHOICES], a numpy array or nested lists.
    """
    if len(examples) != len(probabilities):
        raise ValueError(f"{len(examples)} examples but {len(probabilities)} rows of "
                         f"probabilities")
    for example, row in zip(examples, probabilities):
        if len(row) != NUM_CHOICES:
            raise ValueError(f"example {example.example_id}: {len(row)} probabilities, "
                             f"expected {NUM_CHOICES}")
    with files.atomic_write(path) as writer:
        for example, row in zip(examples, probabilities):
            writer.write("\t".join([example.example_id] + [str(value) for value in row]) + "\n")
