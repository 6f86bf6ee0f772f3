#!/usr/bin/env bash
# Bad input gets a one-line error naming the file or flag, a non-zero exit, no
# crash and no hang; under mpirun at least one rank says it (mpirun may kill the
# others first) and every rank that says something says the same (tests/lib.sh).
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s build/z0/train_gpt_cpu build/z1/train_gpt_cpu build/z2/train_gpt_cpu build/z3/train_gpt_cpu build/export_model || exit 1
T0=./build/z0/train_gpt_cpu
make_shard "$TMP/ok.bin" 20000 250
M="--preset tiny --vocab 250 --batch 2 --seq 16 --steps 1 --quiet 1"

echo "== data files"
expect_error "missing data file" "missing.bin: cannot open" 1 $T0 $M --train "$TMP/missing.bin"
head -c 500 "$TMP/ok.bin" > "$TMP/short.bin"
expect_error "file shorter than the header" "short.bin: truncated" 1 $T0 $M --train "$TMP/short.bin"
head -c 3000 "$TMP/ok.bin" > "$TMP/trunc.bin"
expect_error "truncated token data" "trunc.bin: truncated" 1 $T0 $M --train "$TMP/trunc.bin"
{ printf '\x39\x30\x00\x00'; tail -c +5 "$TMP/ok.bin"; } > "$TMP/magic.bin"
expect_error "wrong magic number" "magic.bin: bad magic" 1 $T0 $M --train "$TMP/magic.bin"
make_shard "$TMP/big_vocab.bin" 20000 300
expect_error "token id out of range" "big_vocab.bin: token id .* out of range" 1 $T0 $M --train "$TMP/big_vocab.bin"
make_shard "$TMP/few.bin" 20 250
expect_error "too few tokens for one batch" "few.bin: .* too few" 1 $T0 $M --train "$TMP/few.bin"
expect_error "missing val file" "nope.bin: cannot open" 1 $T0 $M --train "$TMP/ok.bin" --val "$TMP/nope.bin" --val-every 1
mkfifo "$TMP/fifo"   # reading one would block until a writer comes: refused at once (timeout 10: the old hang)
expect_error "--train on a FIFO" "fifo: a FIFO \(named pipe\), not a token shard" 1 timeout 10 $T0 $M --train "$TMP/fifo"
expect_error "--train on a character device" "/dev/null: a character device, not a token shard" 1 $T0 $M --train /dev/null
expect_error "--init on a FIFO" "fifo: a FIFO \(named pipe\), not a model file" 1 timeout 10 $T0 $M --train "$TMP/ok.bin" --init "$TMP/fifo"
mkdir -p "$TMP/hfdir" && touch "$TMP/hfdir/model.safetensors"   # from_pretrained takes the directory: --init names the file in it
expect_error "--init on an exported directory" "hfdir: a directory, not a model file: --init takes the file, .*hfdir/model.safetensors" 1 \
    $T0 $M --train "$TMP/ok.bin" --init "$TMP/hfdir"
printf 'compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  zero_stage: 3\n' > "$TMP/accelerate.yaml"
expect_error "--config given accelerate's YAML" "accelerate.yaml:1:1: syntax error .*YAML, not JSON.*deepspeed_config_file" 1 \
    $T0 $M --train "$TMP/ok.bin" --config "$TMP/accelerate.yaml"
expect_error "--config on a FIFO" "fifo: a FIFO \(named pipe\), not a JSON file" 1 timeout 10 $T0 $M --train "$TMP/ok.bin" --config "$TMP/fifo"
# every other path the trainer and the exporter open, as a FIFO (issue 33: each one hung until killed)
expect_error "--tokenizer on a FIFO" "fifo: a FIFO \(named pipe\), not a tokenizer file" 1 timeout 10 $T0 $M --train "$TMP/ok.bin" --sample-every 1 --tokenizer "$TMP/fifo"
expect_error "--log on a FIFO" "fifo: a FIFO \(named pipe\), not a regular file for --log" 1 timeout 10 $T0 $M --train "$TMP/ok.bin" --log "$TMP/fifo"
mkdir -p "$TMP/fl" "$TMP/fm" "$TMP/ft" && mkfifo "$TMP/fl/latest" "$TMP/fm/manifest.json" "$TMP/ft/latest.tmp"
expect_error "--resume DIR whose latest is a FIFO" "fl/latest: a FIFO \(named pipe\), not a checkpoint name" 1 timeout 10 $T0 $M --train "$TMP/ok.bin" --resume "$TMP/fl"
expect_error "--resume DIR whose manifest.json is a FIFO" "fm/manifest.json: a FIFO \(named pipe\), not a manifest" 1 timeout 10 $T0 $M --train "$TMP/ok.bin" --resume "$TMP/fm"
expect_error "a FIFO latest.tmp in the --save directory: the save stops at once" "ft/latest.tmp: a FIFO \(named pipe\), not a file to write" 1 \
    timeout -s KILL 10 $T0 $M --train "$TMP/ok.bin" --save "$TMP/ft"   # KILL: SIGTERM would start another save
