#!/usr/bin/env bash
# The C GPT-2 tokenizer (tokenizer.h, via ./prepare_data) against js-tiktoken's "gpt2"
# encoding, token for token, at test time: the whole Brown text (train + val shards), the
# whole nlp-corpus, hand-written hard strings, random Unicode; decode(encode(x)) == x on
# random bytes with invalid UTF-8; the header compiled as C++ (g++, and nvcc when present);
# timing of tokenizing Brown. Exit 0 pass, 77 skip, other fail.
set -uo pipefail
cd "$(dirname "$0")/.."
T=data/gpt2_tokenizer.bin
fail() { echo "FAIL: $*"; exit 1; }

command -v node >/dev/null 2>&1 || { echo "SKIP: node not found (run bash scripts/setup.sh)"; exit 77; }
[ -f node_modules/js-tiktoken/package.json ] && [ -d node_modules/nlp-corpus/builds ] ||
    { echo "SKIP: node_modules missing (run bash scripts/setup.sh)"; exit 77; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
make -s prepare_data data >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "make prepare_data data"; }
echo "built ./prepare_data and the data (make prepare_data data)"

# js-tiktoken reference checks (each prints what it checked)
node tests/tiktoken_ref.js shard data/brown/train.txt data/brown/train.bin || fail "Brown train shard vs js-tiktoken"
node tests/tiktoken_ref.js shard data/brown/val.txt data/brown/val.bin || fail "Brown val shard vs js-tiktoken"
node tests/tiktoken_ref.js nlp ./prepare_data $T || fail "nlp-corpus vs js-tiktoken"
node tests/tiktoken_ref.js nasty ./prepare_data $T || fail "hand-written strings vs js-tiktoken"
node tests/tiktoken_ref.js unicode ./prepare_data $T 3000 || fail "random Unicode vs js-tiktoken"
node tests/tiktoken_ref.js roundtrip ./prepare_data $T 150 || fail "decode(encode(x)) == x"

# the header from C++ (nvcc compiles host code as C++)
cat >"$tmp/t.cpp" <<'EOF'
#include "tokenizer.h"
int main(int argc, char **argv) {
    Tokenizer t; tokenizer_init(&t, argv[1]);
    const char *s = "Hello world, it's 2024! \xe4\xb8\xad\xe6\x96\x87 \xff";
    int *ids; size_t n = tokenizer_encode(&t, s, strlen(s), &ids);
    for (size_t i = 0; i < n; i++) printf("%d\n", ids[i]);
    size_t len; const unsigned char *b = tokenizer_decode(&t, GPT2_EOT, &len);
    fprintf(stderr, "%.*s %d\n", (int)len, (const char *)b, tokenizer_vocab_size(&t));
    free(ids); tokenizer_free(&t); return 0;
}
EOF
want=$(printf "Hello world, it's 2024! \xe4\xb8\xad\xe6\x96\x87 \xff" | ./prepare_data --encode)
for cxx in g++ /usr/local/cuda/bin/nvcc; do
    command -v $cxx >/dev/null 2>&1 || { echo "C++ check: $cxx not found, skipped"; continue; }
    ext=cpp; [ $cxx = g++ ] || { ext=cu; cp "$tmp/t.cpp" "$tmp/t.cu"; }
    flags="-std=c++17 -I. -O1"; [ $cxx = g++ ] && flags="$flags -Wall -Wextra -Wno-unused-function -Wno-unused-parameter -Werror"
    $cxx $flags "$tmp/t.$ext" -o "$tmp/t_$ext" -lpcre2-8 >"$tmp/cxx.log" 2>&1 || { cat "$tmp/cxx.log"; fail "tokenizer.h does not compile with $cxx"; }
    got=$("$tmp/t_$ext" $T 2>"$tmp/err") || fail "$cxx build of tokenizer.h failed to run"
    [ "$got" = "$want" ] || fail "$cxx build encodes differently from ./prepare_data"
    [ "$(cat "$tmp/err")" = "<|endoftext|> 50257" ] || fail "$cxx build: decode(EOT)/vocab size wrong: $(cat "$tmp/err")"
    echo "C++ check: tokenizer.h compiles with $cxx and encodes identically"
done

# timing: Brown (train + val) through the C tokenizer
cat data/brown/train.txt data/brown/val.txt >"$tmp/brown.txt"
bytes=$(stat -c %s "$tmp/brown.txt")
s=$(date +%s.%N)
./prepare_data --quiet --input "$tmp/brown.txt" --out "$tmp/brown" || fail "tokenizing Brown"
e=$(date +%s.%N)
ntok=$(( ($(stat -c %s "$tmp/brown.bin") - 1024) / 2 ))
awk -v b=$bytes -v n=$ntok -v s=$s -v e=$e 'BEGIN { t = e - s; printf "timing: Brown corpus %.2f MB -> %d tokens in %.2f s (%.1f MB/s, %.2fM tokens/s, process start and file I/O included)\n", b / 1e6, n, t, b / 1e6 / t, n / 1e6 / t }'
echo "PASS: C tokenizer is token-for-token identical to js-tiktoken gpt2 and round-trips arbitrary bytes"
