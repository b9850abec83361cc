r"""Fine-tunes BERT on SQuAD v1.1 or v2.0, predicts, scores and exports, as the original.

  python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True \
    --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 \
    --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

--do_predict writes predictions.json, nbest_predictions.json (and null_odds.json for v2.0)
and, when the predict file has answers, eval_results.json with the official metric.
--export_dir writes a numbered SavedModel with token-id and raw-text signatures.
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling.runtime import cli
from modeling.tasks.squad import SquadTask
from modeling.training import fine_tuning

FLAGS = flags.FLAGS
shared_flags.define_fine_tuning_flags(max_seq_length=384, with_eval=False)
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_integer("doc_stride", 128, "How far apart consecutive document windows start; "
                     "given, it must be below the window's free length (max_seq_length - "
                     "max_query_length - 3), so that windows overlap.")
flags.DEFINE_integer("max_query_length", 64, "Questions are truncated to this many tokens.")
flags.DEFINE_integer("n_best_size", 20, "Candidates kept in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("verbose_logging", False, "Log the alignment failures of post-processing.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "Predict no answer when the null score "
                   "beats the best span by more than this.")
flags.adopt_module_key_flags(shared_flags)

_TASK_FLAGS = ("train_file", "predict_file", "doc_stride", "max_query_length", "n_best_size",
               "max_answer_length", "version_2_with_negative", "null_score_diff_threshold",
               "verbose_logging")


def main(_):
    task = SquadTask(**{name: FLAGS[name].value for name in _TASK_FLAGS
                        if name != "doc_stride" or FLAGS[name].present})
    fine_tuning.run(task, shared_flags.fine_tuning_options())


if __name__ == "__main__":
    cli.run(main)
