#!/usr/bin/env bash
# What the monitors do to files they did not just write (train/monitor.h, issue 33): a
# resumed run cuts only the records its checkpoint makes stale, keeping a damaged record,
# the records after it, a CSV row of any length, rows out of order and rows that do not
# read, each named in one line; a new run leaves a foreign file named like an event file
# as it is; a FIFO in the job directory never blocks; a CSV monitor on a full disk warns
# once and stops (a small tmpfs: needs root to mount, that part skipped otherwise).
cd "$(dirname "$0")/.."
source tests/lib.sh
trap 'umount "$TMP/mnt" 2> /dev/null; rm -rf "$TMP"' EXIT
make -s build/z0/train_gpt_cpu || exit 1
B=${B:-./build/z0/train_gpt_cpu}   # B=./build/asan_z0/train_gpt_cpu with ASAN_OPTIONS=detect_leaks=0 runs it under the sanitizers
make_shard "$TMP/train.bin" 20000 250
M="--preset tiny --vocab 250 --train $TMP/train.bin --batch 2 --seq 16 --threads 1 --quiet 1 --lr-schedule constant"
J="--tensorboard $TMP/m --csv-monitor $TMP/m --job-name J"
# events FILE: "offset step tag" of each record (framing and protobuf read here, CRCs not checked)
events() {
    /usr/bin/python3 - "$1" <<'PYEOF'
import struct, sys
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7F) << s; s += 7; i += 1
        if not b[i - 1] & 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i); f, w = key >> 3, key & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v, i = b[i:i + 8], i + 8
        elif w == 5: v, i = b[i:i + 4], i + 4
        else: n, i = varint(b, i); v, i = b[i:i + n], i + n
        yield f, v
d, at = open(sys.argv[1], "rb").read(), 0
while at + 12 <= len(d):
    n = struct.unpack("<Q", d[at:at + 8])[0]
    ev = dict(fields(d[at + 12:at + 12 + n]))
    tag = dict(fields(dict(fields(ev[5]))[1]))[1].decode() if 5 in ev else ""
    print(at, ev.get(2, 0), tag or "-")
    at += 16 + n
PYEOF
}

echo "== a resume after one damaged byte: only the records after the checkpoint go"
$B $M $J --steps 8 --save "$TMP/ck" --save-every 4 > /dev/null 2>&1 || exit 1
ev=$(ls "$TMP"/m/J/events.out.tfevents.*)
events "$ev" > "$TMP/records.txt"
# the first stale record: a loss, lr or grad norm at 8 samples (step 5's), or a timing after 8
cut_at=$(awk '$3 ~ /train_loss|lr$|grad_norm|loss_scale/ ? $2 >= 8 : $2 > 8 {print $1; exit}' "$TMP/records.txt")
printf '\xff' | dd of="$ev" bs=1 seek=200 conv=notrunc status=none   # one byte of an early record
cp "$ev" "$TMP/flipped"
$B $M $J --steps 8 --resume "$TMP/ck/ckpt_00000004" > "$TMP/resume.out" 2>&1; rc=$?
grep -E "warning|note" "$TMP/resume.out" | sed 's/^/       /'
[ $rc -eq 0 ] && [ "$(grep -c "warning: tensorboard: $ev: [0-9]* bytes from offset [0-9]* do not read as records (damaged): kept" "$TMP/resume.out")" = 1 ]
check "exit $rc, one warning names the damaged bytes, kept" $?
[ "$(stat -c %s "$ev")" = "$cut_at" ] && cmp -s -n "$cut_at" "$ev" "$TMP/flipped"
check "the file is the damaged one up to the first stale record at byte $cut_at (was: cut at the damage)" $?

