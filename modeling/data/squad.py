"""SQuAD data, as the original `run_squad.py` prepares it: the JSON files read into one
`SquadExample` per question, each example cut into overlapping windows of its context
(`InputFeatures`), and the features written as TFRecords.

A context longer than the model's sequence is seen through several windows ("doc spans") of
at most `max_seq_length - len(query) - 3` word pieces, each starting `doc_stride` pieces after
the previous one (`modeling.data.windows`). A token then appears in several windows;
`token_is_max_context` marks the one window where it has the most context on both sides, the
only one whose prediction for it counts.

No TensorFlow is imported here.
"""
import dataclasses

from absl import logging

from modeling.data import records, text, windows
from modeling.runtime import files
from modeling.text import tokenization

# The first feature's `unique_id`, as in the original; the model's outputs are matched back
# to features by this id.
_FIRST_UNIQUE_ID = 1000000000

def max_tokens_for_doc(max_seq_length, query_length):
    """How many context pieces a window holds: `[CLS] query [SEP] window [SEP]` fills
    `max_seq_length`. Plain arithmetic: the export applies it to tensors of query lengths."""
    return max_seq_length - query_length - 3


def doc_offset(query_length):
    """The position of a window's first context piece, after `[CLS] query [SEP]`."""
    return query_length + 2


def record_schema(is_training):
    """The original's record of one window: `FeatureWriter` writes it, `modeling.tasks.squad`
    reads it. The answer positions only when training."""
    features = {"unique_ids": records.int64s(),
                "input_ids": records.int64s("max_seq_length"),
                "input_mask": records.int64s("max_seq_length"),
                "segment_ids": records.int64s("max_seq_length")}
    if is_training:
        features.update(start_positions=records.int64s(), end_positions=records.int64s(),
                        is_impossible=records.int64s())
    return records.Schema(**features)


