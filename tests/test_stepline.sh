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
recs = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
ok = len(recs) == 4 and all(r["elapsed_s"] > 0 and r["gflops"] > 0 and r["mem_bytes"] > 1e6 and "mfu" not in r for r in recs)
ok = ok and all(b["elapsed_s"] >= a["elapsed_s"] for a, b in zip(recs, recs[1:]))
print(f"      elapsed_s {[round(r['elapsed_s'], 3) for r in recs]}, mem_bytes {recs[-1]['mem_bytes']:.0f}")
sys.exit(0 if ok else 1)
PYEOF
check "JSONL train records: elapsed_s (growing), gflops, mem_bytes; no mfu without a peak" $?

$MPIRUN -np 2 build/z3/train_gpt_cpu $M --steps 3 --accum 2 --peak-tflops 0.5 --breakdown 1 --log "$TMP/b.jsonl" > "$TMP/b.out" 2>&1
grep -A1 -m1 '^step    2/3' "$TMP/b.out" | sed 's/^/      /'
grep -qE '\| MFU [0-9.]+% \|' "$TMP/b.out" && \
    grep -qE '^          forward [0-9.]+ ms \| backward [0-9.]+ ms \| communication wait [0-9.]+ ms \| optimizer [0-9.]+ ms$' "$TMP/b.out"
check "--peak-tflops gives MFU; --breakdown a line of phases" $?
$PY - "$TMP/b.jsonl" <<'PYEOF'
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
ok = True
for r in recs:
    mfu = r["gflops"] / (0.5e3 * 2)                       # 0.5 TFLOP/s per rank, 2 ranks
    phases = [r["forward_ms"], r["backward_ms"], r["comm_wait_ms"], r["optimizer_ms"]]
    ok = ok and abs(r["mfu"] - mfu) < 1e-9 and abs(sum(phases) - r["ms"]) <= 1e-6 * r["ms"] + 1e-6 and min(phases) >= 0
for r in recs:
    print(f"      step {r['step']}: forward {r['forward_ms']:.1f} + backward {r['backward_ms']:.1f} + comm wait {r['comm_wait_ms']:.1f} + "
          f"optimizer {r['optimizer_ms']:.1f} = {sum([r['forward_ms'], r['backward_ms'], r['comm_wait_ms'], r['optimizer_ms']]):.3f} ms; "
          f"the step {r['ms']:.3f} ms; mfu {r['mfu']:.4f}")
sys.exit(0 if ok else 1)
PYEOF
check "JSONL: mfu = achieved / (peak x ranks); the four phases are disjoint and add up to the step's time (2 ranks, ZeRO-3, accumulation 2)" $?

echo '{"wall_clock_breakdown": true}' > "$TMP/ds.json"
build/z0/train_gpt_cpu $M --steps 2 --config "$TMP/ds.json" > "$TMP/c.out" 2>&1
grep -q '^          forward .* optimizer' "$TMP/c.out"
check "the config's wall_clock_breakdown: true turns the breakdown on" $?

echo "$fails failure(s)"
[ $fails -eq 0 ]
