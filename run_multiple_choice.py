r"""Fine-tunes BERT on SWAG-style multiple choice, as the paper (section 4.4): each
(context, ending) pair is one "[CLS] context [SEP] ending [SEP]" sequence, a vector scores
each pooled output, and a softmax runs over the four choices.

  python run_multiple_choice.py --data_dir=$SWAG_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True --do_eval=True \
    --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag

data_dir holds train.csv, val.csv and test.csv (SWAG's columns sent1, sent2, ending0..3,
label). --do_eval writes eval_results.txt (accuracy), --do_predict test_results.tsv: per test
example its id and the four probabilities.
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling.runtime import cli
from modeling.tasks.multiple_choice import MultipleChoiceTask
from modeling.training import fine_tuning

FLAGS = flags.FLAGS
# The paper's SWAG settings: batch 16, learning rate 2e-5.
shared_flags.define_fine_tuning_flags(train_batch_size=16, learning_rate=2e-5)
shared_flags.define_padding_flags()
flags.DEFINE_string("data_dir", None, "Directory of train.csv, val.csv, test.csv.")
flags.mark_flag_as_required("data_dir")
flags.adopt_module_key_flags(shared_flags)


def main(_):
    fine_tuning.run(MultipleChoiceTask(FLAGS.data_dir), shared_flags.fine_tuning_options())


if __name__ == "__main__":
    cli.run(main)