echo "== CSV rows of any length, out of order, or unreadable: only the stale rows go"
$B $M $J --steps 8 --save "$TMP/ck2" --save-every 4 > /dev/null 2>&1 || exit 1
csv="$TMP/m/J/Train_Samples_train_loss.csv"
/usr/bin/python3 - "$csv" <<'PYEOF'
import sys
rows = open(sys.argv[1], newline="").read().split("\r\n")[:-1]   # header, samples 0 2 ... 14
long = "2," + "9" * 600                                         # a 602-byte row, at or before the checkpoint
rows = rows[:2] + [long, "not a row"] + rows[2:] + ["4,1.5"]      # and a row out of order at the end
open(sys.argv[1], "w", newline="").write("".join(r + "\r\n" for r in rows))
PYEOF
$B $M $J --steps 8 --resume "$TMP/ck2/ckpt_00000004" > "$TMP/csv.out" 2>&1; rc=$?
grep -E "warning: csv|note: csv" "$TMP/csv.out" | sed 's/^/       /'
got=$(cut -d, -f1 "$csv" | cut -c1-9 | tr -d '\r' | tr '\n' ' ')
echo "       rows' first fields: $got"
[ $rc -eq 0 ] && [ "$got" = "step 0 2 not a row 2 4 6 4 8 10 12 14 " ] &&
    grep -q "warning: csv_monitor: $csv: 1 row not of the form step,value, kept as found" "$TMP/csv.out"
check "the long row, the unreadable one (named in a warning) and the late 4 kept; 8-14 written once, by the resumed run" $?

echo "== a new run leaves a foreign file named like an event file as it is"
head -c 100000 /dev/urandom > "$TMP/m/J/events.out.tfevents.1.other.1.0"
cp "$TMP/m/J/events.out.tfevents.1.other.1.0" "$TMP/foreign"
$B $M $J --steps 2 > "$TMP/new.out" 2>&1; rc=$?
[ $rc -eq 0 ] && cmp -s "$TMP/foreign" "$TMP/m/J/events.out.tfevents.1.other.1.0" && grep -q "other.1.0: 100000 bytes from offset 0 do not read" "$TMP/new.out"
check "100000 foreign bytes untouched, one warning (was: cut to nothing)" $?

echo "== FIFOs in the job directory never block"
rm -rf "$TMP/m" && mkdir -p "$TMP/m/J" && mkfifo "$TMP/m/J/events.out.tfevents.0.host.1.0"
timeout -s KILL 20 $B $M $J --steps 2 > "$TMP/fifo.out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "warning: tensorboard: .*events.out.tfevents.0.host.1.0: a FIFO (named pipe), not an event file: left alone" "$TMP/fifo.out"
check "a FIFO named like an event file: left alone with a warning (exit $rc)" $?
rm -rf "$TMP/m" && mkdir -p "$TMP/m/J" && mkfifo "$TMP/m/J/Train_Samples_lr.csv"
expect_error "a FIFO named like a metric's CSV file" "Train_Samples_lr.csv: a FIFO \\(named pipe\\), not a CSV file" 1 timeout -s KILL 20 $B $M $J --steps 2

echo "== a CSV monitor on a full disk (a tmpfs of 3 pages: the third CSV file finds no room): one warning, then it stops"
mkdir -p "$TMP/mnt"
if ! mount -t tmpfs -o size=12k tmpfs "$TMP/mnt" 2> "$TMP/mount.err"; then
    echo "  skip this part: cannot mount a tmpfs here ($(head -1 "$TMP/mount.err"))"
else
    $B $M --csv-monitor "$TMP/mnt" --steps 60 > /dev/null 2> "$TMP/full.out"; rc=$?
    grep warning "$TMP/full.out" | head -3 | sed 's/^/       /'
    rows=$(tail -n +2 "$TMP/mnt/DeepSpeedJobName/Train_Samples_train_loss.csv" | wc -l)
    umount "$TMP/mnt"
    [ $rc -eq 0 ] && [ "$(grep -c warning "$TMP/full.out")" = 1 ] && grep -q "write failed (No space left on device): this monitor stops here" "$TMP/full.out" && [ "$rows" = 1 ]
    check "exit $rc, one warning in 60 steps (was: one per metric and step), no row after it (train_loss: $rows row)" $?
fi
[ $fails -eq 0 ]
