#!/usr/bin/env bash
# Outside input read as strictly as its format's reference reader does, each problem one line:
#   1. JSON (formats/json.h) in a DeepSpeed config, a config.json and a safetensors header: trailing
#      data, a NUL byte or a \u0000 escape, a number beyond a double, a duplicate key, 01, 1., a
#      byte-order mark and nesting past 1000 levels are refused; a syntax error says FILE:LINE:COL;
#      --config of a directory says so
#   2. every value checked in the type it is used in: a float setting as a 32-bit float (eps 1e-46 is
#      0 there, layer_norm_epsilon 1e300 is inf), an integer within its field's range; a model too
#      large to allocate names where its sizes came from
#   3. a safetensors header at scale: 100k tensors checked for duplicate names in n log n (seconds,
#      not minutes), and zeroc's stated cap on the tensor count
#   4. model files with Inf or NaN refused with the tensor named: --init, --sample 1 and the export
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/config_test build/z0/train_gpt_cpu build/export_model || exit 1
CT=./build/config_test T0=./build/z0/train_gpt_cpu EXPORT=./build/export_model
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --quiet 1"
cfg() { printf '%b' "$2" > "$TMP/$1.json"; echo "$TMP/$1.json"; }

echo "== 1. strict JSON: a DeepSpeed config"
expect_error "trailing data after the document" "t1.json:1:4: trailing data after the JSON document" 1 $CT lr --config "$(cfg t1 '{} x')"
expect_error "an escaped NUL inside a key (cJSON would apply it as train_batch_size)" 't2.json:1:19: \\u0000 inside a string' 1 \
    $CT lr --config "$(cfg t2 '{"train_batch_size\\u0000x": 8}')"
expect_error "a NUL byte after the document" "t3.json:1:24: a NUL byte" 1 $CT lr --config "$(cfg t3 '{"train_batch_size": 8}\0')"
expect_error "1e400 is reported as what it is" "t4.json:1:34: the number 1e400 is out of range" 1 \
    $CT lr --config "$(cfg t4 '{"optimizer": {"params": {"eps": 1e400}}}')"
expect_error "a syntax error: file, line and column" "t5.json:3:14: syntax error at ', 3\]'" 1 \
    $CT lr --config "$(cfg t5 '{\n  "a": 1,\n  "b": [1, 2,, 3]\n}')"
expect_error "a document that ends early" "t6.json:3:1: the document ends early" 1 $CT lr --config "$(cfg t6 '{\n  "a": {"b": 1,\n')"
expect_error "01: a leading zero (Python's json refuses it)" "t7.json:1:7: 01 is not a JSON number" 1 $CT lr --config "$(cfg t7 '{"a": 01}')"
expect_error "1.: no digit after the point" "t8.json:1:7: 1. is not a JSON number" 1 $CT lr --config "$(cfg t8 '{"a": 1.}')"
expect_error "a byte-order mark" "t9.json:1:1: a byte-order mark" 1 $CT lr --config "$(cfg t9 '\xEF\xBB\xBF{}')"
$PY -c "print('[' * 100000 + ']' * 100000)" > "$TMP/deep.json"
expect_error "100k-deep arrays: the depth limit, not a syntax error" "deep.json:1:1001: nested more than 1000 levels deep" 1 $CT lr --config "$TMP/deep.json"
expect_error "--config of a directory" "$TMP: a directory, not a JSON file" 1 $CT lr --config "$TMP"

echo "== 2. values in the type they are used in"
expect_error "eps 1e-46 (0 as a float)" "optimizer.params.eps: 1e-46 is below the smallest 32-bit float, 1.4e-45, so it would be read as 0: expected a number > 0" 1 \
    $CT lr --config "$(cfg v1 '{"optimizer": {"params": {"eps": 1e-46}}}')"
expect_error "beta2 0.99999999999 (1 as a float)" "optimizer.params.betas: 0.99999999999 is 1 as the 32-bit float" 1 \
    $CT lr --config "$(cfg v2 '{"optimizer": {"params": {"betas": [0.9, 0.99999999999]}}}')"
expect_error "gradient_clipping 1e-46 (would turn clipping off)" "gradient_clipping: 1e-46 is below the smallest 32-bit float, 1.4e-45, so it would be read as 0: write 0 if 0 is meant" 1 \
    $CT lr --config "$(cfg v3 '{"gradient_clipping": 1e-46}')"
