"""What every training run takes, under the original's flag names, and the checks on it.

The scripts fill these from their flags; a library user fills them by hand. A check that fails
raises a one-line ValueError naming the flag and the value, before any work starts.
"""
import dataclasses
import os

from modeling.runtime import compilation_cache, files
from modeling.training import checkpoint_dir, distribution

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
OPTIMIZERS = ("adamw", "lamb")
# Where a training run writes its model in the original format, under output_dir.
ORIGINAL_CHECKPOINT_DIR = "export"


@dataclasses.dataclass(kw_only=True)
class TrainingOptions:
    """The options pre-training and fine-tuning share."""
    output_dir: str
    init_checkpoint: str = None
    allow_fewer_layers: bool = False
    do_train: bool = False
    do_eval: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    keep_checkpoint_max: int = 5
    seed: int = 12345
    use_xla: bool = False
    precision: str = "float32"
    optimizer: str = "adamw"
    num_accumulation_steps: int = 1
    parallel_micro_batches: int = 1
    distribution_strategy: str = "one_device"
    use_tpu: bool = False
    tpu_name: str = None
    tpu_zone: str = None
    gcp_project: str = None
    master: str = None
    num_tpu_cores: int = 8
    allow_untrained: bool = False
    progress_seconds: float = 30.0
    xla_cache_dir: str = dataclasses.field(default_factory=compilation_cache.default_directory)

    POSITIVE = ("train_batch_size", "eval_batch_size", "save_checkpoints_steps",
                "iterations_per_loop", "keep_checkpoint_max", "num_accumulation_steps",
                "parallel_micro_batches", "num_tpu_cores")
    INPUT_FILES = ()  # the options that name a file the run reads
    OUTPUT_DIRS = ("output_dir",)  # the options that name a directory the run writes, if set

    def check(self):
        """Raises ValueError naming the first option out of range, else the first input that
        cannot be read or output that cannot be written, or the checkpoints a training run
        would resume from being of another batch size: before any work, so that no run fails
        at its end for a path it was given at its start."""
        self.check_values()
        for name in self.INPUT_FILES:
            files.check_input(getattr(self, name), f"--{name}")
        for name in self.OUTPUT_DIRS:
            if getattr(self, name):
                files.check_writable_directory(getattr(self, name), f"--{name}")
        if self.do_train:
            files.check_writable_directory(
                os.path.join(self.output_dir, ORIGINAL_CHECKPOINT_DIR), "--output_dir",
                self.output_dir)
            resumed = checkpoint_dir.on_disk(self.output_dir)
            if resumed:
                checkpoint_dir.check_batch_size(resumed[-1], self.train_batch_size)

    def check_values(self):
        """The checks of the values alone, no path touched; a subclass adds its own."""
        for name in self.POSITIVE:
            require_positive(name, getattr(self, name))
        parts = self.num_accumulation_steps * self.parallel_micro_batches
        if self.do_train and self.train_batch_size % parts:  # the replicas' share: later
            raise ValueError(f"--train_batch_size={self.train_batch_size} is not divisible by "
                             f"--num_accumulation_steps={self.num_accumulation_steps} x "
                             f"--parallel_micro_batches={self.parallel_micro_batches}")
        if not self.progress_seconds > 0:
            raise ValueError(f"--progress_seconds must be positive, got {self.progress_seconds}")
        if not self.learning_rate > 0:
            raise ValueError(f"--learning_rate must be positive, got {self.learning_rate}")
        require_choice("precision", self.precision, PRECISIONS)
        require_choice("optimizer", self.optimizer, OPTIMIZERS)
        require_choice("distribution_strategy", self.distribution_strategy,
                       distribution.STRATEGIES)
        if self.distribution_strategy == "multi_worker_mirrored" and not self.use_tpu:
            distribution.check_tf_config()

    def trainer_options(self):
        """The keyword arguments of `Trainer` these options set."""
        return {"use_xla": self.use_xla, "seed": self.seed, "optimizer": self.optimizer,
                "num_accumulation_steps": self.num_accumulation_steps,
                "parallel_micro_batches": self.parallel_micro_batches,
                "progress_seconds": self.progress_seconds,
                "loop_cache_dir": compilation_cache.loops_directory(self.xla_cache_dir)}

    def strategy(self):
        """The strategy the options name (first of all TensorFlow work: multi-worker
        collectives are set up at start-up), with their precision set for later models."""
        from modeling.training import trainer
        chosen = distribution.get_strategy(
            "tpu" if self.use_tpu else self.distribution_strategy, self.tpu_name,
            self.tpu_zone, self.gcp_project, self.master)
        from absl import logging
        if self.use_tpu and chosen.num_replicas_in_sync != self.num_tpu_cores:
            logging.warning("--num_tpu_cores=%d but the TPU has %d cores; using %d",
                            self.num_tpu_cores, chosen.num_replicas_in_sync,
                            chosen.num_replicas_in_sync)
        if chosen.num_replicas_in_sync > 1:  # TensorFlow's own line is an INFO of its: quiet
            logging.info("%s with %d replicas: %s", type(chosen).__name__,
                         chosen.num_replicas_in_sync,
                         ", ".join(getattr(chosen.extended, "worker_devices", ())))
        trainer.set_precision(self.precision)
        if (self.precision == "mixed_bfloat16" and distribution.on_cpus(chosen)
                and distribution.cpu_lacks_bfloat16()):
            logging.warning("--precision=mixed_bfloat16 on a CPU without bfloat16 instructions "
                            "(none of %s in /proc/cpuinfo): its bfloat16 matmuls are emulated, "
                            "slower than float32's; --precision=float32 trains faster here",
                            ", ".join(distribution.BFLOAT16_CPU_FLAGS))
        return chosen

    def check_train_batch(self, strategy, batch_size_option="train_batch_size"):
        """Raises ValueError unless the global batch splits over replicas and micro-batches."""
        batch_size = getattr(self, batch_size_option)
        replicas = strategy.num_replicas_in_sync
        if batch_size % (replicas * self.num_accumulation_steps * self.parallel_micro_batches):
            raise ValueError(f"--{batch_size_option}={batch_size} is not divisible by "
                             f"{replicas} replicas x --num_accumulation_steps="
                             f"{self.num_accumulation_steps} x --parallel_micro_batches="
                             f"{self.parallel_micro_batches}")