@dataclasses.dataclass
class SquadExample:
    """One question about one context.

    Attributes:
      qas_id: str, the question's "id".
      question_text: str.
      doc_tokens: list of str, the context split on whitespace (see `_split_context`).
      orig_answer_text: str, the answer as written; "" for an impossible question; None when
        not training.
      start_position: int, index in `doc_tokens` of the answer's first word; -1 for an
        impossible question; None when not training.
      end_position: int, index in `doc_tokens` of the answer's last word (inclusive), as above.
      is_impossible: bool; only read from the file when training on SQuAD 2.0, as in the
        original, so it is False for every prediction example.
    """
    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str = None
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, packed as `[CLS] query [SEP] window [SEP]`.

    Attributes:
      unique_id: int, 1000000000 for the first feature, then one more for each.
      example_index: int, index of the example in the list converted.
      doc_span_index: int, index of the window within its example.
      tokens: list of str, the word pieces, unpadded.
      token_to_orig_map: dict int -> int, position in `tokens` -> index in the example's
        `doc_tokens`, for the window's positions only.
      token_is_max_context: dict int -> bool, same keys: whether this window is the one where
        that token has the most context (see `windows.max_context_index`).
      input_ids: list of int [max_seq_length], padded with 0.
      input_mask: list of int [max_seq_length], 1 for real tokens, 0 for padding.
      segment_ids: list of int [max_seq_length], 0 for [CLS] query [SEP], 1 for the window
        and its [SEP], 0 for padding.
      start_position: int, position in `tokens` of the answer's first piece; 0 ([CLS]) when
        the answer is outside this window or the question is impossible; None when not
        training.
      end_position: int, position of the answer's last piece (inclusive), as above.
      is_impossible: bool, the example's.
    """
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int = None
    end_position: int = None
    is_impossible: bool = None


def _is_whitespace(char):
    # The original's own set, narrower than the tokenizer's: other Unicode spaces stay inside
    # a word here, and the word indexes of the answers depend on exactly this split.
    return char in " \t\r\n" or ord(char) == 0x202F


def _split_context(text):
    """Splits a context on whitespace, keeping track of where each character went.

    Returns:
      (doc_tokens, char_to_word_offset): the words (list of str), and for each character of
      `text` the index of the word it belongs to; a whitespace character maps to the word
      before it (-1 before the first word).
    """
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for char in text:
        if _is_whitespace(char):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def _get(record, key, expected, where):
    """`record[key]`, checked to be an `expected`; a ValueError naming `where` otherwise."""
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f"{where} has no {key!r}")
    value = record[key]
    # bool is an int in Python, but `"answer_start": true` is not an offset.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ValueError(f"{where}: {key!r} is {value!r}, expected type {expected.__name__}")
    return value


def read_squad_examples(input_file, is_training, version_2_with_negative):
    """Reads a SQuAD JSON file into one `SquadExample` per question, as the original does.

    When training, each question must have exactly one answer (SQuAD 2.0's impossible ones
    none), located by "answer_start", a character offset into the context. An answer whose
    words do not contain its text (the offset is wrong, or odd Unicode) is skipped with a
    warning naming the question, as in the original: training examples are not all kept.

    A context with no words (empty or all whitespace) crashes the original: in training on
    its answer offset, in prediction in the post-processing. Here, when training its questions
    are skipped with a warning, since no answer can be in it; when predicting they are kept,
    `convert_examples_to_features` gives them no feature (as the original) and the
    post-processing must predict "" for them.

    Args:
      input_file: str, path of a SQuAD 1.1 or 2.0 JSON file (UTF-8; a BOM is tolerated).
      is_training: bool, whether to read the answers.
      version_2_with_negative: bool, whether questions may be impossible ("is_impossible");
        only used when training.

    Returns:
      A list of `SquadExample`, in file order.

    Raises:
      ValueError: naming the file, and the question id where there is one: the file is not
        JSON or not SQuAD-shaped (no "data" list, a paragraph without "context" or "qas", a
        question without "id" or "question", an id that is no string, two questions of one
        id, which predictions.json is keyed by; when training, a question without "answers",
        without "is_impossible" in SQuAD 2.0, with other than exactly one answer, or an answer
        without "text" or "answer_start", empty, or reaching outside its context).
    """
    input_data = text.read_json(input_file)
    examples, ids = [], []
    for i, entry in enumerate(_get(input_data, "data", list, input_file)):
        for j, paragraph in enumerate(_get(entry, "paragraphs", list,
                                           f"{input_file}: data[{i}]")):
            where = f"{input_file}: data[{i}].paragraphs[{j}]"
            context = _get(paragraph, "context", str, where)
            doc_tokens, char_to_word_offset = _split_context(context)
            for k, qa in enumerate(_get(paragraph, "qas", list, where)):
                # A string, as SQuAD's: predictions.json is keyed by it, where 7 and "7"
                # would be one key.
                qas_id = _get(qa, "id", str, f"{where}.qas[{k}]")
                ids.append((qas_id, f"data[{i}].paragraphs[{j}].qas[{k}]"))
                where_qa = f"{input_file}: question {qas_id!r}"
                question_text = _get(qa, "question", str, where_qa)
                if not is_training:
                    examples.append(SquadExample(qas_id, question_text, doc_tokens))
                    continue
                if not doc_tokens:
                    logging.warning("%s: skipped, its context is empty", where_qa)
                    continue
                example = _training_example(qa, where_qa, question_text, context, doc_tokens,
                                            char_to_word_offset, version_2_with_negative)
                if example is not None:
                    examples.append(example)
    text.check_unique_ids(input_file, ids)
    return examples


def _training_example(qa, where, question_text, context, doc_tokens, char_to_word_offset,
                      version_2_with_negative):
    """The `SquadExample` of one question with its answer, or None to skip it."""
    is_impossible = (_get(qa, "is_impossible", bool, where) if version_2_with_negative
                     else False)
    answers = _get(qa, "answers", list, where)
    if len(answers) != 1 and not is_impossible:
        raise ValueError(f"{where} has {len(answers)} answers: for training, each question "
                         f"should have exactly 1 answer")
    if is_impossible:
        return SquadExample(qa["id"], question_text, doc_tokens, orig_answer_text="",
                            start_position=-1, end_position=-1, is_impossible=True)
    orig_answer_text = _get(answers[0], "text", str, f"{where}, answer")
    answer_offset = _get(answers[0], "answer_start", int, f"{where}, answer")
    if not orig_answer_text:
        raise ValueError(f"{where}: the answer text is empty")
    if answer_offset < 0 or answer_offset + len(orig_answer_text) > len(context):
        raise ValueError(f"{where}: the answer {orig_answer_text!r} at answer_start "
                         f"{answer_offset} reaches outside its context of {len(context)} "
                         f"characters")
    start_position = char_to_word_offset[answer_offset]
    end_position = char_to_word_offset[answer_offset + len(orig_answer_text) - 1]
    # Only answers whose text can be recovered from the words are kept; the others are
    # usually a wrong offset or odd Unicode, and would train the model on the wrong span.
    actual_text = " ".join(doc_tokens[start_position:end_position + 1])
    cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(orig_answer_text))
    if actual_text.find(cleaned_answer_text) == -1:
        logging.warning("%s: skipped, could not find answer: %r vs. %r", where, actual_text,
                        cleaned_answer_text)
        return None
    return SquadExample(qa["id"], question_text, doc_tokens, orig_answer_text, start_position,
                        end_position, is_impossible=False)


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """Narrows a word-level answer span to the word pieces that spell the answer.

    The answer's whitespace words may hold more than the answer: "(1895-1943)." for the
    answer "1895". The smallest sub-span of pieces equal to the tokenized answer is returned,
    or the span unchanged when there is none.
    """
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start:new_end + 1]) == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training, output_fn):
    """Cuts each example into windows and passes their `InputFeatures` to `output_fn`.

    The question is truncated to `max_query_length` pieces; the context windows fill the rest
    of `max_seq_length`. When training, a window that does not hold the whole answer, and every
    window of an impossible question, points at [CLS] (start and end 0). An example whose
    context has no word pieces gives no feature, as in the original.

    Args:
      examples: list of `SquadExample`.
      tokenizer: a `tokenization.FullTokenizer`.
      max_seq_length: int, length of the packed, padded sequences.
      doc_stride: int, how far each window starts after the previous one, in pieces.
      max_query_length: int, the most pieces of a question kept.
      is_training: bool, whether to compute the answer positions.
      output_fn: callable taking one `InputFeatures`, called in order.

    Returns:
      int, the number of features made.

    Raises:
      ValueError: if `max_seq_length` leaves no room for the context after a question of
        `max_query_length` pieces, [CLS] and two [SEP] (the original would loop forever), or
        `doc_stride` < 1 (likewise).
    """
    if max_tokens_for_doc(max_seq_length, max_query_length) <= 0:
        raise ValueError(f"The max_seq_length ({max_seq_length}) must be greater than "
                         f"max_query_length ({max_query_length}) + 3")
    if doc_stride < 1:
        raise ValueError(f"doc_stride ({doc_stride}) must be at least 1")
    unique_id = _FIRST_UNIQUE_ID
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]

        tok_to_orig_index = []
        orig_to_tok_index = []
        all_doc_tokens = []
        for i, token in enumerate(example.doc_tokens):
            orig_to_tok_index.append(len(all_doc_tokens))
            for sub_token in tokenizer.tokenize(token):
                tok_to_orig_index.append(i)
                all_doc_tokens.append(sub_token)

        if is_training and not example.is_impossible:
            tok_start_position = orig_to_tok_index[example.start_position]
            if example.end_position < len(example.doc_tokens) - 1:
                tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
            else:
                tok_end_position = len(all_doc_tokens) - 1
            tok_start_position, tok_end_position = _improve_answer_span(
                all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
                example.orig_answer_text)

        doc_spans = windows.spans(len(all_doc_tokens),
                                  max_tokens_for_doc(max_seq_length, len(query_tokens)),
                                  doc_stride)
        for doc_span_index, doc_span in enumerate(doc_spans):
            span = range(doc_span.start, doc_span.start + doc_span.length)
            tokens, segment_ids = text.pack(query_tokens, [all_doc_tokens[i] for i in span])
            token_to_orig_map = {}
            token_is_max_context = {}
            for position, split_token_index in enumerate(span, doc_offset(len(query_tokens))):
                token_to_orig_map[position] = tok_to_orig_index[split_token_index]
                token_is_max_context[position] = (
                    windows.max_context_index(doc_spans, split_token_index) == doc_span_index)
            input_ids, input_mask = text.padded(tokenizer.convert_tokens_to_ids(tokens),
                                                max_seq_length)

            start_position = end_position = None
            if is_training and example.is_impossible:
                start_position = end_position = 0
            elif is_training:
                doc_start = doc_span.start
                doc_end = doc_span.start + doc_span.length - 1
                if tok_start_position >= doc_start and tok_end_position <= doc_end:
                    offset = doc_offset(len(query_tokens))
                    start_position = tok_start_position - doc_start + offset
                    end_position = tok_end_position - doc_start + offset
                else:  # nothing to predict in this window: train it to point at [CLS]
                    start_position = end_position = 0

            output_fn(InputFeatures(
                unique_id=unique_id, example_index=example_index,
                doc_span_index=doc_span_index, tokens=tokens,
                token_to_orig_map=token_to_orig_map, token_is_max_context=token_is_max_context,
                input_ids=input_ids, input_mask=input_mask,
                segment_ids=text.padded(segment_ids, max_seq_length)[0],
                start_position=start_position,
                end_position=end_position, is_impossible=example.is_impossible))
            unique_id += 1
    return unique_id - _FIRST_UNIQUE_ID


class FeatureWriter:
    """Writes `InputFeatures` as the original's TFRecords, atomically.

    Each record holds int64 features `unique_ids` [1], `input_ids`, `input_mask` and
    `segment_ids` [max_seq_length], and when training `start_positions`, `end_positions` and
    `is_impossible` (0 or 1) [1] (`record_schema`). Records go to a temporary file, renamed to
    `filename` by `close()`, so that a crash never leaves a partial file under the final name.

    Attributes:
      filename: str, the final path.
      is_training: bool, whether the answer positions are written.
      num_features: int, the number of features written so far.
    """

    # Precomputed varints for every id of the released vocabularies (the largest, the
    # multilingual one, has 119547 entries); bigger values are encoded one by one.
    _TABLE_SIZE = 1 << 17

    def __init__(self, filename, is_training):
        self.filename = filename
        self.is_training = is_training
        self.num_features = 0
        self._encoder = None  # for the first feature's max_seq_length; the others must have it
        self._varints = records.VarintTable(self._TABLE_SIZE)
        self._temp = files.temp_path(filename)
        self._writer = open(self._temp, "wb")

    def _int64s(self, values):
        try:
            return self._varints.encode(values)
        except IndexError:  # the unique id, or an id beyond the table
            return b"".join(records.varint(value) for value in values)

    def process_feature(self, feature):
        """Writes one `InputFeatures` (usable as `convert_examples_to_features`'s output_fn)."""
        self.num_features += 1
        if self._encoder is None:
            self._encoder = record_schema(self.is_training).encoder(
                max_seq_length=len(feature.input_ids))
        values = {
            "unique_ids": self._int64s([feature.unique_id]),
            "input_ids": self._int64s(feature.input_ids),
            "input_mask": self._int64s(feature.input_mask),
            "segment_ids": self._int64s(feature.segment_ids),
        }
        if self.is_training:
            values.update(
                start_positions=self._int64s([feature.start_position]),
                end_positions=self._int64s([feature.end_position]),
                is_impossible=self._int64s([int(bool(feature.is_impossible))]))
        self._writer.write(records.frame(self._encoder.serialize(values)))

    def close(self):
        """Finishes the file and moves it to `filename`."""
        self._writer.close()
        files.replace(self._temp, self.filename)
