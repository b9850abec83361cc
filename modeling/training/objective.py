"""What a `Trainer` trains: a model and the loss it minimizes, with the metrics logged beside.

A fine-tuning task (`fine_tuning.Task`) and each pre-training objective are `Objective`s; the
one `Trainer` builds the objective's model, calls its loss in the step it compiles, and logs
its metrics.
"""
import tensorflow as tf

SUM = tf.distribute.ReduceOp.SUM


class Objective:
    """A model and its loss over the global batch, for `Trainer`.

    METRICS: names of the per-step values summed over a loop ("loss" among them).
    """
    METRICS = ("loss",)

    def build_model(self, config):
        """The Keras model of this objective for a `BertConfig`, built under the trainer's
        strategy scope."""
        raise NotImplementedError

    def global_counts(self, batch):
        """All-reduced counts the loss is normalized by: by default the global batch size.
        (A sync point, so it stays outside any nested, possibly XLA-compiled, function.)"""
        context = tf.distribute.get_replica_context()
        return (context.all_reduce(SUM, tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)),)

    def replica_loss(self, outputs, batch, *counts):
        """Returns (this replica's share of the global loss, dict of METRICS but "loss")."""
        raise NotImplementedError

    def loop_scalars(self, totals, steps):
        """What a loop of `steps` steps logs, from the METRICS summed over it."""
        return {"loss": totals["loss"] / steps}
