#!/usr/bin/env bash
# Every parser of outside input fuzzed for a few seconds under AddressSanitizer and
# UndefinedBehaviorSanitizer (libFuzzer): the token shard header, the checkpoint manifest,
# the optimizer shard header, the tokenizer file, the DeepSpeed JSON config and the
# safetensors header (all JSON strictly: seeds with NUL bytes, \u0000 and trailing data),
# safetensors headers of up to 100k tensors (the duplicate check against the timeout), and
# the finiteness check of model values. `make fuzz` runs each for a minute. Skips with a
# message without clang's libFuzzer.
cd "$(dirname "$0")/.."
source tests/lib.sh
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' > "$TMP/probe.c"
if ! clang -fsanitize=fuzzer,address,undefined "$TMP/probe.c" -o "$TMP/probe" > "$TMP/probe.log" 2>&1; then
    echo "SKIP: clang with libFuzzer is not available ($(head -1 "$TMP/probe.log")); scripts/setup.sh installs clang and libclang-rt-14-dev"
    exit 77
fi
make -s -j2 fuzz-bins || exit 1
targets=$(ls tests/fuzz/fuzz_*.c | sed -E 's|tests/fuzz/fuzz_(.*)\.c|\1|')
echo "== $(echo $targets | wc -w) targets: $(echo $targets)"
FUZZ_WORK="$TMP/corpus" bash scripts/fuzz.sh "${FUZZ_SECONDS:-4}" $targets; check "every target ran clean" $?
for t in $targets; do [ -n "$(ls tests/fuzz/corpus/$t 2> /dev/null)" ]; check "fuzz_$t has a seed corpus" $?; done
[ $fails -eq 0 ]
