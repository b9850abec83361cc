#!/usr/bin/env bash
# The main job on the embedded sample data (sample_data/), end to end on a CPU in about a minute:
# build a tiny model, write it as an original checkpoint, convert it to Keras and back, and
# extract features from the sample sentences. Later stages (pre-training, fine-tuning, export)
# extend this script as they land. Outputs go to ${OUT:-out/sample}.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-out/sample}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
mkdir -p "$OUT"

echo "== 1/4 a tiny BERT (2 layers, hidden 64), written as an original TF1 checkpoint"
python - "$OUT" <<'PY'
import sys
import keras
import modeling
keras.utils.set_random_seed(12345)
config = modeling.BertConfig.from_json_file("sample_data/bert_config_tiny.json")
model = modeling.BertPretrainer(config)
modeling.checkpoint.save_original(model, f"{sys.argv[1]}/bert_model.ckpt")
print(f"{sum(v.numpy().size for v in model.weights):,} parameters -> {sys.argv[1]}/bert_model.ckpt")
PY

echo "== 2/4 original checkpoint -> Keras file -> original checkpoint"
python convert_checkpoint.py --bert_config_file=sample_data/bert_config_tiny.json \
  --input="$OUT/bert_model.ckpt" --output="$OUT/bert.keras"
python convert_checkpoint.py --input="$OUT/bert.keras" --output="$OUT/roundtrip/bert_model.ckpt"
cmp "$OUT/bert_model.ckpt.index" "$OUT/roundtrip/bert_model.ckpt.index"
echo "round trip is byte-identical"

echo "== 3/4 extract features (last two layers) for the sample sentences"
head -n 3 sample_data/sample_text.txt > "$OUT/input.txt"
echo "The keeper lit the lamp. ||| Ships passed in the night." >> "$OUT/input.txt"
python extract_features.py --input_file="$OUT/input.txt" --output_file="$OUT/features.jsonl" \
  --vocab_file=sample_data/vocab.txt --bert_config_file=sample_data/bert_config_tiny.json \
  --init_checkpoint="$OUT/bert_model.ckpt" --layers=-1,-2 --max_seq_length=32 --batch_size=4

echo "== 4/4 what was written"
python - "$OUT/features.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    record = json.loads(line)
    tokens = [f["token"] for f in record["features"]]
    first = record["features"][1]["layers"][0]
    print(f"line {record['linex_index']}: {len(tokens)} tokens {' '.join(tokens)}")
    print(f"   layer {first['index']} of {tokens[1]!r}: {first['values'][:4]} ...")
PY
