#!/usr/bin/env bash
# The main job on the embedded sample data (sample_data/), end to end on a CPU in about a minute:
# learn a vocabulary, create pre-training data, build a tiny model and score the data with it,
# write it as an original checkpoint, convert it to Keras and back, and extract features.
# Later stages (pre-training, fine-tuning, export) extend this script as they land.
# Outputs go to ${OUT:-out/sample}.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-out/sample}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
mkdir -p "$OUT"

echo "== 1/6 learn a WordPiece vocabulary from sample_data/sample_text.txt"
python build_vocab.py --input_file=sample_data/sample_text.txt --output_file="$OUT/vocab.txt" \
  --vocab_size=400 --num_unused=10 --min_count=1
python - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
config = json.load(open("sample_data/bert_config_tiny.json"))
config["vocab_size"] = sum(1 for _ in open(f"{out}/vocab.txt", encoding="utf-8"))
json.dump(config, open(f"{out}/bert_config.json", "w"), indent=2, sort_keys=True)
print(f"{config['vocab_size']} tokens -> {out}/vocab.txt, {out}/bert_config.json")
PY

echo "== 2/6 create masked-LM / next-sentence records"
python create_pretraining_data.py --input_file=sample_data/sample_text.txt \
  --output_file="$OUT/pretrain.tfrecord" --vocab_file="$OUT/vocab.txt" --max_seq_length=64 \
  --max_predictions_per_seq=10 --dupe_factor=5

echo "== 3/6 a tiny BERT (2 layers, hidden 64): score the records, write an original checkpoint"
python - "$OUT" <<'PY'
import sys
import keras
import tensorflow as tf
import modeling
out = sys.argv[1]
keras.utils.set_random_seed(12345)
config = modeling.BertConfig.from_json_file(f"{out}/bert_config.json")
model = modeling.BertPretrainer(config)
spec = {name: tf.io.FixedLenFeature([length], tf.int64) for name, length in [
    ("input_ids", 64), ("input_mask", 64), ("segment_ids", 64), ("masked_lm_positions", 10),
    ("masked_lm_ids", 10), ("next_sentence_labels", 1)]}
spec["masked_lm_weights"] = tf.io.FixedLenFeature([10], tf.float32)
def parse(records):
    return tf.io.parse_example(records, spec)
batch = next(iter(tf.data.TFRecordDataset(f"{out}/pretrain.tfrecord").batch(16).map(parse)))
batch["token_type_ids"] = batch.pop("segment_ids")
losses = model(batch)
print(f"untrained: masked-LM loss {float(losses['masked_lm_loss']):.3f} "
      f"(ln vocab = {tf.math.log(float(config.vocab_size)):.3f}), "
      f"next-sentence loss {float(losses['next_sentence_loss']):.3f}")
modeling.checkpoint.save_original(model, f"{out}/bert_model.ckpt")
print(f"{sum(v.numpy().size for v in model.weights):,} parameters -> {out}/bert_model.ckpt")
PY

echo "== 4/6 original checkpoint -> Keras file -> original checkpoint"
python convert_checkpoint.py --bert_config_file="$OUT/bert_config.json" \
  --input="$OUT/bert_model.ckpt" --output="$OUT/bert.keras"
python convert_checkpoint.py --input="$OUT/bert.keras" --output="$OUT/roundtrip/bert_model.ckpt"
cmp "$OUT/bert_model.ckpt.index" "$OUT/roundtrip/bert_model.ckpt.index"
echo "round trip is byte-identical"

echo "== 5/6 extract features (last two layers) for a few sentences"
head -n 3 sample_data/sample_text.txt > "$OUT/input.txt"
echo "The keeper lit the lamp. ||| Ships passed in the night." >> "$OUT/input.txt"
python extract_features.py --input_file="$OUT/input.txt" --output_file="$OUT/features.jsonl" \
  --vocab_file="$OUT/vocab.txt" --bert_config_file="$OUT/bert_config.json" \
  --init_checkpoint="$OUT/bert_model.ckpt" --layers=-1,-2 --max_seq_length=32 --batch_size=4

echo "== 6/6 what was written"
python - "$OUT/features.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    record = json.loads(line)
    tokens = [f["token"] for f in record["features"]]
    first = record["features"][1]["layers"][0]
    print(f"line {record['linex_index']}: {len(tokens)} tokens {' '.join(tokens)}")
    print(f"   layer {first['index']} of {tokens[1]!r}: {first['values'][:4]} ...")
PY
