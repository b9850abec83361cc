"""BERT's `FullTokenizer` as TensorFlow ops, id for id, and the packing of model inputs.

`GraphTokenizer` turns a batch of UTF-8 strings into the ids `tokenization.FullTokenizer`
gives, inside a `tf.function`, a `tf.data` pipeline or a SavedModel (TensorFlow and
tensorflow-text ops only). tensorflow-text's own BERT tokenizers are not exact: they lower-case
by Unicode case folding ("ß" -> "ss", final "ς" -> "σ"), and ICU's Unicode tables are not
Python's. Here every character class is a list of code points computed from Python's
`unicodedata` (through the predicates of `tokenization`) when the tokenizer is built, and
lower-casing is a per-character table computed from `str.lower()` + NFD + dropping category
Mn. The two places where Python's result is not per character are done in the graph: the Greek
final sigma, and the canonical reordering of combining marks.

The pipeline, on a batch of strings [B]:

    ASCII lower-casing, byte by byte                                (if do_lower_case)
    rows with invalid UTF-8, a character to drop, a non-ASCII space, or a non-ASCII character
    that lower-casing or accent stripping changes:
        code points -> per-character table -> code points (+ final sigma)
        (rows with bad bytes or characters that give several code points, as Hangul
        syllables do, take a longer way; canonical reordering only where it can matter)
    rows with a word of more than 200 characters, or a character that tensorflow-text splits
    at and Python does not:
        such words -> one character that is not in the vocab, hence "[UNK]"
    FastWordpieceTokenizer: splits at whitespace, punctuation and CJK ideographs, then greedy
        longest-match-first WordPiece.

Most rows of most text take only the byte and regex steps. FastWordpieceTokenizer's own
splitting uses ICU's Unicode tables; where it splits is measured once per process (one call
over all code points), and the code points where it and Python disagree are dealt with before
it runs.
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from modeling.text import tokenization

_NUM_CODE_POINTS = 0x110000
_SURROGATES = range(0xD800, 0xE000)
_BLOCK = 256  # Code points per block of a two-level table.
_CAPITAL_SIGMA = 0x3A3
_FINAL_SIGMA = 0x3C2
_SIGMA_WINDOW = 8  # Characters looked at on each side of a sigma before looking further.

# Python's `str.split()` splits a cleaned text at these; all others were dropped or made " ".
_SEPARATORS = (0x09, 0x0A, 0x0D, 0x20)
_NOT_SEPARATOR = r"[^\t\n\r ]"

# Context classes of Python's final-sigma rule (see `_case_context`).
_OTHER, _CASED, _CASE_IGNORABLE = 0, 1, 2

# An entry of the per-character table: (base << 3) | (reorders << 2) | length. The character
# becomes `length` code points: none (it is dropped), chr(cp + base), or, for 2 or 3 (Hangul
# syllables decompose into jamo), `kept_items[base:base + length]`. `reorders` marks a character
# that is, or gives, a non-Mn character with a nonzero combining class, which NFD's canonical
# reordering could move past another one (some Brahmic scripts, musical notation). Rows with
# neither, nor invalid UTF-8, take the cheaper `GraphTokenizer._map_simple`.
_IDENTITY = 1
_REORDERS = 4
_MAX_LENGTH = 3


def _regex_ranges(code_points):
    """Returns RE2 class ranges, e.g. "\\x{41}-\\x{5A}\\x{61}", for an iterable of ints."""
    parts = []
    start = previous = None
    for cp in sorted(code_points) + [None]:
        if cp is not None and previous is not None and cp == previous + 1:
            previous = cp
            continue
        if start is not None:
            parts.append(f"\\x{{{start:X}}}" if start == previous
                         else f"\\x{{{start:X}}}-\\x{{{previous:X}}}")
        start = previous = cp
    return "".join(parts)


def _case_context(char):
    """How Python's `str.lower` final-sigma rule sees `char`: cased, case-ignorable or other.

    CPython lowers U+03A3 to final "ς" when, skipping case-ignorable characters, a cased
    character precedes it and none follows it. Python exposes neither property, so this asks
    `str.lower` itself: in "cΣ" the sigma is final iff `char` is cased and not ignorable; in
    "AcΣ" it is final iff `char` is ignorable (skipped, and "A" is cased) or cased.
    """
    if ("%sΣ" % char).lower()[-1] == "ς":
        return _CASED
    return _CASE_IGNORABLE if ("A%sΣ" % char).lower()[-1] == "ς" else _OTHER


class _UnicodeTables:
    """Python's view of every code point, as `BasicTokenizer` uses it.

    Attributes:
        drop: set of int, what cleaning deletes: NUL, U+FFFD and BERT's control characters.
        space: set of int, what cleaning makes " ": BERT whitespace, plus Python whitespace
            that is neither (U+2028, U+2029), at which the original's `str.split()` splits.
        split: set of int, punctuation and CJK ideographs: each becomes a word of its own.
        cased_entries: np.int32 [0x110000], table entries (see `_IDENTITY`) for cleaning.
        lower_entries: np.int32 [0x110000], entries for cleaning, lower-casing and accent
            stripping.
        kept_items: np.int32 [kept], the code points of the characters that lower-case and
            strip to several.
        expansion_index: np.int32 [0x110000], `offset << 3 | length` into the item arrays:
            cleaning, then the code points of NFD(c.lower()), marks included.
        item_value: np.int32 [items], a code point, or -1 for the character itself.
        item_keep: np.bool_ [items], False for category Mn (dropped after NFD).
        item_ccc: np.int32 [items], the canonical combining class.
        context: np.int32 [0x110000], `_OTHER`, `_CASED` or `_CASE_IGNORABLE` as the text
            that `str.lower` sees has it: dropped characters are skipped over.
    """

    def __init__(self):
        assigned = [cp for cp in range(_NUM_CODE_POINTS)
                    if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
        self.drop = {cp for cp in assigned
                     if cp in (0, 0xFFFD) or tokenization._is_control(chr(cp))}
        self.space = {cp for cp in assigned if cp not in self.drop and (
            tokenization._is_whitespace(chr(cp)) or chr(cp).isspace())}
        cjk = {cp for low, high in tokenization._CJK_RANGES for cp in range(low, high + 1)}
        self.split = cjk | {cp for cp in assigned if tokenization._is_punctuation(chr(cp))}

        self.cased_entries = np.full(_NUM_CODE_POINTS, _IDENTITY, np.int32)
        self.lower_entries = np.full(_NUM_CODE_POINTS, _IDENTITY, np.int32)
        self.expansion_index = np.empty(_NUM_CODE_POINTS, np.int32)
        self.context = np.full(_NUM_CODE_POINTS, _OTHER, np.int32)
        items = {}  # expansion (tuple of items) -> offset
        item_list = []
        kept_offsets = {}  # several code points (tuple) -> offset in kept_items
        kept_items = []

        def index(expansion):
            offset = items.get(expansion)
            if offset is None:
                offset = items[expansion] = len(item_list)
                item_list.extend(expansion)
            return (offset << 3) | len(expansion)

        index(((-1, True, 0),))  # Offset 0: "the character itself", most characters' expansion.
        self.expansion_index[:] = 1
        for cp in assigned:  # Unassigned and private-use code points map to themselves.
            char = chr(cp)
            if cp in self.drop:
                self.cased_entries[cp] = self.lower_entries[cp] = 0
                self.expansion_index[cp] = index(())
                self.context[cp] = _CASE_IGNORABLE
                continue
            if cp in self.space:
                self.cased_entries[cp] = self.lower_entries[cp] = ((0x20 - cp) << 3) | 1
                self.expansion_index[cp] = index(((0x20, True, 0),))
                continue
            self.context[cp] = _case_context(char)
            decomposed = unicodedata.normalize("NFD", char.lower())
            expansion = tuple((-1 if x == char else ord(x), unicodedata.category(x) != "Mn",
                               unicodedata.combining(x)) for x in decomposed)
            self.expansion_index[cp] = index(expansion)
            kept = tuple(ord(x) for x in decomposed if unicodedata.category(x) != "Mn")
            self._check(cp, kept, cjk)
            if len(kept) == 1:
                base = kept[0] - cp
            else:
                base = kept_offsets.setdefault(kept, len(kept_items))
                if base == len(kept_items):
                    kept_items.extend(kept)
            reorders = any(keep and ccc for _, keep, ccc in expansion)
            self.lower_entries[cp] = (base << 3) | (_REORDERS if reorders else 0) | len(kept)
        self.kept_items = np.array(kept_items, np.int32)
        self.item_value = np.array([value for value, _, _ in item_list], np.int32)
        self.item_keep = np.array([keep for _, keep, _ in item_list], np.bool_)
        self.item_ccc = np.array([ccc for _, _, ccc in item_list], np.int32)

    def _check(self, cp, kept, cjk):
        """Checks what the order of the graph pipeline relies on, for one cleaned character.

        The original spaces out CJK ideographs before lower-casing; here they are split after
        it. That is the same when lower-casing keeps ideographs ideographs, makes none from
        other characters, and an ideograph blocks the final-sigma look-around as the spaces
        around it would. Words are split at `_SEPARATORS` only, so lower-casing must make no
        whitespace. A table entry holds at most `_MAX_LENGTH` code points.
        """
        if cp in cjk:
            good = len(kept) == 1 and kept[0] in cjk and self.context[cp] == _OTHER
        else:
            good = not any(x in cjk for x in kept)
        if not good or any(chr(x).isspace() for x in kept) or len(kept) > _MAX_LENGTH:
            raise RuntimeError(
                f"U+{cp:04X} lower-cases to {[chr(x) for x in kept]!r}: this Unicode data "
                "breaks an assumption of GraphTokenizer's pipeline.")


@functools.lru_cache(maxsize=None)
def _unicode_tables():
    """Returns the `_UnicodeTables` of this Python, computed once per process."""
    return _UnicodeTables()


@functools.lru_cache(maxsize=None)
def _fast_wordpiece_classes():
    """Measures where `FastWordpieceTokenizer` splits: (whitespace, split), sets of int.

    With a vocab where every probe word is one token ("x" and every word holding it is
    "[UNK]"), "x" + c + "x" gives 1 id when c is part of a word, 2 when c is whitespace, 3
    when c is a word of its own.
    """
    code_points = [cp for cp in range(_NUM_CODE_POINTS) if cp not in _SURROGATES]
    probe = tf_text.FastWordpieceTokenizer(["[UNK]", "y"], token_out_type=tf.int32)
    counts = probe.tokenize(tf.constant(
        ["x" + chr(cp) + "x" for cp in code_points])).row_lengths().numpy()
    whitespace = {cp for cp, count in zip(code_points, counts) if count == 2}
    split = {cp for cp, count in zip(code_points, counts) if count == 3}
    return whitespace, split


class _CodePointTable:
    """A table over all code points, stored as deduplicated blocks of 256 entries.

    A flat int32 table would hold 4.4 MB; most blocks are alike (unassigned planes, scripts
    without case), so two gathers over some hundred KB do the same job.
    """

    def __init__(self, values):
        """Args: values: np.int32 [0x110000]."""
        unique = {}
        index = np.array([unique.setdefault(block.tobytes(), len(unique)) * _BLOCK
                          for block in values.reshape(-1, _BLOCK)], np.int32)
        self.index = tf.constant(index)
        self.blocks = tf.constant(np.frombuffer(b"".join(unique), np.int32))

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
        """Builds the tokenizer; the first one in a process measures Unicode (about 2 s).

        Args:
            vocab_file: str or os.PathLike, the model's `vocab.txt`, read with
                `tokenization.load_vocab` (same ids as `FullTokenizer`).
            do_lower_case: bool, True for uncased models.
            max_input_chars_per_word: int, longer words (in code points, after lower-casing
                and accent stripping) become "[UNK]", as in the original.
            name: optional module name.

        Raises:
            FileNotFoundError, ValueError: as `FullTokenizer`, for a missing or malformed vocab.
            ValueError: if a vocab token holds a character that tensorflow-text splits words
                at and Python's Unicode data does not know (newer Unicode than Python's).
        """
        super().__init__(name=name)
        vocab = tokenization.load_vocab(vocab_file)
        tokenization.check_special_tokens(vocab, vocab_file)
        self.do_lower_case = do_lower_case
        self.vocab = list(vocab)
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.unk_id = vocab["[UNK]"]
        tables = _unicode_tables()
        entries = tables.lower_entries if do_lower_case else tables.cased_entries
        self._entries = _CodePointTable(entries)
        self._contexts = _CodePointTable(tables.context)
        if do_lower_case:
            self._kept_items = tf.constant(tables.kept_items)
            self._expansions = _CodePointTable(tables.expansion_index)
            self._item_value = tf.constant(tables.item_value)
            self._item_keep = tf.constant(tables.item_keep)
            self._item_ccc = tf.constant(tables.item_ccc)

        # Rows holding none of these (nor invalid UTF-8) skip the code-point path. ASCII
        # capitals are lower-cased byte by byte; tabs and newlines are whitespace to both
        # Python and FastWordpieceTokenizer. Surrogates are never valid UTF-8.
        to_map = {cp for cp in np.flatnonzero(entries != _IDENTITY).tolist()
                  if not (do_lower_case and 0x41 <= cp <= 0x5A) and cp not in _SEPARATORS}
        self._plain_pattern = "(?s)[^" + _regex_ranges(to_map | set(_SURROGATES)) + "]*"
        if do_lower_case:
            complex_chars = np.flatnonzero(
                (np.bitwise_and(entries, 3) > 1) | (np.bitwise_and(entries, _REORDERS) > 0))
            self._simple_pattern = "(?s)[^" + _regex_ranges(
                set(complex_chars.tolist()) | set(_SURROGATES)) + "]*"
        split_class = "[" + _regex_ranges(tables.split) + "]"
        self._split_pattern = "(" + split_class + ")"
        self._plan_word_fixes(tables, vocab, vocab_file, max_input_chars_per_word)

        self._vocab_tensor = tf.constant(self.vocab)
        # A word of at most 200 characters has at most 800 bytes; longer words are replaced.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocab, suffix_indicator="##",
            max_bytes_per_word=4 * max_input_chars_per_word, token_out_type=tf.int32,
            unknown_token="[UNK]", no_pretokenization=False)

    def _plan_word_fixes(self, tables, vocab, vocab_file, max_chars):
        """Sets the patterns of `_fix_words`, from where FastWordpieceTokenizer splits.

        Raises:
            RuntimeError: if FastWordpieceTokenizer does not split at ASCII whitespace.
            ValueError: if a vocab token holds a code point that FastWordpieceTokenizer splits
                at and Python does not.
        """
        fast_space, fast_split = _fast_wordpiece_classes()
        cleaned = tables.drop | tables.space
        if not fast_space >= set(_SEPARATORS):
            raise RuntimeError("FastWordpieceTokenizer does not split at ASCII whitespace.")
        # Where FastWordpieceTokenizer splits and Python does not, Python's word holds a
        # character that no vocab token holds, so it is "[UNK]".
        self._foreign = (fast_split - tables.split - cleaned) | (fast_space - cleaned - set(
            _SEPARATORS))
        in_vocab = {cp for token in vocab for cp in map(ord, token)}
        if self._foreign & in_vocab:
            raise ValueError(
                f"Vocabulary file {vocab_file} holds {sorted(self._foreign & in_vocab)}, code "
                "points that tensorflow-text splits words at and Python's unicodedata "
                f"{unicodedata.unidata_version} does not know: GraphTokenizer cannot match "
                "FullTokenizer on words holding them.")
        # Where Python splits and FastWordpieceTokenizer does not, spaces are added.
        missed = tables.split - fast_split
        self._placeholder = next(
            chr(cp) for cp in range(0xFDD0, 0xFDF0)  # Noncharacters.
            if chr(cp) not in vocab and cp not in fast_split | fast_space | tables.split)
        self._word_fix_pattern = (
            "(?s).*(?:" + _NOT_SEPARATOR + f"{{{max_chars + 1}}}" +
            ("|[" + _regex_ranges(self._foreign | missed) + "]" if self._foreign | missed
             else "") + ").*")
        self._long_word_pattern = _NOT_SEPARATOR + f"{{{max_chars + 1},}}"
        self._foreign_word_pattern = (
            f"{_NOT_SEPARATOR}*[{_regex_ranges(self._foreign)}]{_NOT_SEPARATOR}*"
            if self._foreign else None)

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
        texts = self._normalize(texts)
        texts = _update_rows(
            texts, tf.strings.regex_full_match(texts, self._word_fix_pattern), self._fix_words)
        return self._wordpiece.tokenize(texts)

    def tokenize_to_tokens(self, texts):
        """Returns the WordPiece tokens (tf.string, shaped as `tokenize`) of each string."""
        return self.id_to_token(self.tokenize(texts))

    def id_to_token(self, ids):
        """The vocab's token of each id (int, any shape or ragged): tf.string, same shape."""
        if isinstance(ids, tf.RaggedTensor):
            return ids.with_flat_values(self.id_to_token(ids.flat_values))
        return tf.gather(self._vocab_tensor, ids)

    def basic_tokenize(self, texts):
        """Returns `BasicTokenizer`'s words: cleaned, lower-cased if so, split at punctuation.

        Args:
            texts: tf.string [B].

        Returns:
            tf.RaggedTensor tf.string [B, (words)].
        """
        texts = self._normalize(tf.convert_to_tensor(texts, tf.string))
        return tf.strings.split(tf.strings.regex_replace(texts, self._split_pattern, r" \1 "))

    def _normalize(self, texts):
        """Cleans, and lower-cases and strips accents if so: string for string as Python.

        Args:
            texts: tf.string [B].

        Returns:
            tf.string [B], valid UTF-8.
        """
        if self.do_lower_case:
            texts = tf.strings.lower(texts)  # ASCII only: bytes >= 0x80 are left alone.
        # A negated class matches valid UTF-8 only, so rows with bad bytes are mapped too.
        to_map = ~tf.strings.regex_full_match(texts, self._plain_pattern)
        return _update_rows(texts, to_map, self._map_characters)

    def _map_characters(self, texts):
        """Maps the rows that need it through the table, each the cheapest way it allows.

        Args:
            texts: tf.string [R].

        Returns:
            tf.string [R], valid UTF-8.
        """
        if not self.do_lower_case:
            return self._map_simple(texts)
        simple = tf.strings.regex_full_match(texts, self._simple_pattern)
        texts = _update_rows(texts, simple, self._map_simple)
        return _update_rows(texts, ~simple, self._map_complex)

    def _fix_words(self, texts):
        """Replaces the words FastWordpieceTokenizer would get wrong by `_placeholder`.

        Those are words longer than max_input_chars_per_word, and words holding `_foreign`
        characters: both are "[UNK]" in the original.

        Args:
            texts: tf.string [R], normalized.

        Returns:
            tf.string [R], with spaces around punctuation and CJK ideographs.
        """
        texts = tf.strings.regex_replace(texts, self._split_pattern, r" \1 ")
        texts = tf.strings.regex_replace(texts, self._long_word_pattern, self._placeholder)
        if self._foreign_word_pattern:
            texts = tf.strings.regex_replace(
                texts, self._foreign_word_pattern, self._placeholder)
        return texts

    def _map_simple(self, texts):
        """Maps rows whose characters each give at most one code point, through the table.

        That is: drop NUL, U+FFFD and control characters; whitespace -> " "; and, if so, each
        character -> `unicodedata.normalize("NFD", c.lower())` without category Mn (but for
        final sigmas).

        Args:
            texts: tf.string [R], no character that gives several code points or reorders;
                invalid UTF-8 only if not do_lower_case (bad bytes decode to U+FFFD, dropped).

        Returns:
            tf.string [R].
        """
        code_points = tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
        chars = code_points.flat_values
        entries = self._entries.lookup(chars)
        values = chars + tf.bitwise.right_shift(entries, 3)
        if self.do_lower_case:
            values = tf.where(self._final_sigmas(code_points), _FINAL_SIGMA, values)
        # U+FFFD marks what is dropped: cleaning has removed every other one.
        values = tf.where(tf.bitwise.bitwise_and(entries, 3) > 0, values, 0xFFFD)
        return tf.strings.regex_replace(
            tf.strings.unicode_encode(code_points.with_flat_values(values), "UTF-8"),
            r"\x{FFFD}", "")

    def _map_complex(self, texts):
        """Maps any rows: as `_map_simple`, and bad bytes, several code points, reordering.

        Args:
            texts: tf.string [R].

        Returns:
            tf.string [R].
        """
        code_points = tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD)  # U+FFFD is dropped.
        entries = self._entries.lookup(code_points.flat_values)
        return tf.cond(
            tf.reduce_any(tf.bitwise.bitwise_and(entries, _REORDERS) > 0),
            lambda: self._map_in_canonical_order(code_points),
            lambda: self._map_expanding(code_points, entries))

    def _map_expanding(self, code_points, entries):
        """Maps each character to up to `_MAX_LENGTH` code points through the table.

        Args:
            code_points: tf.RaggedTensor int32 [R, (N)], no character marked `_REORDERS`.
            entries: int32 [N], the table entries of `code_points.flat_values`.

        Returns:
            tf.string [R].
        """
        chars = code_points.flat_values
        lengths = tf.bitwise.bitwise_and(entries, 3)
        base = tf.bitwise.right_shift(entries, 3)
        values = tf.where(self._final_sigmas(code_points), _FINAL_SIGMA, chars + base)
        # The code points of characters that give several; garbage elsewhere, and unused.
        last = tf.size(self._kept_items) - 1
        more = [tf.gather(self._kept_items, tf.clip_by_value(base + i, 0, last))
                for i in range(_MAX_LENGTH)]
        values = tf.where(lengths > 1, more[0], values)
        values = tf.boolean_mask(tf.stack([values] + more[1:], axis=1),
                                 tf.sequence_mask(lengths, _MAX_LENGTH))  # [M]
        ends = tf.concat([[0], tf.cumsum(tf.cast(lengths, tf.int64))], axis=0)
        mapped = tf.RaggedTensor.from_row_splits(values, tf.gather(ends, code_points.row_splits))
        return tf.strings.unicode_encode(mapped, "UTF-8")

    def _map_in_canonical_order(self, code_points):
        """The mapping in full: NFD with marks, canonical reordering, then marks dropped.

        Args:
            code_points: tf.RaggedTensor int32 [R, (N)].

        Returns:
            tf.string [R].
        """
        chars = code_points.flat_values
        char_rows = code_points.value_rowids()
        expansion = self._expansions.lookup(chars)
        offsets = tf.bitwise.right_shift(expansion, 3)
        items = tf.ragged.range(offsets, offsets + tf.bitwise.bitwise_and(expansion, 7))
        item_ids = items.flat_values  # [M]
        source = items.value_rowids()  # [M]: the character of each item
        values = tf.gather(self._item_value, item_ids)
        values = tf.where(values < 0, tf.gather(chars, source), values)
        final_sigmas = self._final_sigmas(code_points)
        values = tf.where(tf.gather(final_sigmas, source), _FINAL_SIGMA, values)
        keep = tf.gather(self._item_keep, item_ids)
        rows = tf.gather(char_rows, source)
        values, keep = _canonical_order(values, keep, tf.gather(self._item_ccc, item_ids), rows)
        mapped = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(values, keep), tf.boolean_mask(rows, keep),
            nrows=code_points.nrows())
        return tf.strings.unicode_encode(mapped, "UTF-8")

    def _final_sigmas(self, code_points):
        """Marks the capital sigmas that Python's `str.lower` turns into final "ς".

        Those are where, within its string and skipping case-ignorable characters, a cased
        character precedes the sigma and none follows it. The look-around is tried within
        `_SIGMA_WINDOW` characters first; only if that does not decide every sigma is it done
        over whole strings.

        Args:
            code_points: tf.RaggedTensor int32 [R, (N)].

        Returns:
            bool [N], for `code_points.flat_values`.
        """
        chars = code_points.flat_values
        is_sigma = tf.equal(chars, _CAPITAL_SIGMA)

        def final_sigmas():
            sigmas = tf.where(is_sigma)[:, 0]  # [S]
            rows = tf.searchsorted(code_points.row_splits, sigmas, side="right") - 1
            decided, final = self._final_sigmas_nearby(
                chars, sigmas, tf.gather(code_points.row_splits, rows),
                tf.gather(code_points.row_splits, rows + 1))
            return tf.cond(
                tf.reduce_all(decided),
                lambda: tf.scatter_nd(sigmas[:, tf.newaxis], final,
                                      tf.shape(chars, out_type=tf.int64)),
                lambda: self._final_sigmas_everywhere(code_points, is_sigma))

        return tf.cond(tf.reduce_any(is_sigma), final_sigmas, lambda: tf.zeros_like(is_sigma))

    def _final_sigmas_nearby(self, chars, sigmas, starts, limits):
        """The final-sigma rule, looking at most `_SIGMA_WINDOW` characters each way.

        Args:
            chars: int32 [N].
            sigmas: int64 [S], the positions of capital sigmas in `chars`.
            starts, limits: int64 [S], the bounds of each sigma's string in `chars`.

        Returns:
            (decided, final), bool [S]: whether the window held a character that is not
            case-ignorable (or the string's end) on both sides, and the rule's answer.
        """
        steps = tf.range(1, _SIGMA_WINDOW + 1, dtype=tf.int64)

        def nearest(positions, inside):  # [S, window] each
            context = self._contexts.lookup(tf.gather(
                chars, tf.clip_by_value(positions, 0, tf.size(chars, out_type=tf.int64) - 1)))
            context = tf.where(inside, context, _OTHER)  # a string's end counts as uncased
            stops = tf.not_equal(context, _CASE_IGNORABLE)
            first = tf.argmax(tf.cast(stops, tf.int32), axis=1, output_type=tf.int32)
            cased = tf.equal(tf.gather(context, first[:, tf.newaxis], batch_dims=1)[:, 0],
                             _CASED)
            return tf.reduce_any(stops, axis=1), cased

        before = sigmas[:, tf.newaxis] - steps
        after = sigmas[:, tf.newaxis] + steps
        decided_before, cased_before = nearest(before, before >= starts[:, tf.newaxis])
        decided_after, cased_after = nearest(after, after < limits[:, tf.newaxis])
        return decided_before & decided_after, cased_before & ~cased_after

    def _final_sigmas_everywhere(self, code_points, is_sigma):
        """`_final_sigmas` over whole strings, however many case-ignorable characters there are.

        Args:
            code_points: tf.RaggedTensor int32 [R, (N)].
            is_sigma: bool [N].

        Returns:
            bool [N].
        """
        chars = code_points.flat_values
        char_rows = code_points.value_rowids()
        context = self._contexts.lookup(chars)
        # Positions that are not case-ignorable, in order; a sigma is one of them.
        anchors = tf.where(context != _CASE_IGNORABLE)[:, 0]  # [A]
        anchor_rows = tf.gather(char_rows, anchors)
        anchor_cased = tf.equal(tf.gather(context, anchors), _CASED)
        num_anchors = tf.size(anchors, out_type=tf.int64)
        sigmas = tf.where(tf.gather(is_sigma, anchors))[:, 0]  # indices into anchors
        sigma_rows = tf.gather(anchor_rows, sigmas)

        def neighbour_cased(step):
            index = sigmas + step
            inside = (index >= 0) & (index < num_anchors)
            index = tf.clip_by_value(index, 0, num_anchors - 1)
            same_row = tf.equal(tf.gather(anchor_rows, index), sigma_rows)
            return inside & same_row & tf.gather(anchor_cased, index)

        final = neighbour_cased(-1) & ~neighbour_cased(1)  # [sigmas]
        return tf.scatter_nd(tf.gather(anchors, sigmas)[:, tf.newaxis], final,
                             tf.shape(chars, out_type=tf.int64))


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
    key = run * 256 + tf.cast(ccc, tf.int64)  # non-decreasing, except inside runs
    order = tf.argsort(key, stable=True)
    return tf.gather(values, order), tf.gather(keep, order)


