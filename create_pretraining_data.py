r"""Creates masked-LM / next-sentence TFRecords, exactly as the original for the same seed.

  python create_pretraining_data.py --input_file=./sample_text.txt \
    --output_file=/tmp/tf_examples.tfrecord --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --do_lower_case=True --max_seq_length=128 --max_predictions_per_seq=20 \
    --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Input: one sentence per line, a blank line between documents. With the default
--num_workers=1 and no streaming, the records equal the original's; --num_workers and
--streaming_chunk_mb trade that identity for speed and bounded memory (see README).
--pretraining_objective and --mask_proportions make the records of the paper's ablations
(docs/paper_ablations.md).
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags, logging

from modeling.data import pretraining, pretraining_pipeline
from modeling.runtime import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of files "
                    "and globs).")
flags.DEFINE_string("output_file", None, "Output TFRecord file (or comma-separated list of files;"
                    " instances go round-robin across them).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be True "
                  "for uncased models and False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whether to mask all of the wordpieces of a word "
                  "at once, rather than each wordpiece on its own.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions "
                     "per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with "
                     "different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_list("mask_proportions", ["80", "10", "10"], "Of the positions chosen for "
                  "prediction, the percentages replaced by [MASK], kept unchanged and replaced "
                  "by a random token (the paper's Table 8; any three summing to 100). The "
                  "default, the original's 80,10,10, gives the original's records.")
flags.DEFINE_enum("pretraining_objective", "mlm_nsp", ["mlm_nsp", "mlm", "ltr"],
                  "What the records are for. mlm_nsp: the original's masked LM and next "
                  "sentence. mlm: the paper's \"No NSP\" ablation, masked LM alone, A and B "
                  "always contiguous text and no next_sentence_labels. ltr: its \"LTR & No "
                  "NSP\" ablation, the same text unmasked, for a left-to-right model that "
                  "predicts every next token (run_pretraining.py --pretraining_objective=ltr).")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are shorter "
                   "than the maximum length.")
flags.DEFINE_integer("num_workers", 1, "Processes to spread the documents over. 1 gives the "
                     "original's output; N > 1 gives a different output, fixed for each N.")
flags.DEFINE_float("streaming_chunk_mb", 0, "If > 0, process the input in chunks of about this "
                   "many MB (cut at document breaks), so that memory stays bounded whatever the "
                   "corpus size. Random-next sentences and the shuffle stay within a chunk. The "
                   "output is fixed for a given chunk size, whatever --num_workers.")
for _name in ("input_file", "output_file", "vocab_file"):
    flags.mark_flag_as_required(_name)


def mask_proportions(values):
    """--mask_proportions's three values as numbers; a ValueError naming the flag if not."""
    try:
        proportions = tuple(float(value) for value in values)
    except ValueError:
        proportions = ()
    if len(proportions) != 3:
        raise ValueError(f"--mask_proportions={','.join(values)}: expected three percentages "
                         f"MASK,SAME,RND summing to 100, such as 80,10,10")
    return proportions


def main(_):
    if FLAGS.pretraining_objective == "ltr":
        masking = [f"--{name}" for name in ("masked_lm_prob", "do_whole_word_mask",
                                            "mask_proportions") if FLAGS[name].present]
        if masking:
            raise ValueError(f"--pretraining_objective=ltr predicts every next token and "
                             f"masks none: {', '.join(masking)} do not apply")
    options = pretraining.InstanceOptions(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
        do_whole_word_mask=FLAGS.do_whole_word_mask,
        mask_proportions=mask_proportions(FLAGS.mask_proportions),
        objective=FLAGS.pretraining_objective)
    wanted = round(FLAGS.max_seq_length * FLAGS.masked_lm_prob)
    if wanted > FLAGS.max_predictions_per_seq:
        logging.warning("max_predictions_per_seq=%d caps the masked positions below "
                        "max_seq_length x masked_lm_prob = %d for full sequences (the original "
                        "caps silently; so does this run)", FLAGS.max_predictions_per_seq, wanted)
    documents, instances = pretraining_pipeline.create_pretraining_data(
        FLAGS.input_file, FLAGS.output_file, FLAGS.vocab_file, FLAGS.do_lower_case, options,
        FLAGS.random_seed, FLAGS.dupe_factor, num_workers=FLAGS.num_workers,
        chunk_bytes=int(FLAGS.streaming_chunk_mb * 1e6))
    logging.info("Wrote %d instances from %d documents to %s", instances, documents,
                 FLAGS.output_file)


if __name__ == "__main__":
    cli.run(main)
