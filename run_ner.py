r"""Fine-tunes BERT for named-entity recognition on CoNLL-2003-style files, as the paper
(section 4.3): WordPiece per word, the first sub-token carries the word's tag, a per-token
output layer on the final hidden states, no CRF.

  python run_ner.py --data_dir=$CONLL_DIR --vocab_file=$BERT_CASED_DIR/vocab.txt \
    --bert_config_file=$BERT_CASED_DIR/bert_config.json \
    --init_checkpoint=$BERT_CASED_DIR/bert_model.ckpt --do_lower_case=False \
    --do_train=True --do_eval=True --do_predict=True --output_dir=/tmp/ner

data_dir holds train.txt, valid.txt (or dev.txt) and test.txt: `word ... tag` per line, a
blank line between sentences. --do_eval writes eval_results.txt (conlleval's entity-level
precision, recall and F1, overall and per type) and eval_predictions.txt; --do_predict writes
test_predictions.txt: the input lines with a predicted-tag column. A sentence longer than
max_seq_length is read in overlapping windows cut at words, --doc_stride pieces apart; the
--export_dir SavedModel reads long sentences the same way.
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling.data import ner as ner_data
from modeling.runtime import cli
from modeling.tasks.ner import NerTask
from modeling.training import fine_tuning

FLAGS = flags.FLAGS
# Cased by default: the paper's NER model is BERT-Base cased.
shared_flags.define_fine_tuning_flags(do_lower_case=False)
shared_flags.define_padding_flags()
flags.DEFINE_string("data_dir", None, "Directory of train.txt, valid.txt/dev.txt, test.txt.")
flags.DEFINE_enum("tag_scheme", "auto", list(ner_data.SCHEMES), "The files' tags: IOB1, IOB2, "
                  "or detected from the training file.")
flags.DEFINE_integer("doc_stride", None, "Sentences longer than a window (max_seq_length - 2 "
                     "word pieces) are read in overlapping windows cut at words: pieces from one "
                     "window's start to the next, rounded up to a word; at least 1 and below "
                     "max_seq_length - 2. Default: half a window.")
flags.mark_flag_as_required("data_dir")
flags.adopt_module_key_flags(shared_flags)


def main(_):
    fine_tuning.run(NerTask(FLAGS.data_dir, FLAGS.tag_scheme, FLAGS.doc_stride),
                    shared_flags.fine_tuning_options())


if __name__ == "__main__":
    cli.run(main)