def _update_rows(texts, selected, function):
    """Returns `texts` with the rows where `selected` is True replaced by `function` of them.

    Args:
        texts: tf.string [B].
        selected: bool [B].
        function: maps tf.string [R] to tf.string [R].
    """
    rows = tf.where(selected)
    return tf.cond(
        tf.size(rows) > 0,
        lambda: tf.tensor_scatter_nd_update(texts, rows, function(tf.gather_nd(texts, rows))),
        lambda: texts)


class BertInputPacker(tf.Module):
    """Packs one or two tokenized segments into BERT's fixed-length inputs, as the original.

    "[CLS] a [SEP]" or "[CLS] a [SEP] b [SEP]", padded with 0. A pair is cut by the original's
    `_truncate_seq_pair` (drop tokens from the end of the longer segment, from b when they are
    as long, until both fit in seq_length - 3); a single segment is cut to seq_length - 2. A
    second segment without tokens (an empty `text_b`) counts as none, as in `run_classifier`.
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
            dict of int32 [B, seq_length]: "input_ids", "input_mask", "token_type_ids" (0 for
            "[CLS] a [SEP]", 1 for "b [SEP]"; the records call them `segment_ids`): the inputs
            of `BertModel`, so that `model(packer(ids_a, ids_b))` runs.
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
        keep_a = tf.where(has_b, keep_a_pair, tf.minimum(length_a, self.seq_length - 2))
        keep_b = tf.where(has_b, tf.minimum(length_b, pair - keep_a_pair), 0)
        segment_a = _head(ids_a, keep_a)
        segment_b = _head(ids_b, keep_b)
        batch = tf.shape(length_a, out_type=tf.int64)[0]
        cls = tf.fill([batch, 1], self.cls_id)
        sep = tf.fill([batch, 1], self.sep_id)
        # "[SEP]" after b where some of b is left: the original tests `if tokens_b` again after
        # truncation, which empties b when seq_length is 3, or 4 with one token on each side.
        b_left = tf.cast(keep_b > 0, tf.int64)
        sep_b = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(b_left)], self.sep_id), b_left)
        input_ids = tf.concat([cls, segment_a, sep, segment_b, sep_b], axis=1)
        token_type_ids = tf.concat(
            [tf.zeros_like(cls), tf.zeros_like(segment_a), tf.zeros_like(sep),
             tf.ones_like(segment_b), tf.ones_like(sep_b)], axis=1)
        shape = [None, self.seq_length]
        return {
            "input_ids": input_ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
            "token_type_ids": token_type_ids.to_tensor(0, shape=shape),
        }


def _head(ids, lengths):
    """Returns the first `lengths[i]` tokens of each row of `ids` (RaggedTensor [B, (n)])."""
    starts = ids.row_starts()
    index = tf.ragged.range(starts, starts + lengths).flat_values
    return tf.RaggedTensor.from_row_lengths(tf.gather(ids.flat_values, index), lengths)