expect_error "--clip 1e-46" "--clip: '1e-46' is below the smallest 32-bit float" 1 $CT lr --clip 1e-46
# the range a message states is the range applied: FLT_MAX is taken, 1e39 is beyond the stated top
$CT lr --lr 3.4028235e38 > /dev/null 2>&1 && $CT lr --config "$(cfg v5 '{"optimizer": {"params": {"lr": 3.4028235e38}}}')" > /dev/null 2>&1
check "--lr and optimizer.params.lr 3.4028235e38 (FLT_MAX) are taken" $?
expect_error "--lr 1e39: the message names the float's top" "--lr: expected a number >= 0, at most 3.4028235e38 \\(the largest 32-bit float\\), got '1e39'" 1 $CT lr --lr 1e39
expect_error "--lr 1e-400 (below even a double): as 1e-50, not 'expected >= 0'" "--lr: '1e-400' is below the smallest 32-bit float" 1 $CT lr --lr 1e-400
expect_error "--lr 1e-50: 0 is allowed, so the message says to write 0" "--lr: '1e-50' is below the smallest 32-bit float, 1.4e-45, so it would be read as 0: write 0 if 0 is meant" 1 $CT lr --lr 1e-50
expect_error "number_checkpoints 9e18 (an int field)" "number_checkpoints: expected an integer in \\[1, 1024\\], got 9e\\+18" 1 \
    $CT lr --config "$(cfg v4 '{"activation_checkpointing": {"number_checkpoints": 9e18}}')"
# a config.json beside a safetensors file (the export of a tiny model)
$T0 $M --steps 0 --save "$TMP/ck" > /dev/null && $EXPORT "$TMP/ck" "$TMP/hf" > /dev/null || exit 1
$T0 $M --steps 0 --arch llama --kv-heads 2 --save "$TMP/ckl" > /dev/null && $EXPORT "$TMP/ckl" "$TMP/hfl" > /dev/null || exit 1
hfcfg() {  # hfcfg SRC NAME PYTHON-EDIT: a copy of SRC whose config.json is edited (c: the dict; text: the written text)
    mkdir -p "$TMP/$2" && cp "$TMP/$1/model.safetensors" "$TMP/$2/" || exit 1
    $PY - "$TMP/$1/config.json" "$TMP/$2/config.json" "$3" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
text = None
exec(sys.argv[3])
open(sys.argv[2], "w").write(text if text is not None else json.dumps(c, indent=1))
PYEOF
    echo "$TMP/$2/model.safetensors"
}
expect_error "config.json: layer_norm_epsilon 1e300 (inf as a float)" 'config.json: "layer_norm_epsilon" is 1e\+300, which is inf as the 32-bit float' 1 \
    $T0 $M --steps 1 --init "$(hfcfg hf eps 'c["layer_norm_epsilon"] = 1e300')"
expect_error "config.json: rope_theta 1e300" '"rope_theta" is 1e\+300, which is inf' 1 $T0 $M --steps 1 --init "$(hfcfg hfl theta 'c["rope_theta"] = 1e300')"
expect_error "config.json: layer_norm_epsilon 1e-46 (0 as a float)" '"layer_norm_epsilon" is 1e-46, which is 0' 1 \
    $T0 $M --steps 1 --init "$(hfcfg hf eps0 'c["layer_norm_epsilon"] = 1e-46')"
expect_error "config.json: trailing data" "config.json:[0-9]+:[0-9]+: trailing data after the JSON document" 1 \
    $T0 $M --steps 1 --init "$(hfcfg hf trail 'text = json.dumps(c) + " }"')"
expect_error "config.json: a duplicate key (transformers would take the last)" 'config.json: n_layer: duplicate key' 1 \
    $T0 $M --steps 1 --init "$(hfcfg hf dup 'text = json.dumps(c)[:-1] + ", \"n_layer\": 4}"')"
expect_error "an absurd config.json: the allocation that fails names it" 'out of memory allocating [0-9]+ bytes for .*from .*/huge/config.json' 1 \
    $T0 --train "$TMP/train.bin" --quiet 1 --steps 1 --init "$(hfcfg hf huge 'c.update(n_layer=1024, n_embd=65536, n_head=64, n_inner=1 << 20, vocab_size=65536)')"