[ ! -e "$TMP/ft/latest.tmp" ] && [ ! -e "$TMP/ft/latest" ] && [ -z "$(ls "$TMP/ft" | grep ckpt_)" ]
check "... with nothing published, the FIFO removed with the save's temporary files" $?
expect_error "export_model reading a FIFO model file" "fifo: a FIFO \(named pipe\), not a model file" 1 timeout 10 ./build/export_model "$TMP/fifo" "$TMP/fifo_export"
expect_error "missing tokenizer" "tok.bin: cannot open" 1 $T0 $M --train "$TMP/ok.bin" --sample-every 1 --tokenizer "$TMP/tok.bin"
echo "garbage" > "$TMP/init.bin"
expect_error "bad --init file" "init.bin: truncated" 1 $T0 $M --train "$TMP/ok.bin" --init "$TMP/init.bin"
$T0 $M --train "$TMP/ok.bin" --steps 0 --save "$TMP/small" > /dev/null
expect_error "--init of another model" "--layers 3 disagrees with the model file.s layers 2" 1 $T0 $M --train "$TMP/ok.bin" --layers 3 --init "$TMP/small/ckpt_00000000/model.bin"

echo "== flags"
expect_error "unknown flag" "unknown flag '--bogus'" 1 $T0 --bogus 1
expect_error "a misspelt flag: did you mean" "unknown flag '--sample-length' \\(did you mean --sample-len\\?\\)" 1 $T0 --sample-length 32
expect_error "an underscore for a dash" "unknown flag '--val_every' \\(did you mean --val-every\\?\\)" 1 $T0 --val_every 10
expect_error "--flag=value" "unknown flag '--lr=0.1': flags take their value after a space, as in --lr 0.1" 1 $T0 --lr=0.1
expect_error "DeepSpeed's --deepspeed_config" "unknown flag '--deepspeed_config': the DeepSpeed config is --config FILE here" 1 $T0 --deepspeed_config ds.json
expect_error "the launcher's --local_rank" "unknown flag '--local_rank': each rank learns its rank from mpirun" 1 $T0 --local_rank 0
expect_error "missing value" "--steps: missing value" 1 $T0 --steps
# a suggestion only when close (a third of the shorter name): nothing for "--", "--x" or "--p"
expect_error "--help with a value" "--help takes no value, got '--help=1'" 1 $T0 --help=1
for f in -- --x --p; do
    $T0 $f > "$TMP/dym.txt" 2>&1
    [ $? -eq 1 ] && grep -q "^error: unknown flag '$f' (see --help)$" "$TMP/dym.txt"
    check "$f: unknown, with no did-you-mean ($(head -1 "$TMP/dym.txt"))" $?
done
expect_error "a misspelt preset: did you mean" "unknown preset 'tinny' \\(did you mean tiny\\?\\)" 1 $T0 --preset tinny
expect_error "not a number" "--batch: expected an integer" 1 $T0 --batch x
expect_error "negative count" "--steps: expected an integer" 1 $T0 --steps -5
expect_error "unknown arch" "unknown architecture" 1 $T0 --arch gpt5
expect_error "unknown preset" "unknown preset" 1 $T0 --preset huge
expect_error "unknown attention kernels" "--attention: expected cublas, flash or auto" 1 $T0 --attention fast
# the GPU step's path flags: one note each on the CPU trainer, which has one path
GPU_PATHS="--attention flash --lean-step 1 --fuse-residual 1 --device-loss 0 --plan-cache 1 --bias-grad-epilogue 1"
$T0 $M --train "$TMP/ok.bin" --steps 0 $GPU_PATHS > "$TMP/gpuflags.txt" 2>&1
st=$?
n=0; for f in --attention --lean-step --fuse-residual --device-loss --plan-cache --bias-grad-epilogue; do
    grep -q "^note: $f: picks one of the GPU trainer's step paths (train_gpt); the CPU trainer has one" "$TMP/gpuflags.txt" && n=$((n + 1))
