"""The flags the training scripts share, with the original's names, and the options they fill.

A script calls `define_training_flags()` (pre-training) or `define_fine_tuning_flags()` (and
`define_padding_flags()` where its task can cut batches to their length), then
`flags.adopt_module_key_flags(shared_flags)` so that its --help lists them with its own; its
`main` builds the library's options with `options_from_flags()` or `fine_tuning_options()`.
No flag is read inside the library, and a script defines only the flags its run reads.
"""
from absl import flags

from modeling.runtime import compilation_cache
from modeling.training import distribution, options
from modeling.training.fine_tuning import FineTuningOptions

FLAGS = flags.FLAGS


def define_training_flags(train_batch_size=32, learning_rate=5e-5):
    """The flags of every training run: checkpoints, distribution, precision, optimizer."""
    flags.DEFINE_string("output_dir", None, "Where records, checkpoints and results go.")
    flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: an original one "
                        "(Google's, or one fine-tuned with this task's head) or one of ours.")
    define_allow_fewer_layers_flag()
    flags.DEFINE_bool("do_train", False, "Whether to train.")
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Global batch size for "
                         "training.")
    flags.DEFINE_float("learning_rate", learning_rate, "The initial learning rate for Adam.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000, "Steps in each compiled loop call.")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
    flags.DEFINE_integer("seed", 12345, "Seed of the initial weights, dropout and data "
                         "shuffling.")
    flags.DEFINE_bool("use_xla", False, "Compile the forward and backward pass with XLA.")
    flags.DEFINE_enum("precision", "float32", list(options.PRECISIONS), "Compute dtype; "
                      "variables stay float32. mixed_float16 (for GPUs) adds dynamic loss "
                      "scaling.")
    flags.DEFINE_enum("optimizer", "adamw", list(options.OPTIMIZERS), "adamw: the original's "
                      "AdamWeightDecay; lamb: LAMB, for large batches.")
    flags.DEFINE_integer("num_accumulation_steps", 1, "Split each replica's batch into this "
                         "many micro-batches and sum their gradients: the same update in less "
                         "memory.")
    flags.DEFINE_integer("parallel_micro_batches", 1, "On CPUs: split each batch into this "
                         "many parts computed side by side, each op on cores of its own "
                         "(TensorFlow's intra-op threads become cores / this, its inter-op "
                         "threads this); on 2 cores, 2 trains faster than 1.")
    flags.DEFINE_enum("distribution_strategy", "one_device", list(distribution.STRATEGIES),
                      "one_device, mirrored (all local GPUs), multi_worker_mirrored "
                      "(TF_CONFIG) or tpu.")
    flags.DEFINE_bool("use_tpu", False, "Whether to use a TPU (same as "
                      "--distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
    flags.DEFINE_string("gcp_project", None, "Project of the Cloud TPU.")
    flags.DEFINE_string("master", None, "TPU address, instead of --tpu_name.")
    flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores expected (checked against the TPU).")
    flags.DEFINE_bool("allow_untrained", False, "Evaluate or predict even when the weights "
                      "never came from a checkpoint or from training (a random model's results).")
    flags.DEFINE_float("progress_seconds", 30.0, "Log training progress (step, loss, learning "
                       "rate, examples/s, elapsed, ETA) this often, whatever "
                       "--iterations_per_loop; and that of evaluation and prediction "
                       "(examples, examples/s, ETA) when they take longer.")
    flags.DEFINE_string("xla_cache_dir", compilation_cache.default_directory(),
                        "Keep what XLA compiles for training, and the traced training loop, "
                        "here (a directory per TensorFlow version and CPU), so that later runs "
                        "on this machine of the same code and settings skip compiling and "
                        "tracing them; past 2 GB the oldest entries go. Empty: no cache.")
    flags.mark_flag_as_required("output_dir")


def define_allow_fewer_layers_flag():
    """The opt-in of every script with --init_checkpoint to a model cut short."""
    flags.DEFINE_bool("allow_fewer_layers", False, "Let the config's num_hidden_layers be "
                      "fewer than --init_checkpoint's encoder layers: the model starts from "
                      "the checkpoint's first layers and the rest are dropped (logged). "
                      "Without it such a config is refused.")


def define_fine_tuning_flags(max_seq_length=128, train_batch_size=32, learning_rate=5e-5,
                             do_lower_case=True, with_eval=True):
    """The training flags plus those every fine-tuning script has, with the script's
    defaults; bert_config_file, vocab_file and output_dir are required."""
    define_training_flags(train_batch_size, learning_rate)
    flags.DEFINE_string("bert_config_file", None, "The config json file of the model.")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
    flags.DEFINE_bool("do_lower_case", do_lower_case, "Lower-case the input (uncased models).")
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Tokens per sequence after "
                         "WordPiece, [CLS] and [SEP]; longer input is cut, shorter padded.")
    flags.DEFINE_bool("do_predict", False, "Whether to predict the test set.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predict.")
    if with_eval:
        flags.DEFINE_bool("do_eval", False, "Whether to evaluate on the dev set.")
        flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training for linear warm-up.")
    flags.DEFINE_string("export_dir", None, "Write a SavedModel for TF Serving to "
                        "export_dir/<version>/ (after training, or from a checkpoint alone).")
    for name in ("bert_config_file", "vocab_file"):
        flags.mark_flag_as_required(name)


def define_padding_flags():
    """How batches are padded: the flags of the fine-tuning scripts whose task ignores the
    padded positions (`fine_tuning.Task.PADDING_IS_INERT`); the others pad as the original."""
    flags.DEFINE_bool("dynamic_padding", True, "Pad each batch to its longest example "
                      "(rounded up to --padding_multiple) instead of --max_seq_length: less "
                      "computation, the same predictions from the same weights. false: fixed "
                      "shapes, as the original (always on TPUs).")
    flags.DEFINE_integer("padding_multiple", None,
                         "With --dynamic_padding: batch lengths are rounded up to a multiple "
                         "of this, so that few shapes get compiled. Default: 16 with --use_xla, "
                         "8 on a GPU, else 1 (exact).")
    flags.DEFINE_bool("bucket_by_length", False, "With --dynamic_padding: training batches "
                      "group examples of similar length (less padding still, but it changes "
                      "which examples train together).")


def options_from_flags(option_class):
    """An `option_class` (a dataclass of TrainingOptions' kind) filled from the flags of its
    fields' names; fields without a flag keep their defaults."""
    fields = option_class.__dataclass_fields__
    return option_class(**{name: FLAGS[name].value for name in fields if name in FLAGS})


def fine_tuning_options():
    return options_from_flags(FineTuningOptions)
