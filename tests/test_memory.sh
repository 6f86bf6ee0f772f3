#!/usr/bin/env bash
# Memory, all of it (docs/memory.md):
#   - activation checkpointing: losses and every checkpoint byte (parameters, m, v) bitwise
#     identical with and without --recompute, gpt2 and llama, stages 0 and 3, 1 and 2 ranks;
#   - sharded initialization: the initial model is bitwise the same whether one rank generates
#     all of it or each of 3 stage-3 ranks generates only its slices;
#   - the estimator (--estimate-memory with the run's flags) equals every measured allocation,
#     with recompute on;
#   - the largest micro batch within a budget (--memory-budget) against measured allocations;
#   - peak resident memory per rank at 4 ranks falls stage by stage, and sits within a stated
#     margin above the footprint the run prints, for a model whose layers dominate its embedding;
#     starting from a safetensors file (read a slice at a time) costs no more than a tensor.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
make -s zero-bins export_model > /dev/null || exit 1
make_shard "$TMP/tok.bin" 200000 500 3

run() {   # run NAME NP STAGE FLAGS...: one training run, log and checkpoint under $TMP/NAME
    local name=$1 np=$2 stage=$3; shift 3
    $MPIRUN -np "$np" build/z$stage/train_gpt_cpu --train "$TMP/tok.bin" --threads 1 --quiet 1 \
        --log "$TMP/$name.jsonl" --save "$TMP/$name" "$@" > "$TMP/$name.out" 2>&1
}
losses() { grep '"type":"train"' "$TMP/$1.jsonl" | sed -E 's/.*"loss":([^,]*).*/\1/' | tr '\n' ' '; }
same_checkpoint() {   # every file of the two final checkpoints byte for byte
    local a="$TMP/$1/$(cat "$TMP/$1/latest")" b="$TMP/$2/$(cat "$TMP/$2/latest")" f
    for f in "$a"/model.bin "$a"/optim_rank_*.bin; do cmp -s "$f" "$b/$(basename "$f")" || return 1; done
}

echo "activation checkpointing: bitwise identical with and without --recompute"
SMALL="--preset tiny --vocab 500 --batch 2 --seq 32 --accum 2 --steps 3"
for arch in gpt2 llama; do
  for stage in 0 3; do
    for np in 1 2; do
      run "rc0_$arch$stage$np" $np $stage --arch $arch $SMALL --recompute 0
      run "rc1_$arch$stage$np" $np $stage --arch $arch $SMALL --recompute 1
      l0=$(losses "rc0_$arch$stage$np"); l1=$(losses "rc1_$arch$stage$np")
      [ -n "$l0" ] && [ "$l0" == "$l1" ] && same_checkpoint "rc0_$arch$stage$np" "rc1_$arch$stage$np"
      check "$arch stage $stage x $np: losses ($l1) and parameters, m, v identical" $?
    done
  done
done
grep -q "recompute: one layer's activations" "$TMP/rc1_gpt2_32.out" 2>/dev/null || \
    $MPIRUN -np 1 build/z0/train_gpt_cpu --train "$TMP/tok.bin" $SMALL --recompute 1 --threads 1 > "$TMP/rc_print.out" 2>&1
saved0=$(grep -o '"activations":[0-9]*' "$TMP/rc0_llama01.jsonl" | head -1 | cut -d: -f2)
saved1=$(grep -o '"activations":[0-9]*' "$TMP/rc1_llama01.jsonl" | head -1 | cut -d: -f2)
[ -n "$saved1" ] && [ "$saved1" -lt "$saved0" ]
check "recompute keeps fewer activations: $saved1 bytes instead of $saved0 (llama tiny, B=2, T=32)" $?

echo "sharded initialization: each rank generates only its slices, the same bits"
run init1 1 0 --arch llama --preset tiny --vocab 500 --steps 0
run init3 3 3 --arch llama --preset tiny --vocab 500 --steps 0
run init2 2 1 --arch llama --preset tiny --vocab 500 --steps 0
cmp -s "$TMP/init1/ckpt_00000000/model.bin" "$TMP/init3/ckpt_00000000/model.bin" && \
    cmp -s "$TMP/init1/ckpt_00000000/model.bin" "$TMP/init2/ckpt_00000000/model.bin"