done
[ $st -eq 0 ] && [ $n -eq 6 ] && [ "$(grep -c "^note: " "$TMP/gpuflags.txt")" -eq 6 ]
check "the CPU trainer says that each of the GPU step's path flags is the GPU trainer's ($n of 6 notes)" $?
for f in --lean-step --fuse-residual --device-loss --plan-cache --bias-grad-epilogue; do
    expect_error "$f 2" "$f: expected an integer in \[0, 1\], got '2'" 1 $T0 $f 2
done
expect_error "the removed --gpu-baseline" "unknown flag '--gpu-baseline'" 1 $T0 --gpu-baseline 1
expect_error "heads do not divide width" "not divisible by --heads" 1 $T0 --dim 50 --heads 4
expect_error "kv heads do not divide heads" "not divisible by --kv-heads" 1 $T0 --arch llama --heads 4 --kv-heads 3
expect_error "sequence longer than the model's" "exceeds the model's maximum" 1 $T0 --seq 100000
expect_error "bad schedule" "unknown schedule" 1 $T0 --lr-schedule wiggly
echo '{"zero_optimization": {"stage": "two"}}' > "$TMP/bad.json"
expect_error "config value of the wrong type" "bad.json: zero_optimization.stage: expected an integer in \\[0, 3\\], got \"two\"" 1 $T0 --config "$TMP/bad.json"
echo '{"zero_optimization": ' > "$TMP/broken.json"
expect_error "malformed config file" "broken.json:2:1: the document ends early" 1 $T0 --config "$TMP/broken.json"
# the suggestions come from --help: every flag the parser takes must be listed there
./build/z0/train_gpt_cpu --help > "$TMP/help.txt"
missing=$(grep -o '!strcmp(a, "--[a-z0-9-]*")' config/flags.h | grep -o -- '--[a-z0-9-]*' | sort -u |
          while read -r f; do grep -q -- "$f\b" "$TMP/help.txt" || echo "$f"; done)
check "--help lists every flag the parser takes (the did-you-mean candidates)${missing:+; missing: $missing}" $([ -z "$missing" ]; echo $?)
# docs/training.md claims every flag
undocumented=$(grep -o '!strcmp(a, "--[a-z0-9-]*")' config/flags.h | grep -o -- '--[a-z0-9-]*' | sort -u |
               while read -r f; do grep -qE -- "$f([^a-z0-9-]|$)" docs/training.md || echo "$f"; done)
check "docs/training.md names every flag the parser takes${undocumented:+; missing: $undocumented}" $([ -z "$undocumented" ]; echo $?)

# settings that do nothing in this run say so in one line each (and the run goes on)
expect_note "ZeRO++ at one rank" "ZeRO\+\+ .*no effect at one rank" \
    ./build/z3/train_gpt_cpu $M --train "$TMP/ok.bin" --steps 0 --zero-quantized-weights 1 --zero-hpz-partition-size 2
expect_note "--offload-ratio 0.5 with the shard one sub-group (DeepSpeed's 1e9 elements)" \
    "--offload-ratio: 0.5 splits nothing here: .*1 sub-group of 1000000000 elements.*--sub-group-size" \
    ./build/z3/train_gpt_cpu $M --train "$TMP/ok.bin" --steps 0 --offload-ratio 0.5
./build/z3/train_gpt_cpu $M --train "$TMP/ok.bin" --steps 0 --offload-ratio 0.5 --sub-group-size 1000 > "$TMP/note.txt" 2>&1
! grep -q "splits nothing" "$TMP/note.txt"; check "... and not with sub-groups of 1000 elements, which split it" $?
expect_note "--offload-dpu on a run no longer than its warm-up" "--offload-dpu: no effect in this run: the delay starts after 40 applied updates" \
    $T0 $M --train "$TMP/ok.bin" --steps 2 --offload-dpu 1
