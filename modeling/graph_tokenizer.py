"""BERT's `FullTokenizer` as TensorFlow ops, id for id, and the packing of model inputs.

`GraphTokenizer` turns a batch of UTF-8 strings into the ids `tokenization.FullTokenizer`
gives, inside a `tf.function`, a `tf.data` pipeline or a SavedModel (TensorFlow and
tensorflow-text ops only). tensorflow-text's own BERT tokenizers are not exact: they lower-case
by Unicode case folding ("ß" -> "ss", final "ς" -> "σ"), and ICU's Unicode tables are not
Python's. Here every character class is an explicit list of code-point ranges computed from
Python's `unicodedata` (and from the predicates of `tokenization`) when the tokenizer is built,
and lower-casing is a per-character table computed from `str.lower()` + NFD + dropping
category Mn, with the two places where Python's result is not per character done in the graph:
the Greek final sigma and the canonical reordering of combining marks.

The pipeline, on a batch of strings [B]:

    invalid UTF-8 rows -> transcoded, dropping the bad bytes    (as bytes.decode("utf-8", "ignore"))
    regex: drop NUL, U+FFFD and control characters
    regex: whitespace -> " "
    if do_lower_case:
        ASCII lower-casing (bytes)
        rows holding a non-ASCII character that lower-casing or accent stripping changes:
            code points -> table -> code points (final sigma, canonical order)
    regex: " c " around punctuation and CJK ideographs
    split on " "; words of more than 200 characters -> "[UNK]"
    FastWordpieceTokenizer (greedy longest-match-first, no pre-tokenization of its own)

Most rows of most text take only the regex and byte steps; the code-point path runs on the few
rows that need it.
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from modeling import tokenization

_NUM_CODE_POINTS = 0x110000
_BLOCK = 256  # Code points per block of a two-level table.
_CAPITAL_SIGMA = 0x3A3
_SMALL_SIGMA = 0x3C3
_FINAL_SIGMA = 0x3C2

# Context classes of Python's final-sigma rule (see `_case_context`).
_OTHER, _CASED, _CASE_IGNORABLE = 0, 1, 2

# Matches a string that is valid UTF-8. RE2 compiles an explicit class into the exact UTF-8
# byte sequences of its code points, so bad bytes, overlong forms, surrogates and values above
# U+10FFFF all fail; "." is more lenient and would not do.
_VALID_UTF8 = r"(?s)[^\x{D800}-\x{DFFF}]*"


def _regex_class(code_points):
    """Returns an RE2 character class, e.g. "[\\x{41}-\\x{5A}\\x{61}]", for sorted ints."""
    parts = []
    start = previous = None
    for cp in list(code_points) + [None]:
        if cp is not None and previous is not None and cp == previous + 1:
            previous = cp
            continue
        if start is not None:
            parts.append(f"\\x{{{start:X}}}" if start == previous
                         else f"\\x{{{start:X}}}-\\x{{{previous:X}}}")
        start = previous = cp
    return "[" + "".join(parts) + "]"


def _case_context(char):
    """How Python's `str.lower` final-sigma rule sees `char`: cased, case-ignorable or other.

    CPython lowers U+03A3 to final "ς" when, skipping case-ignorable characters, a cased
    character precedes it and none follows it. Python exposes neither property, so this asks
    `str.lower` itself: in "cΣ" the sigma is final iff `char` is cased and not ignorable; in
    "AcΣ" it is final iff `char` is ignorable (skipped, "A" is cased) or cased.
    """
    alone = ("%sΣ" % char).lower()[-1] == "ς"
    after_a = ("A%sΣ" % char).lower()[-1] == "ς"
    if alone:
        return _CASED
    return _CASE_IGNORABLE if after_a else _OTHER


class _UnicodeTables:
    """Character classes and the lower-casing table, from Python's Unicode data.

    Attributes:
        drop: list of int, code points the original deletes (NUL, U+FFFD, BERT controls).
        space: list of int, code points that become " ": BERT whitespace other than " " itself,
            plus Python whitespace that survives cleaning (U+2028, U+2029), on which the
            original's `str.split()` splits.
        split: list of int, punctuation and CJK ideographs: each becomes a word of its own.
        lower_changes: list of int, non-ASCII code points whose lower-cased, accent-stripped
            form differs from themselves, or that carry a nonzero combining class.
        expansion_index: np.int32 [0x110000], `offset << 3 | length` into the item arrays:
            the code points of NFD(c.lower()), marks included.
        item_value: np.int32 [items], the code point, or -1 for "the input code point".
        item_keep: np.bool_ [items], False for category Mn (dropped after NFD).
        item_ccc: np.int32 [items], the canonical combining class.
        context: np.int32 [0x110000], `_OTHER`, `_CASED` or `_CASE_IGNORABLE`.
    """

    def __init__(self):
        assigned = [cp for cp in range(_NUM_CODE_POINTS)
                    if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
        self.drop = [cp for cp in assigned if cp in (0, 0xFFFD) or
                     tokenization._is_control(chr(cp))]
        dropped = set(self.drop)
        self.space = [cp for cp in assigned if cp != 0x20 and cp not in dropped and (
            tokenization._is_whitespace(chr(cp)) or chr(cp).isspace())]
        cjk = [cp for low, high in tokenization._CJK_RANGES for cp in range(low, high + 1)]
        punctuation = [cp for cp in assigned if tokenization._is_punctuation(chr(cp))]
        self.split = sorted(set(cjk) | set(punctuation))

        items = {(-1, True, 0): 0}  # The identity expansion of most characters, shared.
        item_list = [(-1, True, 0)]
        self.expansion_index = np.full(_NUM_CODE_POINTS, (0 << 3) | 1, np.int32)
        self.context = np.full(_NUM_CODE_POINTS, _OTHER, np.int32)
        lower_changes = []
        for cp in assigned:
            char = chr(cp)
            self.context[cp] = _case_context(char)
            expansion = unicodedata.normalize("NFD", char.lower())
            expansion_items = tuple(
                (-1 if expansion == char else ord(x), unicodedata.category(x) != "Mn",
                 unicodedata.combining(x)) for x in expansion)
            if expansion_items == ((-1, True, 0),):
                continue
            if cp >= 0x80:
                lower_changes.append(cp)
            key = expansion_items
            offset = items.get(key)
            if offset is None:
                offset = items[key] = len(item_list)
                item_list.extend(expansion_items)
            self.expansion_index[cp] = (offset << 3) | len(expansion_items)
        self.lower_changes = lower_changes
        self.item_value = np.array([value for value, _, _ in item_list], np.int32)
        self.item_keep = np.array([keep for _, keep, _ in item_list], np.bool_)
        self.item_ccc = np.array([ccc for _, _, ccc in item_list], np.int32)
        self._check(cjk, assigned)

    def _check(self, cjk, assigned):
        """Checks the properties of Unicode data that the pipeline's order relies on.

        Lower-casing runs after CJK spacing in the original and before it here; that gives the
        same text because lower-casing and NFD keep ideographs ideographs, make none from other
        characters, and an ideograph blocks the final-sigma look-around as the spaces around it
        would. Words are split on " " only, so lower-casing must make no whitespace.
        """
        cjk_set = set(cjk)

        def outputs(cp):
            expansion = unicodedata.normalize("NFD", chr(cp).lower())
            return [x for x in expansion if unicodedata.category(x) != "Mn"]

        cleaned = set(self.drop) | set(self.space) | {0x20}
        for cp in assigned:
            if cp in cleaned:
                continue  # Gone or a space before lower-casing.
            kept = outputs(cp)
            if cp in cjk_set:
                good = len(kept) == 1 and ord(kept[0]) in cjk_set
            else:
                good = not any(ord(x) in cjk_set for x in kept)
            if not good or any(x.isspace() for x in kept):
                raise RuntimeError(
                    f"U+{cp:04X} lower-cases to {kept!r}: this Unicode data breaks an "
                    "assumption of GraphTokenizer's pipeline order.")
        if any(self.context[cp] != _OTHER for cp in cjk if cp < _NUM_CODE_POINTS) or (
                self.context[0x20] != _OTHER):
            raise RuntimeError("A CJK ideograph or the space takes part in final-sigma context.")


@functools.lru_cache(maxsize=None)
def _unicode_tables():
    """Returns the `_UnicodeTables` of this Python, computed once per process (about 2 s)."""
    return _UnicodeTables()


class _CodePointTable:
    """A table over all code points, stored as deduplicated blocks of 256 entries.

    A flat int32 table would hold 4.4 MB; the blocks of rarely-used planes are nearly all
    alike, so two gathers over a few hundred KB do the same job.
    """

    def __init__(self, values):
        """Args: values: np.int32 [0x110000]."""
        blocks = values.reshape(-1, _BLOCK)
        unique = {}
        index = np.empty(len(blocks), np.int32)
        for i, block in enumerate(blocks):
            index[i] = unique.setdefault(block.tobytes(), len(unique)) * _BLOCK
        stored = np.frombuffer(b"".join(unique), np.int32)
        self.index = tf.constant(index)
        self.blocks = tf.constant(stored)

    def lookup(self, code_points):
        """Returns the int32 entries of `code_points` (int32, any shape, in [0, 0x10FFFF])."""
        base = tf.gather(self.index, tf.bitwise.right_shift(code_points, 8))
        return tf.gather(self.blocks, base + tf.bitwise.bitwise_and(code_points, _BLOCK - 1))


class GraphTokenizer(tf.Module):
    """`tokenization.FullTokenizer` in TensorFlow ops: the same ids for every string.

    Usable inside `tf.function`, `tf.data.Dataset.map` and SavedModels. Owns no variables.

    Attributes:
        do_lower_case: bool.
        vocab: list of str, the tokens in id order.
        cls_id, sep_id, unk_id: int, ids of "[CLS]", "[SEP]" and "[UNK]".
    """

    def __init__(self, vocab_file, do_lower_case=True, max_input_chars_per_word=200, name=None):
        """Builds the tokenizer; the first one in a process computes Unicode tables (~2 s).

        Args:
            vocab_file: str or os.PathLike, the model's `vocab.txt`, read with
                `tokenization.load_vocab` (same ids as `FullTokenizer`).
            do_lower_case: bool, True for uncased models.
            max_input_chars_per_word: int, longer words (in code points, after lower-casing
                and accent stripping) become "[UNK]", as in the original.
            name: optional module name.

        Raises:
            FileNotFoundError, ValueError: as `FullTokenizer`, for a missing or malformed vocab.
        """
        super().__init__(name=name)
        vocab = tokenization.load_vocab(vocab_file)
        tokenization.check_special_tokens(vocab, vocab_file)
        self.do_lower_case = do_lower_case
        self.vocab = list(vocab)
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.unk_id = vocab["[UNK]"]
        self._max_chars = max_input_chars_per_word
        tables = _unicode_tables()
        self._drop_pattern = _regex_class(tables.drop)
        self._space_pattern = _regex_class(tables.space)
        self._split_pattern = "(" + _regex_class(tables.split) + ")"
        self._lower_pattern = "(?s).*" + _regex_class(tables.lower_changes) + ".*"
        self._long_word = f"(?s)[^ ]{{{max_input_chars_per_word + 1},}}"
        if do_lower_case:
            self._expansions = _CodePointTable(tables.expansion_index)
            self._contexts = _CodePointTable(tables.context)
            self._item_value = tf.constant(tables.item_value)
            self._item_keep = tf.constant(tables.item_keep)
            self._item_ccc = tf.constant(tables.item_ccc)
        self._vocab_tensor = tf.constant(self.vocab)
        # A word is never longer than 4 bytes per character; longer words are already "[UNK]".
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocab, suffix_indicator="##",
            max_bytes_per_word=4 * max_input_chars_per_word, token_out_type=tf.int32,
            unknown_token="[UNK]", no_pretokenization=True)

    def __call__(self, texts):
        """Same as `tokenize`."""
        return self.tokenize(texts)

    def tokenize(self, texts):
        """Returns the WordPiece ids of each string.

        Args:
            texts: tf.string [B] (or a scalar), UTF-8 text; invalid bytes are dropped, as
                `FullTokenizer` does with bytes.

        Returns:
            tf.RaggedTensor int32 [B, (tokens)] (or a dense int32 [tokens] for a scalar).
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        if texts.shape.rank == 0:
            return self.tokenize(texts[tf.newaxis])[0]
        words = self.basic_tokenize(texts)
        words = words.with_flat_values(tf.where(
            tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self._max_chars,
            "[UNK]", words.flat_values))  # The vocab's "[UNK]" is one piece: the unk id.
        pieces = self._wordpiece.tokenize(words.flat_values)  # [words, (pieces)]
        return words.with_flat_values(pieces).merge_dims(1, 2)

    def tokenize_to_tokens(self, texts):
        """Returns the WordPiece tokens (tf.string, shaped as `tokenize`) of each string."""
        ids = self.tokenize(texts)
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(tf.gather(self._vocab_tensor, ids.flat_values))
        return tf.gather(self._vocab_tensor, ids)

    def basic_tokenize(self, texts):
        """Returns `BasicTokenizer`'s words: cleaned, lower-cased if so, split at punctuation.

        Args:
            texts: tf.string [B].

        Returns:
            tf.RaggedTensor tf.string [B, (words)].
        """
        texts = self._drop_invalid_utf8(tf.convert_to_tensor(texts, tf.string))
        texts = tf.strings.regex_replace(texts, self._drop_pattern, "")
        texts = tf.strings.regex_replace(texts, self._space_pattern, " ")
        if self.do_lower_case:
            texts = tf.strings.lower(texts)  # ASCII only: bytes >= 0x80 are left alone.
            texts = self._lower_rows_that_need_it(texts)
        texts = tf.strings.regex_replace(texts, self._split_pattern, r" \1 ")
        return tf.strings.split(texts, sep=None)

    @staticmethod
    def _drop_invalid_utf8(texts):
        """Drops the bytes that are not UTF-8, as `bytes.decode("utf-8", "ignore")` does."""
        valid = tf.strings.regex_full_match(texts, _VALID_UTF8)
        return tf.cond(
            tf.reduce_all(valid), lambda: texts,
            lambda: tf.where(valid, texts, tf.strings.unicode_transcode(
                texts, "UTF-8", "UTF-8", errors="ignore")))

    def _lower_rows_that_need_it(self, texts):
        """Lower-cases and strips accents in the rows with a non-ASCII character to change."""
        rows = tf.where(tf.strings.regex_full_match(texts, self._lower_pattern))
        mapped = self._lower_and_strip_accents(tf.gather_nd(texts, rows))
        return tf.tensor_scatter_nd_update(texts, rows, mapped)

    def _lower_and_strip_accents(self, texts):
        """`unicodedata.normalize("NFD", text.lower())` without category Mn, on each string.

        Args:
            texts: tf.string [R], valid UTF-8, cleaned as `BasicTokenizer` cleans.

        Returns:
            tf.string [R].
        """
        code_points = tf.strings.unicode_decode(texts, "UTF-8")
        chars = code_points.flat_values  # [N] int32
        char_rows = code_points.value_rowids()  # [N] int64
        expansion = self._expansions.lookup(chars)
        offsets = tf.bitwise.right_shift(expansion, 3)
        lengths = tf.bitwise.bitwise_and(expansion, 7)
        items = tf.ragged.range(offsets, offsets + lengths)  # [N, (expansion)]
        item_ids = items.flat_values  # [M]
        source = items.value_rowids()  # [M]: the character each item comes from
        values = tf.gather(self._item_value, item_ids)
        values = tf.where(values < 0, tf.gather(chars, source), values)
        is_sigma = tf.equal(chars, _CAPITAL_SIGMA)
        values = tf.cond(
            tf.reduce_any(is_sigma),
            lambda: self._final_sigma(chars, char_rows, is_sigma, values, source),
            lambda: values)
        keep = tf.gather(self._item_keep, item_ids)
        ccc = tf.gather(self._item_ccc, item_ids)
        item_rows = tf.gather(char_rows, source)
        values, keep = tf.cond(
            tf.reduce_any(keep & (ccc > 0)),
            lambda: self._canonical_order(values, keep, ccc, item_rows),
            lambda: (values, keep))
        lowered = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(values, keep), tf.boolean_mask(item_rows, keep),
            nrows=tf.shape(texts, out_type=tf.int64)[0])
        return tf.strings.unicode_encode(lowered, "UTF-8")

    def _final_sigma(self, chars, char_rows, is_sigma, values, source):
        """Turns "σ" from a capital sigma into "ς" where Python's `str.lower` would.

        That is where, within its string and skipping case-ignorable characters, a cased
        character precedes the sigma and none follows it.

        Args:
            chars: int32 [N], the code points of all strings, one after the other.
            char_rows: int64 [N], the string of each code point.
            is_sigma: bool [N], chars == U+03A3.
            values: int32 [M], the expanded code points (each capital sigma gave one).
            source: int64 [M], the index in `chars` of each value.

        Returns:
            int32 [M], `values` with the final sigmas changed.
        """
        context = self._contexts.lookup(chars)
        # Positions that are not case-ignorable, in order; a sigma is one of them.
        anchors = tf.where(context != _CASE_IGNORABLE)[:, 0]  # [A]
        anchor_rows = tf.gather(char_rows, anchors)
        anchor_cased = tf.equal(tf.gather(context, anchors), _CASED)
        num_anchors = tf.shape(anchors, out_type=tf.int64)[0]
        rank = tf.where(tf.gather(is_sigma, anchors))[:, 0]  # sigmas, as indices into anchors
        sigma_rows = tf.gather(anchor_rows, rank)

        def neighbour_cased(step):
            index = rank + step
            inside = (index >= 0) & (index < num_anchors)
            index = tf.clip_by_value(index, 0, num_anchors - 1)
            same_row = tf.equal(tf.gather(anchor_rows, index), sigma_rows)
            return inside & same_row & tf.gather(anchor_cased, index)

        final = neighbour_cased(-1) & ~neighbour_cased(1)  # [sigmas]
        final_chars = tf.scatter_nd(tf.gather(anchors, rank)[:, tf.newaxis], final,
                                    tf.shape(chars, out_type=tf.int64))
        return tf.where(tf.gather(final_chars, source), _FINAL_SIGMA, values)

    @staticmethod
    def _canonical_order(values, keep, ccc, rows):
        """Sorts runs of combining marks by combining class, stably: NFD's canonical order.

        A run is a maximal sequence of code points with a nonzero class, within one string.

        Args:
            values: int32 [M], code points.
            keep: bool [M].
            ccc: int32 [M], canonical combining classes.
            rows: int64 [M], the string of each code point.

        Returns:
            (values, keep) reordered.
        """
        new_row = tf.concat([[True], rows[1:] != rows[:-1]], axis=0)
        run = tf.cumsum(tf.cast((ccc == 0) | new_row, tf.int64))
        key = run * 256 + tf.cast(ccc, tf.int64)  # non-decreasing except inside runs
        order = tf.argsort(key, stable=True)
        return tf.gather(values, order), tf.gather(keep, order)


