"""Pre-training: the masked-LM and next-sentence losses and metrics on the shared `Trainer`."""
import tensorflow as tf

from modeling import checkpoint
from modeling.heads import MASKED_LM_LOSS_EPSILON, BertPretrainer
from modeling.training import SUM, Trainer, shard_by_data

EVAL_KEYS = ("global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
             "next_sentence_accuracy", "next_sentence_loss")


class Pretrainer(Trainer):
    """Trains a `BertPretrainer` as the original `run_pretraining.py`."""
    METRICS = ("loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_weight", "mlm_loss_sum",
               "nsp_correct", "nsp_loss_sum", "examples")

    # A converted Hugging Face masked-LM model has neither pooler nor next-sentence head;
    # they start at random, as transformers starts them in BertForPreTraining.
    OPTIONAL_VARIABLES = checkpoint.POOLER + ("cls/seq_relationship/output_weights",
                                              "cls/seq_relationship/output_bias")

    def build_model(self, config):
        return BertPretrainer(config)

    def global_counts(self, batch):
        """Σ masked-LM weights and the number of examples over all replicas."""
        context = tf.distribute.get_replica_context()
        weights = batch["masked_lm_weights"]
        return (context.all_reduce(SUM, tf.reduce_sum(weights)),
                context.all_reduce(SUM, tf.cast(tf.shape(weights)[0], tf.float32)))

    def replica_loss(self, outputs, batch, global_weight, global_batch):
        """This replica's share of the global losses, and its metric counts."""
        weights = batch["masked_lm_weights"]
        mlm_loss = (tf.reduce_sum(weights * outputs["masked_lm_example_loss"])
                    / (global_weight + MASKED_LM_LOSS_EPSILON))
        nsp_loss = tf.reduce_sum(outputs["next_sentence_example_loss"]) / global_batch
        mlm_predictions = tf.argmax(outputs["masked_lm_log_probs"], -1, output_type=tf.int32)
        nsp_predictions = tf.argmax(outputs["next_sentence_log_probs"], -1, output_type=tf.int32)
        labels = tf.reshape(batch["next_sentence_labels"], [-1])
        counts = {
            "mlm_loss": mlm_loss,
            "nsp_loss": nsp_loss,
            "mlm_correct": tf.reduce_sum(weights * tf.cast(
                tf.equal(mlm_predictions, batch["masked_lm_ids"]), tf.float32)),
            "mlm_weight": tf.reduce_sum(weights),
            "mlm_loss_sum": tf.reduce_sum(weights * outputs["masked_lm_example_loss"]),
            "nsp_correct": tf.reduce_sum(tf.cast(tf.equal(nsp_predictions, labels), tf.float32)),
            "nsp_loss_sum": tf.reduce_sum(outputs["next_sentence_example_loss"]),
            "examples": tf.cast(tf.shape(labels)[0], tf.float32),
        }
        return mlm_loss + nsp_loss, counts

    def loop_scalars(self, totals, steps):
        return {
            "loss": totals["loss"] / steps,
            "masked_lm_loss": totals["mlm_loss"] / steps,
            "next_sentence_loss": totals["nsp_loss"] / steps,
            "masked_lm_accuracy": totals["mlm_correct"] / max(totals["mlm_weight"], 1e-9),
            "next_sentence_accuracy": totals["nsp_correct"] / max(totals["examples"], 1),
        }

    @tf.function
    def _eval_step(self, batch):
        def step(batch):
            outputs = self.model(batch, training=False)
            loss, counts = self.replica_loss(outputs, batch, *self.global_counts(batch))
            return dict(counts, loss=loss)
        per_replica = self.strategy.run(step, args=(batch,))
        return {key: self.strategy.reduce(SUM, value, axis=None)
                for key, value in per_replica.items()}

    def evaluate(self, dataset, max_eval_steps):
        """The original's eval metrics over at most `max_eval_steps` batches, in order."""
        totals, batches = {}, 0
        for batch in self.strategy.experimental_distribute_dataset(shard_by_data(dataset)):
            if batches >= max_eval_steps:
                break
            for key, value in self._eval_step(batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
            batches += 1
        if not batches:
            raise ValueError("the evaluation input has no complete batch")
        return {
            "global_step": self.global_step,
            "loss": totals["loss"] / batches,
            "masked_lm_accuracy": totals["mlm_correct"] / totals["mlm_weight"],
            "masked_lm_loss": totals["mlm_loss_sum"] / totals["mlm_weight"],
            "next_sentence_accuracy": totals["nsp_correct"] / totals["examples"],
            "next_sentence_loss": totals["nsp_loss_sum"] / totals["examples"],
        }
