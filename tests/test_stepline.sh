#!/usr/bin/env bash
# The step line and the JSONL train record (docs/training.md, "The step line"): tokens/s, GFLOP/s or MFU
# against --peak-tflops, memory in use, elapsed time and ETA; --breakdown (and the config's
# wall_clock_breakdown) adds forward, backward, communication-wait and optimizer times.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s zero-bins > /dev/null || exit 1
make_shard "$TMP/tok.bin" 100000 500 5
M="--preset tiny --vocab 500 --train $TMP/tok.bin --batch 2 --seq 32 --threads 1"

$MPIRUN -np 2 build/z3/train_gpt_cpu $M --steps 4 --log "$TMP/a.jsonl" > "$TMP/a.out" 2>&1
echo "      $(grep -m1 '^step    2/4' "$TMP/a.out")"
grep -qE '^step    2/4 \| loss [0-9.]+ \| lr .* \| norm [0-9.]+ \| [0-9.]+ ms \| [0-9]+ tok/s \| [0-9.]+ GFLOP/s \| mem [0-9.]+ GiB \| 0:00:[0-9]{2}, ETA 0:00:[0-9]{2}$' "$TMP/a.out"
check "the step line: loss, lr, norm, ms, tokens/s, GFLOP/s (no peak on the CPU), memory, elapsed, ETA" $?
$PY - "$TMP/a.jsonl" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
ok = len(recs) == 4 and all(r["elapsed_s"] > 0 and r["gflops"] > 0 and r["mem_bytes"] > 1e6 and "mfu" not in r for r in recs)
ok = ok and all(b["elapsed_s"] >= a["elapsed_s"] for a, b in zip(recs, recs[1:]))
print(f"      elapsed_s {[round(r['elapsed_s'], 3) for r in recs]}, mem_bytes {recs[-1]['mem_bytes']:.0f}")
sys.exit(0 if ok else 1)
PYEOF
check "JSONL train records: elapsed_s (growing), gflops, mem_bytes; no mfu without a peak" $?

$MPIRUN -np 2 build/z3/train_gpt_cpu $M --steps 3 --peak-tflops 0.5 --breakdown 1 --log "$TMP/b.jsonl" > "$TMP/b.out" 2>&1
grep -A1 -m1 '^step    2/3' "$TMP/b.out" | sed 's/^/      /'
grep -qE '\| MFU [0-9.]+% \|' "$TMP/b.out" && \
    grep -qE '^          forward [0-9.]+ ms \| backward [0-9.]+ ms \| communication wait [0-9.]+ ms \| optimizer [0-9.]+ ms$' "$TMP/b.out"
check "--peak-tflops gives MFU; --breakdown a line of phases" $?
$PY - "$TMP/b.jsonl" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
ok = True
for r in recs:
    mfu = r["gflops"] / (0.5e3 * 2)                       # 0.5 TFLOP/s per rank, 2 ranks
    parts = r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"]
    ok = ok and abs(r["mfu"] - mfu) < 1e-9 and parts <= r["ms"] * 1.0001 and r["comm_wait_ms"] >= 0
print(f"      step 1: {recs[0]['forward_ms']:.1f} + {recs[0]['backward_ms']:.1f} + {recs[0]['optimizer_ms']:.1f} ms of {recs[0]['ms']:.1f}; "
      f"comm wait {recs[0]['comm_wait_ms']:.1f} ms; mfu {recs[0]['mfu']:.4f}")
sys.exit(0 if ok else 1)
PYEOF
check "JSONL: mfu = achieved / (peak x ranks); forward + backward + optimizer within the step's time" $?

echo '{"wall_clock_breakdown": true}' > "$TMP/ds.json"
build/z0/train_gpt_cpu $M --steps 2 --config "$TMP/ds.json" > "$TMP/c.out" 2>&1
grep -q '^          forward .* optimizer' "$TMP/c.out"
check "the config's wall_clock_breakdown: true turns the breakdown on" $?

echo "$fails failure(s)"
[ $fails -eq 0 ]
