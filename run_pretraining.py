r"""Pre-trains BERT (masked LM + next sentence) on tf.distribute, as the original script.

  python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
    --do_train=True --do_eval=True --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --train_batch_size=32 \
    --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=20 \
    --num_warmup_steps=10 --learning_rate=2e-5

Checkpoints go to --output_dir every --save_checkpoints_steps; a run started on a directory
that holds them resumes from the latest (weights, Adam slots, step and data position). The
trained model is also written as an original checkpoint, output_dir/export/bert_model.ckpt.
--pretraining_objective trains the paper's ablations instead (docs/paper_ablations.md).
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling.runtime import cli
from modeling.tasks import pretraining

FLAGS = flags.FLAGS
shared_flags.define_training_flags()
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the input files.")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_string("bert_config_file", None, "The config json file of the pre-trained model.")
flags.DEFINE_string("input_file", None, "Input TF example files (comma-separated files/globs).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval batches.")
flags.DEFINE_enum("pretraining_objective", "mlm_nsp", ["mlm_nsp", "mlm", "ltr"],
                  "mlm_nsp: the original's masked LM and next sentence. mlm: the paper's \"No "
                  "NSP\" ablation, the masked LM alone. ltr: its \"LTR & No NSP\" ablation, a "
                  "left-to-right LM (causal attention, every next token predicted; "
                  "export/bert_config.json gets causal_attention, which fine-tuning keeps). "
                  "The records must be create_pretraining_data.py's for the same objective.")
for _name in ("bert_config_file", "input_file"):
    flags.mark_flag_as_required(_name)
flags.adopt_module_key_flags(shared_flags)


def main(_):
    pretraining.run(shared_flags.options_from_flags(pretraining.PretrainingOptions))


if __name__ == "__main__":
    cli.run(main)