echo "== 3. safetensors headers"
# sthead OUT HEADER-TEXT: a safetensors file with this header and no tensor data
sthead() { $PY -c 'import struct, sys; h = sys.argv[2].encode("latin-1").decode("unicode_escape").encode("latin-1"); open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)' "$1" "$2"; }
cp "$TMP/hf/config.json" "$TMP/cfgonly.json"
st() { mkdir -p "$TMP/st_$1" && cp "$TMP/cfgonly.json" "$TMP/st_$1/config.json" && sthead "$TMP/st_$1/model.safetensors" "$2"; echo "$TMP/st_$1/model.safetensors"; }
expect_error "a dtype with an escaped NUL (F32 then \\u0000)" 'the header is not valid JSON \(header:1:21: \\u0000 inside a string' 1 \
    $T0 $M --steps 0 --init "$(st nuldt '{"a": {"dtype": "F32\\u0000", "shape": [0], "data_offsets": [0, 0]}}')"
expect_error "a NUL byte inside the header" 'the header is not valid JSON \(header:1:3: a NUL byte' 1 \
    $T0 $M --steps 0 --init "$(st nulbyte '{"\x00a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}')"
expect_error "trailing data inside the header" 'the header is not valid JSON \(header:1:[0-9]+: trailing data' 1 \
    $T0 $M --steps 0 --init "$(st trail '{"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}} x')"
big() {  # big NAME N DUP: a header of N empty tensors, the last two named alike when DUP is 1
    $PY - "$TMP/st_$1" "$2" "$3" "$TMP/cfgonly.json" <<'PYEOF'
import os, shutil, struct, sys
d, n, dup = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
os.makedirs(d, exist_ok=True)
shutil.copy(sys.argv[4], os.path.join(d, "config.json"))
names = ["t%d" % i for i in range(n)]
if dup: names[-1] = names[-2]   # found last by a pairwise check
h = ("{" + ",".join('"%s":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % s for s in names) + "}").encode()
open(os.path.join(d, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h)
PYEOF
    echo "$TMP/st_$1/model.safetensors"
}
f=$(big dup100k 100000 1); t0=$(date +%s.%N)
expect_error "100k empty tensors, the last two named alike" 'the header is not valid JSON \(header: t99998: duplicate key' 1 timeout 20 $T0 $M --steps 0 --init "$f"
$PY -c "import sys; t = float(sys.argv[2]) - float(sys.argv[1]); print(f'       ... in {t:.1f} s'); sys.exit(t > 10)" "$t0" "$(date +%s.%N)"
check "... within 10 s (n log n; the quadratic check took about 70 s)" $?
f=$(big cap 262145 0)
expect_error "one tensor over zeroc's cap" "the header lists 262145 tensors; zeroc reads at most 262144" 1 timeout 20 $T0 $M --steps 0 --init "$f"

echo "== 4. model files with Inf or NaN"
cp "$TMP/ck/ckpt_00000000/model.bin" "$TMP/nan.bin"
# element 5 of layer 1's fc_w (gpt2 tiny: C=64, the flat offset from the layout the trainer prints below)
$PY - "$TMP/nan.bin" <<'PYEOF'
import struct, sys
# gpt2 tiny (vocab 250 -> padded 256, C=64, max_seq 64, F=256): embed = 256*64 + 64*64; layer = 12 tensors
C, F, Vp, T = 64, 256, 256, 64
layer = [C, C, 3 * C * C, 3 * C, C * C, C, C, C, F * C, F, C * F, C]   # ln1 w,b qkv w,b attproj w,b ln2 w,b fc w,b fcproj w,b
off = Vp * C + T * C + sum(layer) + sum(layer[:8]) + 5                 # layer 1's fc_w, element 5
f = open(sys.argv[1], "r+b"); f.seek(1024 + 4 * off); f.write(struct.pack("<f", float("nan")))
PYEOF
expect_error "--init model.bin with a NaN: the tensor named" "nan.bin: tensor layer1.fc_w: non-finite value at element 5" 1 $T0 $M --steps 1 --init "$TMP/nan.bin"
expect_error "--sample 1 from it" "nan.bin: tensor layer1.fc_w: non-finite value at element 5" 1 $T0 --preset tiny --vocab 250 --sample 1 --init "$TMP/nan.bin"
expect_error "export_model of it" "nan.bin: tensor layer1.fc_w: non-finite value at element 5" 1 $EXPORT "$TMP/nan.bin" "$TMP/out_nan"
[ ! -e "$TMP/out_nan/model.safetensors" ] && [ ! -e "$TMP/out_nan/model.safetensors.tmp" ]; check "... which writes nothing" $?
[ $fails -eq 0 ]
