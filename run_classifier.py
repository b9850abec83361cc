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

Single-text tasks read documents of any length with --doc_stride: each document is all its
windows of max_seq_length - 2 pieces, trained with the document's label; eval, predict and the
export aggregate them (--window_aggregation) into one prediction per document. Without it,
a longer text is cut to one window (--truncation: its head, as the original, or head+tail).
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling.data import classifier as classifier_data, windows
from modeling.runtime import cli
from modeling.tasks.classifier import classifier_task
from modeling.training import fine_tuning

FLAGS = flags.FLAGS
shared_flags.define_fine_tuning_flags()
shared_flags.define_padding_flags()
flags.DEFINE_string("data_dir", None, "The task's data directory (.tsv files; for "
                    "hyperpartisan, the by-article XML files).")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(sorted(classifier_data.PROCESSORS))
                    + " (case-insensitive).")
flags.DEFINE_integer("doc_stride", None, "Single-text tasks: read each document as all its "
                     "windows of --max_seq_length - 2 word pieces, this many pieces apart "
                     "(at least 1, below the window's length); one prediction per document. "
                     "Unset: one window, cut by --truncation.")
flags.DEFINE_enum("window_aggregation", None, list(windows.AGGREGATIONS), "With --doc_stride: "
                  "a document's probabilities are the mean of its windows' (the default), or "
                  "the softmax of each class's largest logit over them (max).")
flags.DEFINE_enum("truncation", "head", list(windows.TRUNCATIONS), "Without --doc_stride, a "
                  "longer text keeps its first pieces (head, the original) or, for single "
                  "texts, its first quarter and last three quarters of a window (head_tail: the "
                  "first 128 and last 382 of 510, Sun et al. 2019).")
for _name in ("data_dir", "task_name"):
    flags.mark_flag_as_required(_name)
flags.adopt_module_key_flags(shared_flags)


def main(_):
    task = classifier_task(FLAGS.data_dir, FLAGS.task_name, FLAGS.doc_stride,
                           FLAGS.window_aggregation, FLAGS.truncation)
    fine_tuning.run(task, shared_flags.fine_tuning_options())


if __name__ == "__main__":
    cli.run(main)
