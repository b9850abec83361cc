#!/usr/bin/env bash
# The main job on the embedded sample data (sample_data/), end to end on a CPU in a few minutes:
# learn a vocabulary, create pre-training data, pre-train a tiny model and evaluate it, convert
# its original-format checkpoint to Keras and back, extract features with it, fine-tune it on a
# small classification set, export a SavedModel and query it from a TensorFlow-only process.
# Outputs go to ${OUT:-out/sample}.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-out/sample}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
mkdir -p "$OUT"

echo "== 1/8 learn a WordPiece vocabulary from the sample corpus and the classification sentences"
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

echo "== 2/8 create masked-LM / next-sentence records"
python create_pretraining_data.py --input_file="$OUT/corpus.txt" \
  --output_file="$OUT/pretrain.tfrecord" --vocab_file="$OUT/vocab.txt" --max_seq_length=64 \
  --max_predictions_per_seq=10 --dupe_factor=5

echo "== 3/8 pre-train a tiny BERT (2 layers, hidden 64) for 300 steps, then evaluate it"
python run_pretraining.py --input_file="$OUT/pretrain.tfrecord" --output_dir="$OUT/pretraining" \
  --bert_config_file="$OUT/bert_config.json" --do_train=True --do_eval=True \
  --max_seq_length=64 --max_predictions_per_seq=10 --train_batch_size=16 --eval_batch_size=16 \
  --num_train_steps=300 --num_warmup_steps=30 --learning_rate=1e-3 \
  --save_checkpoints_steps=100 --iterations_per_loop=50 2>&1 | grep -E "step [0-9]+/|Resumed|Eval|error"
cat "$OUT/pretraining/eval_results.txt"
CKPT="$OUT/pretraining/export/bert_model.ckpt"

echo "== 4/8 original checkpoint -> Keras file -> original checkpoint"
python convert_checkpoint.py --bert_config_file="$OUT/bert_config.json" --input="$CKPT" \
  --output="$OUT/bert.keras"
python convert_checkpoint.py --input="$OUT/bert.keras" --output="$OUT/roundtrip/bert_model.ckpt"
python - "$CKPT" "$OUT/roundtrip/bert_model.ckpt" <<'PY'
import sys
import numpy as np
import tensorflow as tf
trained, back = (tf.train.load_checkpoint(path) for path in sys.argv[1:])
names = back.get_variable_to_shape_map()
assert all(np.array_equal(trained.get_tensor(n), back.get_tensor(n)) for n in names)
print(f"round trip: {len(names)} tensors bit-identical (Adam slots and global_step dropped)")
PY

echo "== 5/8 extract features (last two layers) for a few sentences"
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

echo "== 6/8 fine-tune the pre-trained model on sample_data/classification (sst-2 layout)"
rm -rf "$OUT/classifier" "$OUT/serving"
python run_classifier.py --task_name=sst-2 --data_dir=sample_data/classification \
  --vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$CKPT" --output_dir="$OUT/classifier" --do_train=True --do_eval=True \
  --do_predict=True --export_dir="$OUT/serving" --max_seq_length=32 --train_batch_size=16 \
  --learning_rate=5e-4 --num_train_epochs=10 --save_checkpoints_steps=100 \
  --iterations_per_loop=30 2>&1 | grep -E "step [0-9]+/|Eval results|SavedModel|error"
cat "$OUT/classifier/eval_results.txt"

echo "== 7/8 the SavedModel's signatures"
saved_model_cli show --dir "$(ls -d "$OUT"/serving/[0-9]* | tail -n 1)" --all 2>/dev/null \
  | grep -E "signature_def|inputs\[|outputs\[" | grep -v "__saved_model_init_op"

echo "== 8/8 query it from a fresh process that imports only tensorflow and tensorflow_text"
python query_savedmodel.py "$OUT/serving" \
  "The fishermen came home safe and the nets were heavy with fish." \
  "The storm broke the mast and the boat was lost at sea." \
  "The baker sold all the bread before noon." \
  "The river flooded the fields and the wheat was ruined." \
  2> >(grep -vE "^(I0000|W0000|E0000|WARNING: All log)" >&2)
