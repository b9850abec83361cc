"""Fine-tunes BERT for named-entity recognition on CoNLL-2003-style files, as the paper
(section 4.3): WordPiece per word, the first sub-token carries the word's tag, a per-token
output layer on the final hidden states, no CRF.

  python run_ner.py --data_dir=$CONLL_DIR --vocab_file=$BERT_CASED_DIR/vocab.txt \
    --bert_config_file=$BERT_CASED_DIR/bert_config.json \
    --init_checkpoint=$BERT_CASED_DIR/bert_model.ckpt --do_lower_case=False \
    --do_train=True --do_eval=True --do_predict=True --output_dir=/tmp/ner

data_dir holds train.txt, valid.txt (or dev.txt) and test.txt: `word ... tag` per line, a
blank line between sentences. --do_eval writes eval_results.txt (conlleval's entity-level
precision, recall and F1, overall and per type) and eval_predictions.txt; --do_predict writes
test_predictions.txt: the input lines with a predicted-tag column.
"""
import os

from absl import flags, logging

import training_flags
from modeling import cli, export, files
from modeling.evaluation import conlleval
from modeling.data import ner as ner_data
from modeling.tasks import ner

FLAGS = flags.FLAGS
# Cased by default: the paper's NER model is BERT-Base cased.
training_flags.define_fine_tuning_flags(do_lower_case=False)
flags.DEFINE_string("data_dir", None, "Directory of train.txt, valid.txt/dev.txt, test.txt.")
flags.DEFINE_enum("tag_scheme", "auto", list(ner_data.SCHEMES), "The files' tags: IOB1, IOB2, "
                  "or detected from the training file.")
flags.mark_flag_as_required("data_dir")


def _check_flags(config, tokenizer):
    # The paper's cased model is the usual case mismatch: a warning, not an error.
    training_flags.check_task_flags(
        config, tokenizer, ("do_train", "do_eval", "do_predict", "export_dir"),
        ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
         "iterations_per_loop"), case_mismatch_warns=True)


def _tag(trainer, sentences, label_list, tokenizer, path, batch_size):
    """Tags the sentences; returns (predicted tags per sentence, mean loss per word)."""
    features = ner_data.convert_sentences(sentences, label_list, FLAGS.max_seq_length, tokenizer)
    ner_data.write_features(features, path)
    predicted, loss, weight = ner.predict_windows(
        trainer, ner.ner_dataset(path, batch_size, FLAGS.max_seq_length,
                                                  is_training=False))
    tags = ner_data.assemble_predictions(sentences, features, predicted, label_list)
    return tags, loss / max(weight, 1.0)


def main(_):
    config, tokenizer, strategy, chief, record_dir = training_flags.start(_check_flags)

    # The tags come from the training file (in IOB2), also when only evaluating or exporting.
    train = ner_data.read_split(FLAGS.data_dir, "train")
    scheme = ner_data.resolve_scheme(FLAGS.tag_scheme, train)
    train = ner_data.normalize_tags(train, scheme)
    label_list = ner_data.get_labels(train)
    logging.info("Tags (%s in the files, IOB2 inside): %s", scheme, " ".join(label_list))

    features = ner_data.convert_sentences(train, label_list, FLAGS.max_seq_length, tokenizer) \
        if FLAGS.do_train else []
    num_train_steps = int(len(features) / FLAGS.train_batch_size * FLAGS.num_train_epochs)
    if FLAGS.do_train:
        training_flags.check_train_batch(strategy)
        training_flags.check_train_steps(num_train_steps, len(features), "training windows")
    trainer = ner.TokenClassifierTrainer(
        strategy, config, len(label_list), FLAGS.learning_rate, max(num_train_steps, 1),
        int(num_train_steps * FLAGS.warmup_proportion), **training_flags.trainer_options())
    head_missing = list(trainer.OPTIONAL_VARIABLES)
    if FLAGS.init_checkpoint:
        head_missing = trainer.init_from(FLAGS.init_checkpoint)

    if FLAGS.do_train:
        path = os.path.join(record_dir, "train.tf_record")
        ner_data.write_features(features, path)
        logging.info("Training on %d sentences (%d windows), batch %d, %d steps", len(train),
                     len(features), FLAGS.train_batch_size, num_train_steps)

        def dataset_fn(skip_batches):
            return ner.ner_dataset(
                path, FLAGS.train_batch_size, FLAGS.max_seq_length, is_training=True,
                seed=FLAGS.seed, skip_batches=skip_batches)
        training_flags.train_and_keep_original(trainer, dataset_fn, num_train_steps, chief)
        head_missing = []
    elif trainer.restore_latest(FLAGS.output_dir):
        head_missing = []

    def in_file_scheme(tags):
        return [ner_data.to_iob1(t) for t in tags] if scheme == "iob1" else tags

    if FLAGS.do_eval:
        dev = ner_data.normalize_tags(ner_data.read_split(FLAGS.data_dir, "dev"), scheme)
        predicted, loss = _tag(trainer, dev, label_list, tokenizer,
                               os.path.join(record_dir, "eval.tf_record"), FLAGS.eval_batch_size)
        evaluation = conlleval.evaluate([s.tags for s in dev], predicted)
        results = {"eval_precision": evaluation.overall.precision,
                   "eval_recall": evaluation.overall.recall, "eval_f1": evaluation.overall.f1,
                   "eval_accuracy": evaluation.accuracy, "eval_loss": loss,
                   "global_step": trainer.global_step}
        for entity, scores in evaluation.per_type.items():
            results.update({f"eval_{name}_{entity}": getattr(scores, name)
                            for name in ("precision", "recall", "f1")})
        logging.info("Eval results: %s\n%s", results, conlleval.report(evaluation))
        if chief:
            files.write_eval_results(results, os.path.join(FLAGS.output_dir,
                                                              "eval_results.txt"))
            ner_data.write_predictions(dev, in_file_scheme(predicted),
                                       os.path.join(FLAGS.output_dir, "eval_predictions.txt"))

    if FLAGS.do_predict:
        test = ner_data.read_split(FLAGS.data_dir, "test")
        test = ner_data.normalize_tags(test, scheme)
        predicted, _ = _tag(trainer, test, label_list, tokenizer,
                            os.path.join(record_dir, "predict.tf_record"),
                            FLAGS.predict_batch_size)
        if chief:
            ner_data.write_predictions(test, in_file_scheme(predicted),
                                       os.path.join(FLAGS.output_dir, "test_predictions.txt"))

    if FLAGS.export_dir:
        module = export.TaggerExport(trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case,
                                     FLAGS.max_seq_length, label_list)
        training_flags.save_export(module, head_missing, chief)


if __name__ == "__main__":
    cli.run(main)
