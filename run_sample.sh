#!/usr/bin/env bash
# The main job on the embedded sample data (sample_data/), end to end on a CPU in about two
# minutes: learn a vocabulary, create pre-training data, pre-train a tiny model and evaluate it
# against constant guesses, convert its original-format checkpoint to Keras and back, extract
# features with it, fine-tune it on a small classification set, export a SavedModel and query
# it from a process that loads it with TensorFlow and tensorflow-text alone.
#
# Outputs go to ${OUT:-out/sample}; each run starts afresh there (it removes the previous run's
# outputs, saying so). Our scripts keep TensorFlow's start-up lines off stderr:
# TF_CPP_MIN_LOG_LEVEL=0 ./run_sample.sh shows everything TensorFlow prints.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-out/sample}
SECONDS=0

OUTPUTS=(corpus.txt vocab.txt bert_config.json pretrain.tfrecord pretraining bert.keras roundtrip
         input.txt features.jsonl classifier serving)
previous=()
for name in "${OUTPUTS[@]}"; do
  if [ -e "$OUT/$name" ]; then previous+=("$name"); fi
done
if [ ${#previous[@]} -gt 0 ]; then
  echo "== starting afresh: removing the previous run's outputs from $OUT: ${previous[*]}"
  for name in "${previous[@]}"; do rm -rf "${OUT:?}/$name"; done
fi
mkdir -p "$OUT"

echo "== 1/7 learn a WordPiece vocabulary from the sample corpus and the classification sentences"
# Pre-training text: sample_text.txt, plus the (unlabelled) training sentences of the
# classification set as documents of 8 lines: pre-training on the task's domain.
{ cat sample_data/sample_text.txt; echo
  tail -n +2 sample_data/classification/train.tsv | cut -f1 | awk '{print} NR % 8 == 0 {print ""}'
} > "$OUT/corpus.txt"
python build_vocab.py --input_file="$OUT/corpus.txt" --output_file="$OUT/vocab.txt" \
  --vocab_size=600 --num_unused=10 --min_count=1
python - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
config = json.load(open("sample_data/bert_config_tiny.json"))
config["vocab_size"] = sum(1 for _ in open(f"{out}/vocab.txt", encoding="utf-8"))
json.dump(config, open(f"{out}/bert_config.json", "w"), indent=2, sort_keys=True)
print(f"{config['vocab_size']} tokens -> {out}/vocab.txt, {out}/bert_config.json")
PY

echo "== 2/7 create masked-LM / next-sentence records"
python create_pretraining_data.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/pretrain.tfrecord" --vocab_file="$OUT/vocab.txt" --max_seq_length=32 \
  --max_predictions_per_seq=5 --dupe_factor=5

echo "== 3/7 pre-train a tiny BERT (2 layers, hidden 64) for 600 steps, then evaluate it"
# sample_data/bert_config_tiny.json: no dropout and initializer_range 0.1, so that so small a
# model leaves the plateau of always guessing the most frequent token within these steps. As in
# the original's example, it is evaluated on the records it trained on: what it has learned.
python run_pretraining.py --input_file="$OUT/pretrain.tfrecord" --output_dir="$OUT/pretraining" \
  --bert_config_file="$OUT/bert_config.json" --do_train=True --do_eval=True \
  --max_seq_length=32 --max_predictions_per_seq=5 --train_batch_size=32 --eval_batch_size=128 \
  --num_train_steps=600 --num_warmup_steps=60 --learning_rate=1e-3 \
  --save_checkpoints_steps=300 --iterations_per_loop=100
CKPT="$OUT/pretraining/export/bert_model.ckpt"
# A folder shaped like Google's releases (bert_config.json, bert_model.ckpt, vocab.txt), which
# the README's examples take as BERT_BASE_DIR.
cp "$OUT/vocab.txt" "$OUT/pretraining/export/vocab.txt"

echo "== 4/7 original checkpoint -> Keras file -> original checkpoint"
python convert_checkpoint.py --bert_config_file="$OUT/bert_config.json" --input="$CKPT" \
  --output="$OUT/bert.keras"
python convert_checkpoint.py --input="$OUT/bert.keras" --output="$OUT/roundtrip/bert_model.ckpt"

echo "== 5/7 extract features (last two layers) for a few sentences"
head -n 3 sample_data/sample_text.txt > "$OUT/input.txt"
echo "The keeper lit the lamp. ||| Ships passed in the night." >> "$OUT/input.txt"
python extract_features.py --input_file="$OUT/input.txt" --output_file="$OUT/features.jsonl" \
  --vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$CKPT" --layers=-1,-2 --max_seq_length=32 --batch_size=4
python - "$OUT/features.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    record = json.loads(line)
    tokens = [f["token"] for f in record["features"]]
    first = record["features"][1]["layers"][0]
    print(f"line {record['linex_index']}: {len(tokens)} tokens {' '.join(tokens)}")
    print(f"   layer {first['index']} of {tokens[1]!r}: {first['values'][:4]} ...")
PY

echo "== 6/7 fine-tune the pre-trained model on sample_data/classification (sst-2 layout), export it"
python run_classifier.py --task_name=sst-2 --data_dir=sample_data/classification \
  --vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$CKPT" --output_dir="$OUT/classifier" --do_train=True --do_eval=True \
  --do_predict=True --export_dir="$OUT/serving" --max_seq_length=32 --train_batch_size=16 \
  --learning_rate=5e-4 --num_train_epochs=5 --save_checkpoints_steps=300 \
  --iterations_per_loop=100

echo "== 7/7 query the SavedModel from a process that loads it with tensorflow and tensorflow_text"
python query_savedmodel.py "$OUT/serving" \
  "The fishermen came home safe and the nets were heavy with fish." \
  "The storm broke the mast and the boat was lost at sea." \
  "The baker sold all the bread before noon." \
  "The river flooded the fields and the wheat was ruined."

echo "== done in $((SECONDS / 60))m$((SECONDS % 60))s. The sample model for the README's examples:" \
  "BERT_BASE_DIR=$OUT/pretraining/export. TensorBoard summaries in $OUT/pretraining/train and" \
  "$OUT/classifier/train; view them with: tensorboard --logdir $OUT"
