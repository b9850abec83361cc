r"""Fine-tunes BERT on a GLUE task or XNLI, evaluates, predicts and exports, as the original.

  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/ --export_dir=/tmp/mrpc_serving

Features are written to output_dir as train/eval/predict.tf_record; checkpoints every
--save_checkpoints_steps, and a run on a directory that holds them resumes from the latest.
--do_eval writes eval_results.txt, --do_predict test_results.tsv, and --export_dir a numbered
SavedModel for TF Serving with raw-text and token-id signatures.
"""
from modeling import quiet

quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling import cli
from modeling.data import classifier as classifier_data
from modeling.tasks.classifier import ClassifierTask
from modeling.training import fine_tuning

FLAGS = flags.FLAGS
shared_flags.define_fine_tuning_flags()
flags.DEFINE_string("data_dir", None, "The task's data directory (.tsv files).")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(sorted(classifier_data.PROCESSORS))
                    + " (case-insensitive).")
for _name in ("data_dir", "task_name"):
    flags.mark_flag_as_required(_name)
flags.adopt_module_key_flags(shared_flags)


def main(_):
    fine_tuning.run(ClassifierTask(FLAGS.data_dir, FLAGS.task_name),
                    shared_flags.fine_tuning_options())


if __name__ == "__main__":
    cli.run(main)
