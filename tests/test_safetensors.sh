#!/usr/bin/env bash
# Weights in and out with Hugging Face's names (tools/export_model.c, model/hf.h, formats/safetensors.h, config/hf_config.h):
#   - zeroc -> safetensors -> zeroc is bitwise (fp32), both architectures, from a stage-0 checkpoint and
#     from a ZeRO-3 checkpoint saved by 2 ranks, read back at stage 0 (both) and at ZeRO-3 on 2 ranks
#   - the file is what transformers expects (names and shapes listed from its model definitions, dtype,
#     alignment, metadata, config.json)
#   - the PyTorch reference on the exported tensors by their Hugging Face names, computing as transformers
#     does (Conv1D, rotate_half RoPE), matches zeroc's logits, loss, every gradient and 10 AdamW steps;
#     negative controls: q/k without the RoPE permutation, a Conv1D weight in Linear layout
#   - bf16 export: round to nearest even, logits within bf16 tolerance, its import exact
#   - OpenAI's GPT-2 naming (no prefix, attn.bias buffers, vocabulary 50257 padded to 50304) imports bitwise
#   - bad files, configs and flags: one-line errors (every rank under mpirun)
cd "$(dirname "$0")/.."
source tests/lib.sh
if ! $PY -c "import torch, numpy" 2>/dev/null; then echo "skip: $PY cannot import torch and numpy"; exit 77; fi
make -s build/z0/train_gpt_cpu build/z3/train_gpt_cpu build/z0/test_gpt_cpu build/export_model || exit 1
T0=./build/z0/train_gpt_cpu T3=./build/z3/train_gpt_cpu EXPORT=./build/export_model
make_shard "$TMP/train.bin" 50000 250
export OMP_NUM_THREADS=1

for arch in gpt2 llama; do
    M="--arch $arch --preset tiny --dim 48 --heads 4 --ffn 100 --vocab 250 --max-seq 32 --seq 32"
    KV=4; [ $arch = llama ] && { M="$M --kv-heads 2"; KV=2; }
    R="$M --train $TMP/train.bin --quiet 1"
    echo "== $arch: checkpoints after 3 steps at lr 1e-2 (every tensor away from its initial value): stage 0, and ZeRO-3 on 2 ranks"
    $T0 $R --batch 4 --steps 3 --lr 1e-2 --save "$TMP/ck0_$arch" > /dev/null || exit 1
    $MPIRUN -np 2 $T3 $R --batch 2 --steps 3 --lr 1e-2 --save "$TMP/ck3_$arch" > /dev/null || exit 1
    $EXPORT "$TMP/ck0_$arch" "$TMP/hf0_$arch" | sed 's/^/       /'
    check "$arch: export of the stage-0 checkpoint (a --save directory)" ${PIPESTATUS[0]}
    $EXPORT "$TMP/ck3_$arch/ckpt_00000003" "$TMP/hf3_$arch" > /dev/null
    check "$arch: export of the ZeRO-3 checkpoint (a ckpt_ directory)" $?
    $PY tests/hf_check.py names "$TMP/hf0_$arch" $arch 2 4 $KV 48 100 250 32
    check "$arch: names, shapes, dtype, alignment, metadata and config.json are transformers'" $?

    echo "== $arch: round trip zeroc -> safetensors -> zeroc"
    for src in 0 3; do
        orig="$TMP/ck${src}_$arch/ckpt_00000003/model.bin"
        $T0 $R --init "$TMP/hf${src}_$arch/model.safetensors" --steps 0 --save "$TMP/rt${src}_0_$arch" > /dev/null &&
            cmp "$orig" "$TMP/rt${src}_0_$arch/ckpt_00000000/model.bin"
        check "$arch: stage-$src checkpoint -> export -> --init at stage 0: model file bitwise identical" $?
    done
    $MPIRUN -np 2 $T3 $R --init "$TMP/hf3_$arch/model.safetensors" --steps 0 --save "$TMP/rt3_3_$arch" > /dev/null &&
        cmp "$TMP/ck3_$arch/ckpt_00000003/model.bin" "$TMP/rt3_3_$arch/ckpt_00000000/model.bin"
    check "$arch: stage-3 checkpoint -> export -> --init at ZeRO-3 on 2 ranks: model file bitwise identical" $?

    echo "== $arch: the PyTorch reference on the exported tensors by Hugging Face names vs zeroc"
    HF="$TMP/hf0_$arch/model.safetensors"   # --eps 1e-4 below: the final parameters per tensor, as test_gpt_cpu says why
    $PY scripts/train_gpt.py $M --train "$TMP/train.bin" --init "$HF" --batch 4 --lr 1e-3 --eps 1e-4 --debug-state "$TMP/dbg_$arch.bin" \
        > "$TMP/py.out" 2>&1 || { cat "$TMP/py.out"; exit 1; }
    grep -m1 "Hugging Face" "$TMP/py.out" | sed 's/^/       /'
    ./build/z0/test_gpt_cpu $M --state "$TMP/dbg_$arch.bin" --init "$HF" --threads 2 > "$TMP/tg.out"
    rc=$?
    grep -E "^  (logits|loss|worst|step 10)|^(PASS|FAIL)" "$TMP/tg.out" | sed 's/^/     /'
    check "$arch: logits, loss, every gradient and 10 AdamW steps of the Hugging Face layout equal zeroc's (fp32 tolerance 1e-5)" $rc

    echo "== $arch: bf16 export; logits of a broken layout (negative control) and of the bf16 weights"
    $EXPORT "$TMP/ck0_$arch" "$TMP/hfb_$arch" --dtype bf16 > /dev/null || exit 1
    $PY tests/hf_check.py bf16 "$TMP/hf0_$arch" "$TMP/hfb_$arch"
    check "$arch: bf16 values are the fp32 weights rounded to nearest even" $?
    brk=rope; [ $arch = gpt2 ] && brk=conv1d
    $PY tests/hf_check.py logits "$TMP/dbg_$arch.bin" \
        "$TMP/hf0_$arch:1e-4:inf:$brk:$arch: negative control: with the $brk layout broken the logits differ by far more than the 1e-5 tolerance" \
        "$TMP/hfb_$arch:1e-6:2e-2::$arch: bf16 logits within bf16 tolerance of zeroc's fp32 logits"
    fails=$((fails + $?))
    $T0 $R --init "$TMP/hfb_$arch/model.safetensors" --steps 0 --save "$TMP/rtb_$arch" > /dev/null &&
        $EXPORT "$TMP/rtb_$arch" "$TMP/hfbb_$arch" > /dev/null && $PY tests/hf_check.py widened "$TMP/hfb_$arch" "$TMP/hfbb_$arch"
    check "$arch: importing the bf16 file gives exactly its values" $?