def require_positive(name, value):
    if value is None or value <= 0:
        raise ValueError(f"--{name} must be positive, got {value}")


def require_non_negative(name, value):
    if value is None or value < 0:
        raise ValueError(f"--{name} must not be negative, got {value}")


def require_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"--{name}={value} is not one of {', '.join(choices)}")


def check_max_seq_length(max_seq_length, config, config_file, least=3):
    """Raises ValueError unless `least` <= max_seq_length <= the config's position table."""
    if not least <= max_seq_length <= config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={max_seq_length} must be between {least} and "
                         f"max_position_embeddings {config.max_position_embeddings} of "
                         f"{config_file}")


def refuse_untrained(options, missing, action):
    """Refuses to evaluate or predict with weights that never came from a checkpoint or from
    training (the results would be a random model's), unless --allow_untrained asks for it."""
    if missing and not options.allow_untrained:
        raise ValueError(f"Nothing to {action} with: --output_dir={options.output_dir} holds no "
                         f"checkpoint and --init_checkpoint={options.init_checkpoint} lacks "
                         f"{', '.join(missing)}; train with --do_train first, or pass "
                         f"--allow_untrained to {action} random weights")


def check_vocabulary(tokenizer, config, vocab_file, config_file):
    """Raises ValueError unless the vocabulary has the config's vocab_size tokens."""
    if len(tokenizer.vocab) != config.vocab_size:
        raise ValueError(f"{vocab_file} has {len(tokenizer.vocab)} tokens but {config_file} "
                         f"says vocab_size={config.vocab_size}")
