#!/usr/bin/env bash
# DeepSpeed's monitors (train/monitor.h, docs/monitoring.md): the TensorBoard event files
# and csvMonitor's CSV files of a run configured by a DeepSpeed config, of its resume
# from an earlier checkpoint (no step written twice), and of a new run in the same job
# (which starts the files over), each decoded by tests/tfevents_check.py independently of
# the writer (Debian's python3-protobuf and python3-crc32c) and checked against the run's
# JSONL log; fp16's loss scale; the flags; the wandb note; a directory that cannot be made;
# a second live run in the same job, refused by the job directory's lock.
cd "$(dirname "$0")/.."
source tests/lib.sh
first=""
trap '[ -n "$first" ] && kill -9 $first 2> /dev/null; rm -rf "$TMP"' EXIT
if ! /usr/bin/python3 -c "import google.protobuf, crc32c" 2> /dev/null; then
    echo "SKIP: python3-protobuf and python3-crc32c are needed (bash scripts/setup.sh installs them)"; exit 77
fi
# decode LOG [--tensorboard DIR] [--csv DIR]: tests/tfevents_check.py, its summary lines shown
decode() {
    /usr/bin/python3 tests/tfevents_check.py "$@" > "$TMP/check.out"; local st=$?
    grep -E "^(tensorboard|csv_monitor):|PROBLEM|train_loss|loss_scale|points: " "$TMP/check.out" | sed 's/^/       /'
    return $st
}
make -s build/z0/train_gpt_cpu || exit 1
B=./build/z0/train_gpt_cpu
make_shard "$TMP/train.bin" 20000 250
make_shard "$TMP/val.bin" 4000 250 1
M="--preset tiny --vocab 250 --train $TMP/train.bin --val $TMP/val.bin --batch 2 --seq 16 --threads 1 --val-every 3 --val-batches 1"
cat > "$TMP/ds.json" <<EOF
{"wall_clock_breakdown": true,
 "tensorboard": {"enabled": true, "output_path": "$TMP/tb", "job_name": "job"},
 "csv_monitor": {"enabled": true, "output_path": "$TMP/csv", "job_name": "job"},
 "wandb": {"enabled": true, "project": "zeroc-test", "team": "me"}}
EOF

echo "== a DeepSpeed config's tensorboard, csv_monitor and wandb blocks, 6 steps, checkpoints at 3 and 6"
RNG="--shuffle 1 --sample-every 2 --sample-len 4"   # what the random state drives: shuffled data, samples at temperature 1
$B $M $RNG --config "$TMP/ds.json" --steps 6 --save "$TMP/ck" --save-every 3 --log "$TMP/run.jsonl" > "$TMP/a.out" 2>&1; rc=$?
grep -E "^(tensorboard|csv_monitor):|note: .*wandb" "$TMP/a.out" | sed 's/^/       /'
check "the run (exit $rc)" $rc
grep -q "note: .*wandb: no effect here: .*wandb sync --sync-tensorboard -p zeroc-test -e me $TMP/tb/job" "$TMP/a.out"
check "the wandb block: one note, that it does nothing, naming the upload line" $?
# a wandb block never turns the tensorboard block on
$B $M --steps 1 --config "$(printf '{"wandb": {"enabled": true}, "tensorboard": {"enabled": false, "output_path": "%s"}}' "$TMP/tbw" > "$TMP/w.json"; echo "$TMP/w.json")" > "$TMP/w.out" 2>&1
st=$?
[ $st -eq 0 ] && [ ! -e "$TMP/tbw" ] && grep -q "wandb: no effect here" "$TMP/w.out"
check "wandb enabled with tensorboard disabled: no event files written (exit $st)" $?
decode "$TMP/run.jsonl" --tensorboard "$TMP/tb/job" --csv "$TMP/csv/job"; st=$?
check "every record decoded, CRCs verified, equal to the log: DeepSpeed's tags at the samples seen" $st
head -c 40 "$TMP/csv/job/Train_Samples_train_loss.csv" | od -c | head -2 | sed 's/^/       /'
[ "$(head -1 "$TMP/csv/job/Train_Samples_train_loss.csv")" = $'step,train_loss\r' ] && sed -n 2p "$TMP/csv/job/Train_Samples_train_loss.csv" | grep -q '^0,'
check "Train_Samples_train_loss.csv: csvMonitor's header, step 1's loss at 0 samples" $?
grep -q '"tensorboard":{"enabled":true,"output_path":"'"$TMP"'/tb","job_name":"job"}' "$TMP/run.jsonl"
check "the log's config record holds the monitors" $?