done

echo "== F16 weights (transformers' other half-precision dtype)"
$PY tests/hf_check.py edit "$TMP/hf0_llama" "$TMP/f16" to-f16 && $T0 --init "$TMP/f16/model.safetensors" --train "$TMP/train.bin" --seq 32 \
    --steps 0 --quiet 1 --save "$TMP/rtf" > /dev/null && $EXPORT "$TMP/rtf" "$TMP/f16x" > /dev/null && $PY tests/hf_check.py widened "$TMP/f16" "$TMP/f16x"
check "F16 weights import exactly, subnormals included" $?

echo "== OpenAI's GPT-2 checkpoint layout: no transformer. prefix, attn.bias buffers, vocabulary 50257"
$T0 --arch gpt2 --preset tiny --train "$TMP/train.bin" --batch 2 --seq 32 --steps 1 --lr 1e-2 --quiet 1 --save "$TMP/ckv" > /dev/null || exit 1
$EXPORT "$TMP/ckv" "$TMP/hfv" | sed 's/^/       /'
$PY tests/hf_check.py openai "$TMP/hfv" "$TMP/openai" || exit 1
$T0 --init "$TMP/openai/model.safetensors" --train "$TMP/train.bin" --seq 32 --steps 0 --quiet 1 --save "$TMP/rtv" > /dev/null &&
    cmp "$TMP/ckv/ckpt_00000001/model.bin" "$TMP/rtv/ckpt_00000000/model.bin"
check "OpenAI-style GPT-2 (vocabulary 50257 -> padded 50304 with zero rows) imports bitwise, sizes from its config.json alone" $?

echo "== bad files, configs and flags: one line naming the file and the problem"
G="$TMP/hf0_gpt2" Q="$TMP/hf0_llama"
B="--train $TMP/train.bin --seq 32 --steps 0 --quiet 1"
bad() { $PY tests/hf_check.py edit "$1" "$TMP/bad_$2" "${@:3}" || exit 1; echo "$TMP/bad_$2/model.safetensors"; }
f=$(bad $G trunc_data copy); head -c -100 "$f" > "$f.x" && mv "$f.x" "$f"
expect_error "truncated data" "model.safetensors: truncated file: the header describes" 1 $T0 $B --init "$f"
expect_error "truncated header" "model.safetensors: truncated file: the header is" 1 $T0 $B --init "$(bad $G trunc_head truncate-header)"
expect_error "header is not JSON" "model.safetensors: the header is not valid JSON" 1 $T0 $B --init "$(bad $G json bad-json)"
expect_error "a dtype zeroc does not read" "tensor transformer.wpe.weight has dtype I32; zeroc reads F32, BF16 and F16" 1 \
    $T0 $B --init "$(bad $G dtype dtype transformer.wpe.weight I32)"
expect_error "an unknown dtype" "tensor transformer.wpe.weight: unknown dtype \"F33\"" 1 $T0 $B --init "$(bad $G dtype2 dtype transformer.wpe.weight F33)"
expect_error "missing tensor" "missing tensor transformer.h.1.mlp.c_fc.bias" 1 $T0 $B --init "$(bad $G drop drop transformer.h.1.mlp.c_fc.bias)"
expect_error "unexpected tensor" "unexpected tensor transformer.h.0.attn.extra" 1 $T0 $B --init "$(bad $G add add transformer.h.0.attn.extra)"
expect_error "wrongly shaped tensor (Linear layout)" "tensor transformer.h.0.attn.c_attn.weight has shape \[144, 48\], this model needs \[48, 144\]" 1 \
    $T0 $B --init "$(bad $G shape shape transformer.h.0.attn.c_attn.weight)"
