"""Sentence(-pair) classification data: the GLUE and XNLI files as the original
`run_classifier.py` reads them, and its feature conversion; the Hyperpartisan articles
(read by `hyperpartisan`); single texts of any length read as windows (`document_features`).

No TensorFlow is imported here (nor by the modules it uses).
"""
import dataclasses
import os

from modeling.data import hyperpartisan, records, text, windows
from modeling.runtime import files


@dataclasses.dataclass
class InputExample:
    """One example: `label` is a class name, a float score (STS-B), or None for test sets;
    `source` is where it was read ("path:line"), for error messages."""
    guid: str
    text_a: str
    text_b: str = None
    label: object = None
    source: str = None


class PaddingInputExample:
    """A fake example that pads the last eval/predict batch (TPUs need fixed batches); its
    features are all zeros and `is_real_example` is 0, so metrics and outputs skip it."""


@dataclasses.dataclass
class InputFeatures:
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: object  # int class index, or float for regression
    is_real_example: bool = True


def _column(index):
    """A column index as a user counts: "column 2", or "the last column"."""
    return "the last column" if index == -1 else f"column {index + 1}"


class DataProcessor:
    """Reads one task's train/dev/test files into `InputExample`s.

    Subclasses set `name`, `labels` (None for regression), the file names, whether the files
    have a header, `columns` / `test_columns`: the (text_a, text_b, label) column indexes, and
    `column_names`: the names the header of the task's GLUE file gives those columns (test
    files name their text columns alike). A header that names them otherwise is another
    task's file, refused before any row is read.
    """
    name = None
    labels = None
    files = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    header = True
    columns = test_columns = column_names = None

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def is_pair(self):
        """Whether examples have a second segment (`text_b`)."""
        return self.columns[1] is not None

    def get_labels(self):
        return list(self.labels or [])

    def get_train_examples(self, data_dir):
        return self.read(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self.read(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self.read(data_dir, "test")

    def has_header(self, split):
        return self.header

    def read(self, data_dir, split):
        path = os.path.join(data_dir, self.files[split])
        files.check_input(path, "--data_dir", data_dir)
        rows = text.read_tsv(path)
        if self.has_header(split) and rows:
            self.check_header(path, rows[0][1], split)
            rows = rows[1:]
        elif rows:
            self.check_first_row(path, *rows[0])
        return [self.example(path, number, row, split) for number, row in rows]

    def check_first_row(self, path, number, row):
        """Where a task's file has no header, refuses a first row unlike the task's rows (the
        tasks with headers are told apart by them); nothing to check by default."""

    def check_header(self, path, header, split, columns=None, names=None):
        """Refuses a header that does not name the columns read as the task's files do.

        Raises:
          ValueError: naming the file, line 1, the task, the names expected and the header.
        """
        columns = columns or (self.test_columns if split == "test" else self.columns)
        expected = [(index, name) for index, name in zip(columns, names or self.column_names)
                    if index is not None and name is not None]
        found = [header[index].strip().lower() if -len(header) <= index < len(header) else None
                 for index, _ in expected]
        if found != [name.lower() for _, name in expected]:
            names = ", ".join(f"{_column(index)} {name!r}" for index, name in expected)
            line = "\t".join(header)[:120]
            raise ValueError(f"{path}:1: does not look like {self.name}'s "
                             f"{os.path.basename(path)}: its header names {names}; this "
                             f"one reads {line!r}")

    def example(self, path, number, row, split, columns=None):
        """Builds the example of one row; errors name the file and line."""
        columns = columns or (self.test_columns if split == "test" else self.columns)
        indexes = [index for index in columns if index is not None]
        # A label counted from the end (-1) sits after the text columns.
        needed = max(i for i in indexes if i >= 0) + 1 + any(i < 0 for i in indexes)
        if len(row) < needed:
            raise ValueError(f"{path}:{number}: expected at least {needed} tab-separated "
                             f"columns, found {len(row)}")
        text_a, text_b, label = (None if index is None else row[index] for index in columns)
        if split == "test":
            label = None
        elif self.is_regression:
            try:
                label = float(label)
            except ValueError:
                raise ValueError(f"{path}:{number}: score {label!r} is not a number") from None
        elif label not in self.labels:
            raise ValueError(f"{path}:{number}: unknown label {label!r}; "
                             f"expected one of {self.labels}")
        return InputExample(f"{split}-{number}", text_a, text_b, label, f"{path}:{number}")


class ColaProcessor(DataProcessor):
    name = "CoLA"
    labels = ["0", "1"]
    columns, test_columns = (3, None, 1), (1, None, None)
    column_names = ("sentence", None, None)  # the test file's header; train and dev have none

    def has_header(self, split):
        return split == "test"

    def check_first_row(self, path, number, row):
        """CoLA's train and dev rows are its source, the label, the original's judgment mark
        (blank, or `*`, `?`, `??`) and the sentence: another task's file (its header, or a
        row of its own) has other columns there.

        Raises:
          ValueError: naming the file and line, what CoLA's rows hold and what this one reads.
        """
        if len(row) != 4 or row[1] not in self.labels or set(row[2]) - set("*?# "):
            line = "\t".join(row)[:120]
            raise ValueError(f"{path}:{number}: does not look like CoLA's "
                             f"{os.path.basename(path)}: its rows have 4 tab-separated columns, "
                             f"the label 0 or 1 in column 2 and blank or the original's mark "
                             f"(*, ?) in column 3; this one reads {line!r}")


class MnliProcessor(DataProcessor):
    """Matched dev/test by default; `MnliMismatchedProcessor` reads the mismatched ones."""
    name = "MNLI"
    labels = ["contradiction", "entailment", "neutral"]
    files = {"train": "train.tsv", "dev": "dev_matched.tsv", "test": "test_matched.tsv"}
    columns, test_columns = (8, 9, -1), (8, 9, None)
    column_names = ("sentence1", "sentence2", "gold_label")


class MnliMismatchedProcessor(MnliProcessor):
    files = {"train": "train.tsv", "dev": "dev_mismatched.tsv", "test": "test_mismatched.tsv"}


class MrpcProcessor(DataProcessor):
    name = "MRPC"
    labels = ["0", "1"]
    columns, test_columns = (3, 4, 0), (3, 4, None)
    column_names = ("#1 String", "#2 String", "Quality")


class QnliProcessor(DataProcessor):
    name = "QNLI"
    labels = ["entailment", "not_entailment"]
    columns, test_columns = (1, 2, -1), (1, 2, None)
    column_names = ("question", "sentence", "label")


class QqpProcessor(DataProcessor):
    name = "QQP"
    labels = ["0", "1"]
    columns, test_columns = (3, 4, 5), (1, 2, None)
    column_names = ("question1", "question2", "is_duplicate")


class RteProcessor(DataProcessor):
    name = "RTE"
    labels = ["entailment", "not_entailment"]
    columns, test_columns = (1, 2, -1), (1, 2, None)
    column_names = ("sentence1", "sentence2", "label")


class Sst2Processor(DataProcessor):
    name = "SST-2"
    labels = ["0", "1"]
    columns, test_columns = (0, None, 1), (1, None, None)
    column_names = ("sentence", None, "label")


class StsbProcessor(DataProcessor):
    name = "STS-B"
    labels = None  # regression: the score in [0, 5]
    columns, test_columns = (7, 8, -1), (7, 8, None)
    column_names = ("sentence1", "sentence2", "score")


class WnliProcessor(DataProcessor):
    name = "WNLI"
    labels = ["0", "1"]
    columns, test_columns = (1, 2, -1), (1, 2, None)
    column_names = ("sentence1", "sentence2", "label")


class XnliProcessor(DataProcessor):
    """The original's layout: XNLI-1.0/xnli.{dev,test}.tsv (all languages, column 0 the language)
    and multinli/multinli.train.<language>.tsv; `language` as the original's default, zh."""
    name = "XNLI"
    labels = ["contradiction", "entailment", "neutral"]
    files = {"train": None, "dev": "xnli.dev.tsv", "test": "xnli.test.tsv"}
    columns = test_columns = (6, 7, 1)
    column_names = ("sentence1", "sentence2", "gold_label")
    train_columns, train_column_names = (0, 1, 2), ("premise", "hypo", "label")

    def __init__(self, language="zh"):
        self.language = language

    def read(self, data_dir, split):
        if split == "train":
            path = os.path.join(data_dir, "multinli", f"multinli.train.{self.language}.tsv")
            files.check_input(path, "--data_dir", data_dir)
            rows = text.read_tsv(path)
            if rows:
                self.check_header(path, rows[0][1], split, self.train_columns,
                                  self.train_column_names)
            examples = []
            for number, row in rows[1:]:
                # The translated MultiNLI says "contradictory" where XNLI says "contradiction".
                row = ["contradiction" if field == "contradictory" and index == 2 else field
                       for index, field in enumerate(row)]
                examples.append(self.example(path, number, row, "train",
                                             columns=self.train_columns))
            return examples
        path = os.path.join(data_dir, "XNLI-1.0", self.files[split])
        files.check_input(path, "--data_dir", data_dir)
        rows = text.read_tsv(path)
        if rows:
            self.check_header(path, rows[0][1], split)
        return [self.example(path, number, row, "dev")
                for number, row in rows[1:] if row and row[0] == self.language]


class HyperpartisanProcessor(DataProcessor):
    """SemEval-2019 Task 4, Hyperpartisan News Detection, by article: the articles and
    ground-truth XML files of `data_dir` (see `hyperpartisan`), split 80/10/10 by
    `hyperpartisan.split_of`. An example's text is its title then its text; the training
    split comes in a fixed shuffled order (the files are in id order, and the labels cluster by
    id), dev and test in id order, with the article ids as guids."""
    labels = ["false", "true"]
    is_pair = False

    def read(self, data_dir, split):
        examples = self.articles(data_dir)[split]
        if split == "test":
            examples = [dataclasses.replace(example, label=None) for example in examples]
        return examples

    def articles(self, data_dir):
        """{split: labelled examples} of every split, test included."""
        paths = [hyperpartisan.find(data_dir, pattern)
                 for pattern in (hyperpartisan.ARTICLES, hyperpartisan.TRUTH)]
        articles = hyperpartisan.read_articles(paths[0])
        truth = hyperpartisan.read_truth(paths[1])
        splits = {"train": [], "dev": [], "test": []}
        for article in articles:
            if article.id not in truth:
                raise ValueError(f"{paths[1]}: no hyperpartisan label for article {article.id} "
                                 f"({article.source})")
            splits[hyperpartisan.split_of(article.id)].append(InputExample(
                article.id, article.text, label=truth[article.id], source=article.source))
        splits["train"].sort(key=lambda example: hyperpartisan.shuffle_key(example.guid))
        return splits


PROCESSORS = {
    "cola": ColaProcessor, "mnli": MnliProcessor, "mnli-mm": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor, "qnli": QnliProcessor, "qqp": QqpProcessor, "rte": RteProcessor,
    "sst-2": Sst2Processor, "sts-b": StsbProcessor, "wnli": WnliProcessor, "xnli": XnliProcessor,
    "hyperpartisan": HyperpartisanProcessor,
}


def get_processor(task_name):
    """The processor of a task, by case-insensitive name; an unknown one lists the known."""
    name = task_name.lower()
    if name not in PROCESSORS:
        raise ValueError(f"Task not found: {task_name!r}; known tasks: {sorted(PROCESSORS)}")
    return PROCESSORS[name]()


def convert_single_example(example, label_list, max_seq_length, tokenizer):
    """The original's `convert_single_example`: `[CLS] a [SEP] (b [SEP])`, the longer segment
    popped first, padded with 0; a `PaddingInputExample` becomes all zeros.

    Args:
      label_list: the class names, or empty for regression (the label is then the float).
    """
    if isinstance(example, PaddingInputExample):
        zeros = [0] * max_seq_length
        return InputFeatures(zeros, list(zeros), list(zeros), 0.0 if not label_list else 0,
                             is_real_example=False)
    packed = text.convert_examples_to_features(
        [text.InputExample(0, example.text_a, example.text_b)], max_seq_length,
        tokenizer)[0]
    return InputFeatures(packed.input_ids, packed.input_mask, packed.input_type_ids,
                         _label_id(example, label_list))


def _label_id(example, label_list):
    if example.label is None:  # a test example: the original writes label 0
        return 0 if label_list else 0.0
    return label_list.index(example.label) if label_list else float(example.label)


def document_features(example, label_list, max_seq_length, tokenizer, doc_stride=None,
                      truncation="head"):
    """The features of a single text of any length: `[CLS] window [SEP]` for each window of
    max_seq_length - 2 pieces, each with the document's label.

    Args:
      doc_stride: pieces between window starts (`windows.spans`), or None for one window, cut
        as `truncation` says: "head" (its first pieces, as the original) or "head_tail"
        (`windows.head_tail`).

    Returns:
      list of `InputFeatures`, one per window, in order.

    Raises:
      ValueError: with windows, the text has no word pieces (no window to read); names the
        example's `source`.
    """
    tokens = tokenizer.tokenize(example.text_a)
    window = max_seq_length - 2
    if doc_stride is None:
        head, tail = (windows.head_tail(len(tokens), window) if truncation == "head_tail"
                      else (min(len(tokens), window), 0))
        pieces = [tokens[:head] + tokens[len(tokens) - tail:]]
    elif not tokens:
        raise ValueError(f"{example.source or example.guid}: the document has no word pieces, "
                         f"so no window to classify")
    else:
        pieces = [tokens[span.start:span.start + span.length]
                  for span in windows.spans(len(tokens), window, doc_stride)]
    label_id = _label_id(example, label_list)
    features = []
    for piece in pieces:
        tokens, _ = text.pack(piece)
        ids, mask = text.padded(tokenizer.convert_tokens_to_ids(tokens), max_seq_length)
        features.append(InputFeatures(ids, mask, [0] * max_seq_length, label_id))
    return features


def record_schema(regression):
    """The original `file_based_convert_examples_to_features` record: `write_features` writes
    it, `modeling.tasks.classifier` reads it. `label_ids` is a float for regression."""
    return records.Schema(
        input_ids=records.int64s("max_seq_length"),
        input_mask=records.int64s("max_seq_length"),
        segment_ids=records.int64s("max_seq_length"),
        label_ids=records.floats() if regression else records.int64s(),
        is_real_example=records.int64s())


def write_features(examples, label_list, max_seq_length, tokenizer, output_file):
    """Writes the examples' features as TFRecords, atomically. Returns the count.

    Args:
      label_list: the class names, or empty for regression.
    """
    write_records((convert_single_example(example, label_list, max_seq_length, tokenizer)
                   for example in examples), not label_list, max_seq_length,
                  len(tokenizer.vocab), output_file)
    return len(examples)


def write_records(all_features, regression, max_seq_length, vocab_size, output_file):
    """Writes `InputFeatures` (an iterable) as TFRecords, atomically."""
    varints = records.VarintTable(max(vocab_size, max_seq_length, 2))
    encoder = record_schema(regression).encoder(max_seq_length=max_seq_length)
    with files.atomic_write(output_file, "wb") as writer:
        for features in all_features:
            writer.write(records.frame(encoder.serialize({
                "input_ids": varints.encode(features.input_ids),
                "input_mask": varints.encode(features.input_mask),
                "segment_ids": varints.encode(features.segment_ids),
                "label_ids": ([features.label_id] if regression
                              else varints.encode([features.label_id])),
                "is_real_example": varints.encode([int(features.is_real_example)]),
            })))