class BertInputPacker(tf.Module):
    """Packs one or two tokenized segments into BERT's fixed-length inputs, as the original.

    "[CLS] a [SEP]" or "[CLS] a [SEP] b [SEP]", padded with 0. A pair is cut by the original's
    `_truncate_seq_pair` (drop tokens from the end of the longer segment, from b when they are
    as long, until both fit in seq_length - 3); a single segment is cut to seq_length - 2. A
    second segment without tokens (empty `text_b`) counts as none, as in `run_classifier`.
    Owns no variables.
    """

    def __init__(self, seq_length, cls_id, sep_id, name=None):
        """Args:
            seq_length: int, the length of every output row; at least 3.
            cls_id, sep_id: int, the vocab ids of "[CLS]" and "[SEP]".
            name: optional module name.

        Raises:
            ValueError: if seq_length < 3.
        """
        super().__init__(name=name)
        if seq_length < 3:
            raise ValueError(f"seq_length must be at least 3, got {seq_length}.")
        self.seq_length = seq_length
        self.cls_id = cls_id
        self.sep_id = sep_id

    def __call__(self, ids_a, ids_b=None):
        """Packs a batch.

        Args:
            ids_a: tf.RaggedTensor int32 [B, (tokens)], the first segment.
            ids_b: optional tf.RaggedTensor int32 [B, (tokens)], the second segment.

        Returns:
            dict of int32 [B, seq_length]: "input_ids", "input_mask", "segment_ids".
        """
        ids_a = tf.cast(ids_a, tf.int32)
        length_a = ids_a.row_lengths()
        if ids_b is None:
            ids_b = tf.RaggedTensor.from_row_lengths(
                tf.zeros([0], tf.int32), tf.zeros_like(length_a))
        ids_b = tf.cast(ids_b, tf.int32)
        length_b = ids_b.row_lengths()
        has_b = length_b > 0
        # _truncate_seq_pair in closed form: the longer side shrinks to meet the shorter, then
        # b loses first on ties, so a keeps the extra token of an odd budget.
        pair = self.seq_length - 3
        keep_a_pair = tf.minimum(length_a, tf.maximum(pair - length_b, (pair + 1) // 2))
        keep_b = tf.minimum(length_b, pair - keep_a_pair)
        keep_a = tf.where(has_b, keep_a_pair, tf.minimum(length_a, self.seq_length - 2))
        keep_b = tf.where(has_b, keep_b, 0)
        batch = tf.shape(length_a, out_type=tf.int64)[0]
        cls = tf.fill([batch, 1], self.cls_id)
        sep = tf.fill([batch, 1], self.sep_id)
        sep_b = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(has_b, tf.int64))], self.sep_id),
            tf.cast(has_b, tf.int64))
        segments = [cls, _head(ids_a, keep_a), sep, _head(ids_b, keep_b), sep_b]
        input_ids = tf.concat(segments, axis=1)
        segment_ids = tf.concat(
            [tf.zeros_like(cls), tf.zeros_like(_head(ids_a, keep_a)), tf.zeros_like(sep),
             tf.ones_like(_head(ids_b, keep_b)), tf.ones_like(sep_b)], axis=1)
        shape = [None, self.seq_length]
        return {
            "input_ids": input_ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
        }


def _head(ids, lengths):
    """Returns the first `lengths[i]` tokens of each row of `ids` (RaggedTensor [B, (n)])."""
    starts = ids.row_starts()
    index = tf.ragged.range(starts, starts + lengths).flat_values
    return tf.RaggedTensor.from_row_lengths(tf.gather(ids.flat_values, index), lengths)