check "initial model.bin: stage 0 x 1 rank == stage 3 x 3 ranks (each wrote its slices) == stage 1 x 2 ranks" $?

echo "the estimator equals every allocation, with recompute"
for arch in gpt2 llama; do
  for stage in 0 1 2 3; do
    flags="--arch $arch $SMALL --recompute 1 --persistence-threshold 1000"
    run "est_$arch$stage" 2 $stage $flags
    build/z0/train_gpt_cpu --train "$TMP/tok.bin" $flags --estimate-memory 2 --log "$TMP/est_$arch$stage.est" > /dev/null 2>&1
    $PY - "$TMP/est_$arch$stage.jsonl" "$TMP/est_$arch$stage.est" "$stage" <<'PYEOF'
import json, sys
mem = [json.loads(l) for l in open(sys.argv[1]) if '"memory"' in l][0]["measured_bytes"]
est = [json.loads(l) for l in open(sys.argv[2]) if '"estimate"' in l][0]["train_gpt_cpu"]["stage" + sys.argv[3]]
bad = [f"{k}: measured {v} != estimate {est[k]}" for k, v in mem.items() if est[k] != v]
print("      " + (", ".join(bad) if bad else "all %d kinds equal, %d bytes in all" % (len(mem), sum(mem.values()))))
sys.exit(1 if bad else 0)
PYEOF
    check "$arch stage $stage x 2 ranks, recompute: estimate == measured" $?
  done
done

echo "the estimator with --attention flash and --lean-step 1: train_gpt keeps no T x T tensor, adds the weight-decay mask (exact bytes)"
# llama with GQA, T = 96 (not a multiple of the kernels' 64-row tiles), without and with recompute
# (one layer's tensors or all 4). The expected bytes from the shape, as train/activations.h lays them out
# (each tensor rounded up to 256 bytes): saved, the [B,H,T,T] bf16 probabilities become the fp32
# log-sum-exp [B,H,T]; scratch, the fp32 scores and bf16 dS [B,H,T,T], y [B,H,T,hd] and dq|dk|dv
# [B,T,QKV] become the fp32 D [B,H,T]. The CPU trainer's rows do not change. --lean-step 1 adds the lean
# AdamW's weight-decay mask (a bit per element of the partition, scratch) and nothing else; --attention
# auto at head size 64 is flash. The defaults (cuBLAS, --lean-step 0) are what the default run allocates.
FA="--arch llama --layers 4 --dim 256 --heads 4 --kv-heads 2 --ffn 512 --vocab 500 --max-seq 128 --seq 96 --batch 3"
for rc in 0 1; do
    for att in cublas flash auto; do
        build/z0/train_gpt_cpu --train "$TMP/tok.bin" $FA --recompute $rc --attention $att --estimate-memory 1 \
            --log "$TMP/fa_${att}_$rc.est" > /dev/null 2>&1
    done
    build/z0/train_gpt_cpu --train "$TMP/tok.bin" $FA --recompute $rc --lean-step 1 --estimate-memory 1 \
        --log "$TMP/fa_lean_$rc.est" > /dev/null 2>&1
    build/z0/train_gpt_cpu --train "$TMP/tok.bin" $FA --recompute $rc --estimate-memory 1 \
        --log "$TMP/fa_default_$rc.est" > /dev/null 2>&1
    $PY - "$TMP/fa_cublas_$rc.est" "$TMP/fa_flash_$rc.est" "$TMP/fa_lean_$rc.est" "$TMP/fa_auto_$rc.est" \
        "$TMP/fa_default_$rc.est" "$rc" <<'PYEOF'