echo "== --resume from step 3 after the run reached 6: the job's files hold each step once"
cp "$TMP/run.jsonl" "$TMP/unbroken.jsonl"   # the resume cuts the log after step 3 and appends to it
$B $M $RNG --config "$TMP/ds.json" --steps 6 --resume "$TMP/ck/ckpt_00000003" --log "$TMP/run.jsonl" > "$TMP/b.out" 2>&1; rc=$?
grep -E "note: (tensorboard|csv_monitor)" "$TMP/b.out" | sed 's/^/       /'
check "the resumed run (exit $rc)" $rc
grep -q "note: tensorboard: $TMP/tb/job: 3[0-9] records of an earlier run after step 3 (6 samples) removed" "$TMP/b.out"
check "a note says what of the earlier run was removed" $?
decode "$TMP/run.jsonl" --tensorboard "$TMP/tb/job" --csv "$TMP/csv/job"; st=$?
[ "$(ls "$TMP"/tb/job/events.out.tfevents.* | wc -l)" = 2 ]; check "two event files: the first run's, cut after step 3, and the resumed run's" $?
check "steps 1-6 once each, steps 4-6 with the resumed run's values (its timings differ)" $st
losses() { grep '"type":"train"' "$1" | grep -o '"loss":[^,]*'; }
[ "$(losses "$TMP/run.jsonl")" = "$(losses "$TMP/unbroken.jsonl")" ] && same_samples "$TMP/unbroken.jsonl" "$TMP/run.jsonl"
check "the resumed steps 4-6 are the unbroken run's: losses bitwise (shuffled data), samples at temperature 1" $?

echo "== a new run in the same job starts the files over"
$B $M --tensorboard "$TMP/tb" --csv-monitor "$TMP/csv" --job-name job --steps 2 --log "$TMP/new.jsonl" > "$TMP/c.out" 2>&1; rc=$?
grep -q "note: tensorboard: .*a new run (no --resume) starts the job's files over" "$TMP/c.out" && [ $rc -eq 0 ]
check "the flags --tensorboard, --csv-monitor, --job-name; a note on the earlier run's records" $?
decode "$TMP/new.jsonl" --tensorboard "$TMP/tb/job" --csv "$TMP/csv/job"; st=$?
check "only the new run's 2 steps remain (no breakdown: no elapsed_time_ms_* tags)" $st

echo "== fp16: the loss scale; a torn last record (a crash) is cut by the next run"
$B $M --fp16 1 --tensorboard "$TMP/fp" --steps 3 --save "$TMP/ck16" --log "$TMP/fp16.jsonl" --quiet 1 2> /dev/null
ev=$(ls "$TMP"/fp/DeepSpeedJobName/events.out.tfevents.*)
printf '\x30\x00\x00\x00\x00\x00\x00\x00\x01\x02' >> "$ev"   # a record cut off inside its header
$B $M --fp16 1 --tensorboard "$TMP/fp" --steps 4 --resume "$TMP/ck16" --log "$TMP/fp16.jsonl" --quiet 1 2> /dev/null
decode "$TMP/fp16.jsonl" --tensorboard "$TMP/fp/DeepSpeedJobName"; st=$?
check "Train/Samples/loss_scale with fp16, DeepSpeedJobName by default, the torn record gone" $st

echo "== a second live run in the same job is refused and touches nothing of the first's (issue 33)"
L="--tensorboard $TMP/live --csv-monitor $TMP/live --job-name J"
$B $M $L --steps 1000000 --log "$TMP/live.jsonl" --quiet 1 > /dev/null 2>&1 &
first=$!
wait_train_steps "$TMP/live.jsonl" 2 $first
ls -i "$TMP/live/J" | grep -v lock | sort > "$TMP/live_before.txt"
rows_before=$(wc -l < "$TMP/live/J/Train_Samples_train_loss.csv")
expect_error "run B in run A's job directory" "$TMP/live/J is in use by another run \\(pid $first on host .*choose another --job-name" 1 \
    $B $M $L --steps 5
wait_train_steps "$TMP/live.jsonl" $((rows_before + 2)) $first
ls -i "$TMP/live/J" | grep -v lock | sort | diff "$TMP/live_before.txt" - && [ "$(wc -l < "$TMP/live/J/Train_Samples_train_loss.csv")" -gt "$rows_before" ]
check "run A's event and CSV files are the same files (same inodes), still growing" $?
kill -9 $first; wait $first 2> /dev/null; first=""
$B $M $L --steps 2 --quiet 1 > "$TMP/after.out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "note: tensorboard: $TMP/live/J: took over the lock of pid" "$TMP/after.out"
check "after a kill -9 of run A, the next run takes its lock over with a note" $?

echo "== bad input"
expect_error "an output_path that cannot be made stops every rank, naming the flag" \
    "tensorboard \(--tensorboard\): $TMP/train.bin(/x)?: (cannot create|exists and is not a directory)" 2 $MPIRUN -np 2 $B $M --tensorboard "$TMP/train.bin/x" --steps 1
expect_error "csv_monitor in a file's place: the flag named" "csv_monitor \(--csv-monitor\): $TMP/train.bin: exists and is not a directory" 1 \
    $B $M --csv-monitor "$TMP/train.bin" --steps 1
$B $M --job-name j --steps 1 --quiet 1 > "$TMP/j.out" 2>&1
grep -q "note: --job-name: no effect without --tensorboard DIR or --csv-monitor DIR" "$TMP/j.out"; check "--job-name alone: a note" $?

[ $fails -eq 0 ]