$T0 $M --train "$TMP/ok.bin" --steps 2 --offload-dpu 1 --dpu-warmup 1 > "$TMP/note.txt" 2>&1
! grep -q "no effect" "$TMP/note.txt"; check "... and none at --dpu-warmup 1, which delays step 2's update" $?
expect_note "hpZ over the whole world" "zero-hpz-partition-size: 2 is the world: .*no effect" \
    $MPIRUN -np 2 ./build/z3/train_gpt_cpu $M --train "$TMP/ok.bin" --steps 0 --persistence-threshold 0 --zero-hpz-partition-size 2
$T0 $M --train "$TMP/ok.bin" --steps 0 --offload-ratio 0.5 --sub-group-size 1000 > "$TMP/note.txt" 2>&1
[ "$(grep -c "^note: " "$TMP/note.txt")" -eq 1 ]
check "stage 0: the ratio's note alone, not one more for the sub-groups it would split" $?

for f in "--min-lr-frac -2" "--eps -1e-8" "--eps 0" "--clip -1" "--weight-decay -5" "--lr -1" "--beta1 1" "--timeout -1" "--keep-last -1"; do
    expect_error "out of range: $f" "${f%% *}: expected" 1 $T0 $f
done

echo "== ZeRO misuse: the ranks agree on one error, nobody hangs"
expect_error "global batch not divisible by world size" "Check batch related parameters.* 10 != 2 \\* 1 \\* 3 \\(train_batch_size from --total-batch" 3 \
    $MPIRUN -np 3 ./build/z1/train_gpt_cpu $M --train "$TMP/ok.bin" --total-batch 10
echo '{"zero_optimization": {"stage": 2}}' > "$TMP/z2.json"
expect_error "config asks for another stage than compiled, naming the binary that has it" \
    "asks for ZeRO stage 2 but this binary was built with ZERO=1: run build/z2/train_gpt_cpu, built with ZERO=2" 2 \
    $MPIRUN -np 2 ./build/z1/train_gpt_cpu $M --train "$TMP/ok.bin" --config "$TMP/z2.json"
expect_error "--zero-stage differs from the build" "asks for ZeRO stage 3 but this binary was built with ZERO=0: run build/z3/train_gpt_cpu" 1 $T0 --zero-stage 3
# from another directory: the binary of that stage beside this one, by its full path
expect_error "--zero-stage from elsewhere: the build/ beside the binary" "run $PWD/build/z3/train_gpt_cpu, built with ZERO=3" 1 \
    bash -c "cd '$TMP' && '$PWD/build/z0/train_gpt_cpu' --zero-stage 3"
# a stage whose binary was not built: how to build it
mkdir -p "$TMP/lone" && cp ./build/z0/train_gpt_cpu "$TMP/lone/"
expect_error "--zero-stage without that build" "asks for ZeRO stage 3 but this binary was built with ZERO=0 \(rebuild: make train_gpt_cpu ZERO=3\)" 1 \
    bash -c "cd '$TMP/lone' && ./train_gpt_cpu --zero-stage 3"
expect_error "ranks with different model sizes" "ranks disagree on the model" 2 \
    $MPIRUN -np 1 ./build/z1/train_gpt_cpu $M --train "$TMP/ok.bin" : -np 1 ./build/z1/train_gpt_cpu $M --train "$TMP/ok.bin" --layers 3
expect_error "stage-3 live cap below one unit" "--max-live 1000 is too small" 2 \
    $MPIRUN -np 2 ./build/z3/train_gpt_cpu $M --train "$TMP/ok.bin" --persistence-threshold 0 --max-live 1000
# the agreement check itself: ranks printing different errors must fail it, one rank alone passes
before=$fails
expect_error "negative control: ranks disagree (must fail)" "a" 2 bash -c 'echo "error: a"; echo "[rank 1] error: b"; exit 1' > /dev/null
expect_error "one rank of two prints, the other was killed" "a" 2 bash -c 'echo "[rank 1] error: a"; exit 1' > /dev/null
[ $fails -eq $((before + 1)) ]; r=$?; fails=$before
check "expect_error refuses disagreeing ranks and accepts a single printing rank" $r
[ $fails -eq 0 ]
