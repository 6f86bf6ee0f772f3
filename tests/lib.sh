# Shared helpers for the test scripts (sourced).
# a python3 with numpy: Debian's here and in CI; on the GPU machine /usr/bin/python3 may lack it
PY=/usr/bin/python3
for _py in "${PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$_py" ] && "$_py" -c "import numpy" >/dev/null 2>&1; then PY=$_py; break; fi
done
MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader"
TMP=$(mktemp -d /tmp/zeroc_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0

# make_shard FILE NTOKENS VOCAB [SEED]: a learnable synthetic token shard
make_shard() {
    $PY - "$@" <<'PYEOF'
import sys, numpy as np
path, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
rng = np.random.default_rng(seed)
tok = (((np.arange(n) % 89) * 7 + rng.integers(0, 3, n)) % vocab).astype(np.uint16)
h = np.zeros(256, dtype=np.int32); h[:3] = [20240520, 1, n]
open(path, "wb").write(h.tobytes() + tok.tobytes())
PYEOF
}

# check NAME CONDITION-EXIT-CODE. When NAME holds a command substitution, take the status first
# (st=$?; check "... $(...)" $st): bash expands $? after the substitution, which sets it.
check() {
    if [ "$2" -eq 0 ]; then echo "  ok   $1"; else echo "  FAIL $1"; fails=$((fails+1)); fi
}

# expect_error NAME PATTERN RANKS CMD...: the command must fail cleanly: a non-zero exit
# below 124 (no crash, no hang, not killed), an error line matching PATTERN on at least one
# rank (mpirun may kill the slower ranks before they print), and no disagreement: every error
# line any rank printed (without its "[rank R] " prefix) is one the rank that printed the most
# also printed. RANKS: how many ranks run the command (documentation; the checks hold for any).
expect_error() {
    local name="$1" pat="$2" ranks="$3"; shift 3
    local out="$TMP/err.txt"
    timeout 60 "$@" > "$out" 2>&1
    local rc=$?
    local n; n=$(grep -cE "error: .*$pat" "$out")
    local differ; differ=$(awk '/^(\[rank [0-9]+\] )?error: / {
            r = "0"; line = $0
            if (match($0, /^\[rank [0-9]+\] /)) { r = substr($0, 7, RLENGTH - 8); line = substr($0, RLENGTH + 1) }
            seen[r, line] = 1; all[line] = 1; count[r]++ }
        END { best = ""; for (r in count) if (best == "" || count[r] > count[best]) best = r
              for (l in all) if (!((best, l) in seen)) print l }' "$out")
    if [ $rc -ge 1 ] && [ $rc -lt 124 ] && [ "$n" -ge 1 ] && [ -z "$differ" ] && ! grep -qiE "segmentation|core dumped|signal" "$out"; then
        echo "  ok   $name: $(grep -m1 -E "error: " "$out" | sed -E 's/^\[rank [0-9]+\] //')"
    else
        echo "  FAIL $name (exit $rc, $n matching error lines${differ:+, ranks disagree: $differ})"; sed 's/^/       /' "$out" | head -8; fails=$((fails+1))
    fi
}

# expect_note NAME PATTERN CMD...: the command succeeds and prints one note or warning matching PATTERN
# (a setting with no effect says so once, and the run goes on)
expect_note() {
    local name="$1" pat="$2"; shift 2
    timeout 60 "$@" > "$TMP/note.txt" 2>&1
    local rc=$? n; n=$(grep -cE "(note|warning): .*$pat" "$TMP/note.txt")
    if [ $rc -eq 0 ] && [ "$n" -eq 1 ]; then
        echo "  ok   $name: $(grep -m1 -E "(note|warning): .*$pat" "$TMP/note.txt")"
    else
        echo "  FAIL $name (exit $rc, $n matching lines)"; sed 's/^/       /' "$TMP/note.txt" | head -8; fails=$((fails+1))
    fi
}

# compare_losses A.jsonl B.jsonl N TOL WHAT: both logs hold N train losses, with a max relative
# deviation <= TOL; prints it
compare_losses() {
    $PY - "$@" <<'PYEOF'
import json, sys
pa, pb, n, tol, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
a, b = ([r["loss"] for r in map(json.loads, open(p)) if r.get("type") == "train"] for p in (pa, pb))
d = max((abs(x - y) / abs(y) for x, y in zip(a, b)), default=float("inf"))
print(f"       {what}: {len(a)} and {len(b)} losses, max rel deviation {d:.1e}")
sys.exit(0 if len(a) == len(b) == n and d <= tol else 1)
PYEOF
}

# same_samples UNBROKEN.jsonl RESUMED.jsonl: every --sample-every sample the resumed run logged at a step
# the unbroken run reached (token ids, drawn at temperature 1 from the sampling RNG, which the checkpoint
# carries) equals the unbroken run's; at least one. Prints how many.
same_samples() {
    $PY - "$@" <<'PYEOF'
import json, sys
def samples(path):
    return {r["step"]: r["tokens"] for r in map(json.loads, open(path)) if r.get("type") == "sample"}
a, b = samples(sys.argv[1]), samples(sys.argv[2])
both = sorted(s for s in b if s in a)
same = [s for s in both if a[s] == b[s]]
print(f"       samples of the resumed run at steps {both}: {len(same)} equal the unbroken run's")
sys.exit(0 if both and len(same) == len(both) else 1)
PYEOF
}

# wait_train_steps LOG N [PID]: until the JSONL log LOG has N train records (60 s at most;
# returns 1 sooner if process PID is gone)
wait_train_steps() {
    local i n
    for i in $(seq 600); do
        n=$(grep -c '"type":"train"' "$1" 2> /dev/null)
        [ "${n:-0}" -ge "$2" ] && return 0
        [ -n "$3" ] && ! kill -0 "$3" 2> /dev/null && return 1
        sleep 0.1
    done
    return 1
}

# proc_state PID: the process's state letter from /proc/PID/stat (R, S, T stopped, Z zombie, ...), "" if gone
proc_state() { sed -E 's/.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2> /dev/null; }

# wait_state PID STATE: until the process is in STATE (60 s at most; returns 1 then)
wait_state() {
    local i
    for i in $(seq 600); do [ "$(proc_state "$1")" = "$2" ] && return 0; sleep 0.1; done
    return 1
}
