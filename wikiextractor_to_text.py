r"""Turns WikiExtractor's `<doc>` files into create_pretraining_data.py's input.

  python wikiextractor_to_text.py --input_file='enwiki/AA/wiki_*' --output_file=enwiki.txt

One sentence per line, a blank line between articles; the `<doc>` tags and titles are
dropped, paragraphs split into sentences at their end punctuation.
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

import os

from absl import flags, logging

from modeling.runtime import cli, files
from modeling.data import pretraining_pipeline, wikiextractor

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "WikiExtractor output: comma-separated files or globs, "
                    "read in the order create_pretraining_data.py reads them.")
flags.DEFINE_string("output_file", None, "The text file to write.")
flags.mark_flag_as_required("input_file")
flags.mark_flag_as_required("output_file")


def main(_):
    paths = pretraining_pipeline.expand_input_patterns(FLAGS.input_file)
    files.check_outputs([FLAGS.output_file], paths)
    # Every input is checked whole before anything is written.
    text = []
    for path in paths:
        lines = (line for line, _ in pretraining_pipeline.read_lines(
            pretraining_pipeline.whole_files([path])))
        text.extend(wikiextractor.to_pretraining_lines(lines, path))
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_file)), exist_ok=True)
    with files.atomic_write(FLAGS.output_file) as writer:
        writer.write("".join(line + "\n" for line in text))
    logging.info("Wrote %d documents, %d sentences to %s", text.count(""),
                 len(text) - text.count(""), FLAGS.output_file)


if __name__ == "__main__":
    cli.run(main)