import json, sys
def est(p): return [json.loads(l) for l in open(p) if '"estimate"' in l][0]
cub, fla, lean, auto, default = (est(p) for p in sys.argv[1:6])
rc = int(sys.argv[6])
L, B, T, C, H, KV = 4, 3, 96, 256, 4, 2
hd, Ls = C // H, 1 if rc else L
QKV = (H + 2 * KV) * hd
r = lambda n: (n + 255) // 256 * 256
want_act = r(Ls * B * H * T * T * 2) - r(Ls * B * H * T * 4)
want_scr = r(B * H * T * T * 4) + r(B * H * T * T * 2) + r(B * H * T * hd * 2) + r(B * T * QKV * 2) - r(B * H * T * 4)
ok = fla["attention"] == "flash" and cub["attention"] == "cublas" and lean["attention"] == "cublas" and auto == fla \
    and default == cub
for s in range(4):
    c, f, l = (e["train_gpt"]["stage%d" % s] for e in (cub, fla, lean))
    d_act, d_scr = c["activations"] - f["activations"], c["scratch"] - f["scratch"]
    same_rest = all(c[k] == f[k] for k in c if k not in ("activations", "scratch", "total", "host", "nvme"))
    cpu_same = all(cub["train_gpt_cpu"]["stage%d" % s] == e["train_gpt_cpu"]["stage%d" % s] for e in (fla, lean))
    mask = (c["params"] // 2 + 31) // 32 * 4   # one rank: the partition is every (padded) bf16 parameter
    lean_ok = (all(l[k] == c[k] for k in c if k not in ("scratch", "total")) and l["scratch"] - c["scratch"] == mask
               and l["total"] - c["total"] == mask)
    good = (d_act == want_act and d_scr == want_scr and c["total"] - f["total"] == want_act + want_scr and same_rest
            and cpu_same and lean_ok)
    if s == 0 or not good:
        print(f"      recompute {rc}, stage {s}: activations -{d_act} (expected -{want_act}), scratch -{d_scr} "
              f"(expected -{want_scr}); other kinds equal: {same_rest}; CPU trainer unchanged: {cpu_same}; "
              f"--lean-step 1 adds the weight-decay mask alone ({l['scratch'] - c['scratch']} bytes, expected {mask}): {lean_ok}")
    ok = ok and good
sys.exit(0 if ok else 1)
PYEOF
    st=$?; check "--attention flash (and auto at hd 64), --lean-step 1, recompute $rc: train_gpt's estimate drops exactly the T x T tensors, adds exactly the mask, every stage; the defaults are cuBLAS without the mask" $st
done

echo "the largest micro batch within a budget (--memory-budget)"
# the budget halfway between the measured totals at micro batch 5 and 6 (stage 3, 2 ranks, recompute):
# the estimator must answer 5, and the measured total at 5 must lie within the budget
F="--arch gpt2 --preset tiny --vocab 500 --seq 32 --steps 1 --recompute 1"
run bud5 2 3 $F --batch 5
run bud6 2 3 $F --batch 6
budget=$($PY -c "
import json, sys
t = [sum([json.loads(l) for l in open(f) if '\"memory\"' in l][0]['measured_bytes'].values()) for f in sys.argv[1:]]
print((t[0] + t[1]) / 2 / 2**30)" "$TMP/bud5.jsonl" "$TMP/bud6.jsonl")
build/z0/train_gpt_cpu --train "$TMP/tok.bin" $F --estimate-memory 2 --memory-budget "$budget" --log "$TMP/bud.est" > "$TMP/bud.out" 2>&1
grep -A3 "^largest micro batch" "$TMP/bud.out" | sed 's/^/      /'
$PY - "$TMP/bud.est" "$TMP/bud5.jsonl" <<'PYEOF'
import json, sys
est = [json.loads(l) for l in open(sys.argv[1]) if '"estimate"' in l][0]["max_micro_batch"]
meas = sum([json.loads(l) for l in open(sys.argv[2]) if '"memory"' in l][0]["measured_bytes"].values())
got = est["train_gpt_cpu"]["stage3"]
on_ge_off = all(est[t][s]["recompute_on"] >= est[t][s]["recompute_off"] for t in ("train_gpt_cpu", "train_gpt") for s in est[t])
print(f"      budget {est['budget_bytes']:.0f} bytes: stage 3 largest micro batch {got}; measured total at 5: {meas:.0f}")
sys.exit(0 if got["recompute_on"] == 5 and meas <= est["budget_bytes"] and on_ge_off else 1)
PYEOF
check "stage 3 x 2 ranks: the answer is 5, whose measured allocations fit; recompute never lowers it" $?
build/z0/train_gpt_cpu --memory-budget 8 > "$TMP/bud_err.out" 2>&1
[ $? -ne 0 ] && grep -q "^error: --memory-budget: .*--estimate-memory" "$TMP/bud_err.out"
check "--memory-budget without --estimate-memory: one line naming it, non-zero exit" $?

echo "peak resident memory at 4 ranks falls stage by stage (llama, 8 layers, C=512, vocab 512: 24M parameters)"
BIG="--arch llama --layers 8 --dim 512 --heads 8 --kv-heads 4 --vocab 512 --max-seq 64 --batch 1 --seq 16 --steps 1"
MARGIN_MB=48   # the process beyond what it allocates: code, libraries, MPI's and OpenBLAS's own buffers
for stage in 0 1 2 3; do
  run "rss$stage" 4 $stage $BIG
  $PY - "$TMP/rss$stage.jsonl" "$stage" "$MARGIN_MB" > "$TMP/rss$stage.txt" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
mem = [r for r in recs if r["type"] == "memory"][0]["measured_bytes"]
rss = [r for r in recs if r["type"] == "peak_rss"][0]
total = sum(mem.values()) / 1e6
lo, hi = rss["min_bytes"] / 1e6, rss["max_bytes"] / 1e6
print(f"{sys.argv[2]} {total:.1f} {lo:.1f} {hi:.1f}")
PYEOF
done
prev_lo=1e12; prev_hi=1e12; ok=0
while read -r stage total lo hi; do
  over=$($PY -c "print(f'{$lo - $total:.1f}')")
  within=$($PY -c "print(int($total <= $lo <= $total + $MARGIN_MB))")
  falls=$($PY -c "print(int($lo < $prev_lo and $hi < $prev_hi))")
  echo "      stage $stage: footprint $total MB; peak RSS $lo MB (min over ranks, +$over MB), $hi MB (max)"
  [ "$within" = 1 ] && [ "$falls" = 1 ] || ok=1
  prev_lo=$lo; prev_hi=$hi
done < <(cat "$TMP"/rss0.txt "$TMP"/rss1.txt "$TMP"/rss2.txt "$TMP"/rss3.txt)
# loading reads only this rank's slices: from a safetensors export of the stage-3 checkpoint, at
# stage 3 the peak stays within one tensor (a few MB here) of the seeded start's, far below the
# whole model's 96 MB that an import of everything would add
./export_model "$TMP/rss3" "$TMP/rss_hf" > /dev/null || ok=1
run rss3hf 4 3 $BIG --init "$TMP/rss_hf/model.safetensors"
read -r hf_max < <($PY -c "import json,sys; print('%.1f' % ([json.loads(l) for l in open(sys.argv[1]) if '\"peak_rss\"' in l][0]['max_bytes'] / 1e6))" "$TMP/rss3hf.jsonl")
read -r _ _ _ seed_max < "$TMP/rss3.txt"
echo "      stage 3 from safetensors: peak RSS $hf_max MB (max over ranks); from the seeded init: $seed_max MB"
[ "$($PY -c "print(int($hf_max <= $seed_max + 16))")" = 1 ] || ok=1
# (the max over ranks falls too; at stage 0 it holds one more gradient-sized buffer on rank 0:
# OpenMPI's non-blocking all-reduce allocates it, outside the trainer's allocations)
check "peak RSS falls stage by stage (min and max over ranks); the least rank's within $MARGIN_MB MB above the printed footprint; a safetensors start adds at most 16 MB" $ok

echo "$fails failure(s)"
[ $fails -eq 0 ]