expect_error "wrongly shaped llama tensor" "tensor model.layers.1.mlp.down_proj.weight has shape \[100, 48\], this model needs \[48, 100\]" 1 \
    $T0 $B --init "$(bad $Q shape2 shape model.layers.1.mlp.down_proj.weight)"
expect_error "data with a gap" "data starts at byte 4, expected 0" 1 $T0 $B --init "$(bad $G gap gap)"
expect_error "a NaN in a tensor" "tensor transformer.h.1.mlp.c_proj.weight: non-finite value at element 7" 1 \
    $T0 $B --init "$(bad $G nan nan transformer.h.1.mlp.c_proj.weight 7)"
# ZeRO-3 on 2 ranks, nothing persistent: the final unit (ln_f weight, then bias; 96 elements) is split in
# halves, so only rank 1 reads ln_f.bias; the ranks agree on its error and both print it
$MPIRUN -np 2 $T3 $B --persistence-threshold 0 --init "$(bad $G nan1 nan transformer.ln_f.bias 5)" > "$TMP/nan1.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(grep -c "error: .*tensor transformer.ln_f.bias: non-finite value at element 5" "$TMP/nan1.out")" -eq 2 ]
check "a NaN only rank 1 of 2 reads (ZeRO-3 ranks read their slices): both ranks stop with its line" $?
$T0 $B --init "$(bad $G tied_same tied-head transformer.wte.weight same)" > /dev/null
check "a tied head stored anyway, equal to the embedding, is accepted" $?
expect_error "a tied head stored anyway that differs from the embedding" "lm_head.weight differs from the embedding, but config.json ties them" 1 \
    $T0 $B --init "$(bad $G tied_diff tied-head transformer.wte.weight diff)"
f=$(bad $G nocfg copy); rm "$(dirname "$f")/config.json"
expect_error "no config.json beside the file" "nocfg/config.json: cannot open" 1 $T0 $B --init "$f"
expect_error "a size flag that disagrees with config.json" "--layers 3 disagrees with config.json.s layers 2" 1 $T0 $B --layers 3 --init "$G/model.safetensors"
expect_error "a preset that disagrees with config.json" "--preset small \\(layers 4\\) disagrees with config.json.s layers 2" 1 $T0 $B --preset small --init "$G/model.safetensors"
$T0 $B --kv-heads 2 --init "$Q/model.safetensors" > /dev/null
check "flags that agree with config.json are accepted (llama's --kv-heads 2 without --arch)" $?
expect_error "--arch that disagrees with config.json" "--arch llama disagrees with config.json.s gpt2" 1 $T0 $B --arch llama --init "$G/model.safetensors"
f=$(bad $Q rope copy); sed -i 's/"rope_scaling":\tnull/"rope_scaling": {"rope_type": "linear", "factor": 2.0}/' "$(dirname "$f")/config.json"
expect_error "RoPE scaling zeroc does not implement" "\"rope_scaling\" asks for linear RoPE scaling" 1 $T0 $B --init "$f"
f=$(bad $Q mistral copy); sed -i 's/"model_type":\t"llama"/"model_type": "mistral"/' "$(dirname "$f")/config.json"
expect_error "another model type" "model_type \"mistral\" is not supported" 1 $T0 $B --init "$f"
expect_error "every rank says it under mpirun (ZeRO-3, 2 ranks)" "missing tensor transformer.h.1.mlp.c_fc.bias" 2 \
    $MPIRUN -np 2 $T3 $B --init "$TMP/bad_drop/model.safetensors"
expect_error "the PyTorch reference: truncated file" "model.safetensors: truncated file: the header describes" 1 \
    $PY scripts/train_gpt.py $B --init "$TMP/bad_trunc_data/model.safetensors"
expect_error "the PyTorch reference: wrongly shaped tensor" "transformer.h.0.attn.c_attn.weight has shape \[144, 48\], this model needs \[48, 144\]" 1 \
    $PY scripts/train_gpt.py $B --init "$TMP/bad_shape/model.safetensors"
cp -r "$TMP/ck0_gpt2" "$TMP/ck_bad"
printf '\x01' | dd of="$TMP/ck_bad/ckpt_00000003/model.bin" bs=1 seek=3000 conv=notrunc 2>/dev/null
expect_error "export of a damaged checkpoint" "model.bin: CRC-32 .* does not match the manifest" 1 $EXPORT "$TMP/ck_bad" "$TMP/out_bad"
expect_error "export of no checkpoint" "no checkpoint here" 1 $EXPORT "$TMP" "$TMP/out_bad"
expect_error "export --dtype" "--dtype: expected fp32 or bf16, got 'fp8'" 1 $EXPORT "$TMP/ck0_gpt2" "$TMP/out_bad" --dtype fp8
[ $fails -eq 0 ]
