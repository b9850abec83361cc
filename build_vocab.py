"""Learns a WordPiece vocab.txt from a corpus, in the layout of Google's vocabularies.

  python build_vocab.py --input_file=corpus.txt --output_file=vocab.txt --vocab_size=30522

The original release sent users elsewhere for this. Words are split exactly as the original
tokenizer splits them (so use the same --do_lower_case when tokenizing later); pieces are
learned by tensorflow-text's WordPiece learner. The output starts [PAD], [unused0..98], [UNK],
[CLS], [SEP], [MASK], [unused99..], then the learned pieces.
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

import os

from absl import flags, logging

from modeling.data import pretraining_pipeline
from modeling.runtime import cli, files
from modeling.text import tokenization, vocab_learning
from modeling.training import options

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file(s): comma-separated files or globs.")
flags.DEFINE_string("output_file", None, "The vocab.txt to write.")
flags.DEFINE_integer("vocab_size", 30522, "Size of the vocabulary, special and unused included.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased models).")
flags.DEFINE_integer("num_unused", 994, "[unusedN] slots, as Google's uncased vocabulary has.")
flags.DEFINE_integer("min_count", 10, "Lowest word count the learner's threshold may go to; "
                     "1 for tiny corpora.")
flags.DEFINE_integer("max_unique_chars", 1000, "Alphabet size; words with rarer characters are "
                     "left out (raise it for CJK corpora).")
flags.mark_flag_as_required("input_file")
flags.mark_flag_as_required("output_file")


def main(_):
    for name in ("vocab_size", "min_count", "max_unique_chars"):
        options.require_positive(name, FLAGS[name].value)
    options.require_non_negative("num_unused", FLAGS.num_unused)
    paths = pretraining_pipeline.expand_input_patterns(FLAGS.input_file)
    files.check_outputs([FLAGS.output_file], paths)
    lines = (text for text, _ in pretraining_pipeline.read_lines(
        pretraining_pipeline.whole_files(paths)))
    counts = vocab_learning.count_words(lines, FLAGS.do_lower_case)
    logging.info("%d distinct words in %d files", len(counts), len(paths))
    vocab = vocab_learning.learn_vocabulary(counts, FLAGS.vocab_size, FLAGS.num_unused,
                                            FLAGS.min_count, FLAGS.max_unique_chars)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_file)), exist_ok=True)
    with files.atomic_write(FLAGS.output_file) as writer:
        writer.write("".join(token + "\n" for token in vocab))
        writer.flush()
        tokenization.FullTokenizer(writer.name, FLAGS.do_lower_case)  # it must load
    logging.info("Wrote %d tokens to %s", len(vocab), FLAGS.output_file)


if __name__ == "__main__":
    cli.run(main)
