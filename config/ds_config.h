// config/ds_config.h: DeepSpeed's JSON configuration (--config FILE) as DeepSpeed and
// the HF Trainer define it, read and validated as a whole. config/flags.h includes
// it; it needs TrainConfig and the ranges the flags use.
//
// One table, DS_KEYS, classifies every key DeepSpeed documents for the blocks zeroc
// reads. The sources are https://www.deepspeed.ai/docs/config-json/ and the pydantic
// models of deepspeed/runtime/zero/config.py, offload_config.py and monitor/config.py.
//   honoured          sets a zeroc setting (the flag named in the table)
//   no effect         accepted; a one-line note says why it changes nothing here
//   unsupported       an error that says what to do instead
//   honoured, differs sets a zeroc setting that works otherwise than DeepSpeed's, as the row says
// `./train_gpt_cpu --config-keys` prints the table; docs/config.md's key table is
// that output, and tests/test_config.sh compares them.
//
// One pass over the file collects every error, warning and note, each naming its
// key path (zero_optimization.offload_param.device), and prints them together; any
// error then ends the run on every rank. An unknown key inside a block is an error
// with a "did you mean", because DeepSpeed's config models forbid extra fields and
// the optimizer's and scheduler's params are constructor arguments. An unknown
// top-level key close to a known one is the same error, since the misspelt block would
// be dropped whole; one like no known key is a warning, as DeepSpeed ignores it. Numbers go through the same range checks as the
// flags they map to, in the type they are stored in: a float setting as a 32-bit
// float ("eps": 1e-46 is 0 there, an error), an integer within its field's range.
// A block with "enabled": false asks for nothing, so its keys are checked for name
// and type only. Before all that, the file is parsed strictly (formats/json.h):
// trailing data, a NUL, a number beyond a double and a duplicate key are errors.
//
// "auto", the HF Trainer's placeholder, and null both mean the key is absent: the
// flag's value if the flag is given, else zeroc's default. Precedence: zeroc's
// default < config value < explicit flag.
#pragma once
#include "config/train_config.h"
#include "config/messages.h"
#include "config/json.h"
#include <ctype.h>
#include <strings.h>

enum { DS_HONOURED, DS_NO_EFFECT, DS_UNSUPPORTED, DS_DIFFERS };
static const char *DS_KIND_NAMES[] = {"honoured", "no effect", "unsupported", "honoured, differs"};

// value types: a block (an object whose keys are checked), an open block (an object
// not looked into), a boolean, an integer, a number, a string, or a pair of numbers
enum { JT_BLOCK, JT_OPEN, JT_BOOL, JT_INT, JT_NUM, JT_STR, JT_PAIR };

// what an honoured key sets: handled in ds_apply()
enum { K_NONE, K_TRAIN_BATCH, K_MICRO_BATCH, K_ACCUM, K_CLIP, K_STAGE, K_OVERLAP_COMM, K_PERSISTENCE,
       K_MAX_LIVE, K_HPZ, K_QUANT_WEIGHTS, K_QUANT_GRADS, K_OFFLOAD_OPT_DEVICE, K_OFFLOAD_PARAM_DEVICE, K_OFFLOAD_RATIO, K_SUB_GROUP, K_DPU, K_DPU_WARMUP, K_OPT_TYPE, K_LR, K_BETAS,
       K_EPS, K_WEIGHT_DECAY, K_ADAM_W_MODE, K_BIAS_CORRECTION, K_AMSGRAD, K_SCHED_TYPE, K_WARMUP_MIN_LR,
       K_WARMUP_MAX_LR, K_WARMUP_STEPS, K_WARMUP_TYPE, K_TOTAL_STEPS, K_WARMUP_MIN_RATIO, K_COS_MIN_RATIO,
       K_LAST_BATCH_ITERATION, K_FP16, K_LOSS_SCALE, K_SCALE_POWER, K_SCALE_WINDOW, K_HYSTERESIS,
       K_CONSECUTIVE_HYSTERESIS, K_MIN_LOSS_SCALE, K_BF16, K_ACT_CKPT, K_CPU_CKPT, K_NUM_CKPT, K_BREAKDOWN,
       K_NVME_OPT_PATH, K_NVME_BUFFERS, K_NVME_PIPE_READ, K_NVME_PIPE_WRITE, K_NVME_FAST_INIT, K_NVME_PARAM_PATH,
       K_NVME_PARAM_BUFFERS, K_NVME_PARAM_BUFSIZE, K_AIO_BLOCK, K_AIO_QUEUE_DEPTH, K_AIO_THREADS, K_AIO_SINGLE_SUBMIT,
       K_AIO_OVERLAP_EVENTS, K_TB_ENABLED, K_CSV_ENABLED, K_WANDB_ENABLED,
       K_TB_PATH, K_TB_JOB, K_CSV_PATH, K_CSV_JOB, K_WANDB_GROUP, K_WANDB_TEAM, K_WANDB_PROJECT };   // the monitors' strings last, in this order

typedef struct {
    const char *path;    // dotted key path
    const char *alias;   // the other name DeepSpeed accepts for it, its pydantic field name; or NULL
    int kind, type;
    const Range *range;  // numbers: the range of the flag it maps to, or its own
    int id;              // K_*: what it sets
    const char *off;     // no effect / unsupported: the value that asks for nothing and gets no message.
                         // NULL: "false" for booleans. "*": none; its block's key speaks for it.
    const char *what;    // honoured: what it maps to; no effect: why; unsupported: what to do instead
} DsKey;

static const Range R_SCALE_POWER = {0, 64, 0, 0, 1}, R_WINDOW = {1, 1 << 30, 0, 0, 1},
                   R_ANY_INT = {-9e18, 9e18, 0, 0, 1}, R_ANY_NUM = {-FLT_BIG, FLT_BIG, 0, 0, 0},
                   R_MIN_SCALE = {0, FLT_BIG, 1, 0, 0}, R_AIO_BLOCK = {4096, 1 << 30, 0, 0, 1}, R_QUEUE = {1, 4096, 0, 0, 1},
                   R_THREADS = {1, 64, 0, 0, 1}, R_BUFFERS = {1, 1024, 0, 0, 1}, R_ELEMS = {1, 9e18, 0, 0, 1},
                   R_LAYERS = {1, 1024, 0, 0, 1};   // --layers' range

#define MONITOR "zeroc logs every step to --log FILE (JSONL; plot with scripts/plot_losses.py), TensorBoard event files (the tensorboard block) and CSV files (csv_monitor)"
#define ZEROPP "a ZeRO++ option zeroc does not implement: its ZeRO++ is qwZ, hpZ and qgZ (docs/zero.md)"
#define MICS "MiCS is not implemented: parameters are partitioned over all ranks"

static const DsKey DS_KEYS[] = {
    // batch (DeepSpeed's _set_batch_related_parameters: any two derive the third)
    {"train_batch_size", NULL, DS_HONOURED, JT_INT, &R_TOTAL, K_TRAIN_BATCH, NULL, "`--total-batch`: sequences per optimizer step, all ranks"},
    {"train_micro_batch_size_per_gpu", NULL, DS_HONOURED, JT_INT, &R_BATCH, K_MICRO_BATCH, NULL, "`--batch`: sequences per rank per micro-step"},
    {"gradient_accumulation_steps", NULL, DS_HONOURED, JT_INT, &R_ACCUM, K_ACCUM, NULL, "`--accum`: micro-steps per optimizer step"},
    {"gradient_clipping", NULL, DS_HONOURED, JT_NUM, &R_CLIP, K_CLIP, NULL, "`--clip`: global-norm clipping, 0 = off (zeroc's default 1.0; DeepSpeed's 0: a note when a config with an optimizer block leaves it out)"},
    {"steps_per_print", NULL, DS_NO_EFFECT, JT_INT, &R_WINDOW, K_NONE, NULL, "zeroc prints every step (`--quiet 1`: none) and logs every step to `--log`"},
    {"wall_clock_breakdown", NULL, DS_HONOURED, JT_BOOL, NULL, K_BREAKDOWN, NULL, "`--breakdown`: each step line and JSONL record also has the forward, backward, communication-wait and optimizer times"},
    {"zero_allow_untested_optimizer", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "zeroc's ZeRO runs only its own Adam/AdamW"},
    {"communication_data_type", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "\"fp32\"", "the CPU trainer communicates fp32, the GPU trainer its 16-bit parameters and gradients (bf16, or fp16 in the fp16 build)"},
    {"prescale_gradients", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "gradients are averaged by the reduction itself"},
    {"gradient_predivide_factor", NULL, DS_NO_EFFECT, JT_NUM, &R_ANY_NUM, K_NONE, "1", "gradients are averaged by the reduction itself"},
    {"amp", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "Apex AMP is not available: remove the block (for 16-bit training use the fp16 block, or the GPU trainer's bf16)"},

    // DeepSpeed's other top-level keys: named here so that they get a note, or an error where DeepSpeed
    // would train something else, instead of "unknown top-level key"
    {"zero_force_ds_cpu_optimizer", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "zeroc's ZeRO runs only its own Adam/AdamW (CPU-Adam where the state is on the host)"},
    {"memory_breakdown", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "the start-up table gives each model state's bytes, the end the peak resident memory"},
    {"dump_state", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "rank 0 prints the resolved configuration at start-up (`--log` records it)"},
    {"sparse_gradients", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "the embedding's gradient is dense"},
    {"disable_allgather", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "updated parameters are always all-gathered"},
    {"graph_harvesting", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "there are no CUDA graphs to capture"},
    {"dataloader_drop_last", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "zeroc's loader has no DataLoader: it reads whole sequences (docs/data.md)"},
    {"seq_parallel_communication_data_type", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", "there is no sequence parallelism"},
    {"data_types", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "gradients accumulate in fp32"},
    {"checkpoint", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "`--save DIR` writes one checkpoint for all ranks, resharded on `--resume` (docs/checkpoints.md)"},
    {"flops_profiler", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "the step line gives GFLOP/s; `--breakdown` the forward, backward, communication-wait and optimizer times"},
    {"comms_logger", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "the table at the end counts every collective's bytes and calls against the theory"},
    {"timers", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "`--breakdown` times the forward, backward, communication wait and optimizer"},
    {"autotuning", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "there is no autotuner: `--estimate-memory N` prints the largest micro batch that fits"},
    {"compile", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "zeroc is compiled C and CUDA: there is no torch.compile"},
    {"eigenvalue", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "no eigenvalues are computed"},
    {"pipeline", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "there is no pipeline parallelism"},
    {"tensor_parallel", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "there is no tensor parallelism: every rank computes whole layers"},
    {"hybrid_engine", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "there is no inference engine to switch to"},
    {"nebula", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, "checkpoints are written by `--save` only"},
    {"elasticity", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "DeepSpeed would choose the batch size from it: remove the block and give the batch (train_batch_size, --total-batch)"},
    {"progressive_layer_drop", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "layers are never dropped: remove the block"},
    {"curriculum_learning", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "the sequence length is fixed (--seq): remove the block"},
    {"data_efficiency", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "there is no curriculum or data routing: remove the block"},
    {"compression_training", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "there is no quantization-aware training or pruning: remove the block"},
    {"quantize_training", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "there is no quantization-aware training: remove the block"},
    {"sparse_attention", NULL, DS_UNSUPPORTED, JT_OPEN, NULL, K_NONE, NULL, "attention is dense and causal: remove the block"},

    // ZeRO (zero.h)
    {"zero_optimization", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "ZeRO (`zero.h`); unknown keys inside are errors"},
    {"zero_optimization.stage", NULL, DS_HONOURED, JT_INT, &R_STAGE, K_STAGE, NULL, "`--zero-stage`: must equal the compiled stage (`make ... ZERO=k`)"},
    {"zero_optimization.overlap_comm", NULL, DS_HONOURED, JT_BOOL, NULL, K_OVERLAP_COMM, NULL, "`--prefetch` and `--overlap-reduce`: stage 3 gathers the next unit while this one computes; stages 0-1 start each unit's gradient reduction when its backward finishes (they cost no extra memory here). Stage 2 always reduces each unit in the backward. Absent: prefetch on, and the reductions overlap on the CPU; on the GPU they wait for the boundary until a device run validates the overlap"},
    {"zero_optimization.stage3_param_persistence_threshold", "param_persistence_threshold", DS_HONOURED, JT_INT, &R_COUNT, K_PERSISTENCE, NULL, "`--persistence-threshold`: stage-3 units of at most this many elements stay whole"},
    {"zero_optimization.stage3_max_live_parameters", "max_live_parameters", DS_HONOURED, JT_INT, &R_COUNT, K_MAX_LIVE, NULL, "`--max-live`: cap on gathered parameter elements"},
    {"zero_optimization.offload_optimizer", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "ZeRO-Offload (GPU trainer) and ZeRO-Infinity (both trainers) of the optimizer state"},
    {"zero_optimization.offload_optimizer.device", NULL, DS_HONOURED, JT_STR, NULL, K_OFFLOAD_OPT_DEVICE, NULL, "`--offload`: \"cpu\": optimizer state and step on the CPU (GPU trainer; the CPU trainer notes that its state is in host memory already); \"nvme\" (`--offload-nvme DIR`): ZeRO-Infinity, the state in each rank's file under `nvme_path`, streamed through CPU-Adam in tiles (both trainers; the CPU trainer's fp32 parameters are its master and stay in memory: m and v move); \"none\": off"},
    {"zero_optimization.offload_optimizer.ratio", NULL, DS_HONOURED, JT_NUM, &R_FRAC, K_OFFLOAD_RATIO, NULL, "`--offload-ratio`: Twin-Flow, stage 3 with offload (a note elsewhere): the fraction of the optimizer partition CPU-Adam updates, DeepSpeed's last sub-groups (`sub_group_size`); train_gpt updates the rest with the GPU AdamW (never run on a GPU), the CPU trainer counts the split and computes what 1 computes"},
    {"zero_optimization.offload_optimizer.delayed_update", NULL, DS_HONOURED, JT_BOOL, NULL, K_DPU, NULL, "zeroc's key, not DeepSpeed's (DeepSpeed has no DPU; remove it before giving the file to DeepSpeed): `--offload-dpu`, ZeRO-Offload's delayed parameter update (docs/offload.md)"},
    {"zero_optimization.offload_optimizer.delayed_update_warmup", NULL, DS_HONOURED, JT_INT, &R_STEPS, K_DPU_WARMUP, NULL, "zeroc's key, not DeepSpeed's: `--dpu-warmup`, applied steps before the delay starts (default 40)"},
    {"zero_optimization.offload_optimizer.pin_memory", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "offloaded state is always in pinned host memory"},
    {"zero_optimization.offload_optimizer.nvme_path", NULL, DS_HONOURED, JT_STR, NULL, K_NVME_OPT_PATH, NULL, "device \"nvme\" (required there): the directory of each rank's file (`--offload-nvme DIR`)"},
    {"zero_optimization.offload_optimizer.buffer_count", NULL, DS_HONOURED, JT_INT, &R_BUFFERS, K_NVME_BUFFERS, NULL, "NVMe: tiles of the optimizer step in memory at once (default 4, as DeepSpeed's): one being updated, the others read ahead and written behind; at least 1 + pipeline_read + pipeline_write"},
    {"zero_optimization.offload_optimizer.pipeline_read", NULL, DS_HONOURED, JT_BOOL, NULL, K_NVME_PIPE_READ, NULL, "NVMe: read the next tiles while CPU-Adam updates this one (zeroc's default true; DeepSpeed's false)"},
    {"zero_optimization.offload_optimizer.pipeline_write", NULL, DS_HONOURED, JT_BOOL, NULL, K_NVME_PIPE_WRITE, NULL, "NVMe: write the last tile back while CPU-Adam updates this one (zeroc's default true; DeepSpeed's false)"},
    {"zero_optimization.offload_optimizer.fast_init", NULL, DS_HONOURED, JT_BOOL, NULL, K_NVME_FAST_INIT, NULL, "NVMe: false (the default): the files are written with zeros at start-up, which reserves their blocks (a device too small fails then, not mid-run); true: they are created sparse"},
    {"zero_optimization.offload_param", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "ZeRO-3 parameter offload (host memory: GPU trainer; NVMe: both trainers)"},
    {"zero_optimization.offload_param.device", NULL, DS_HONOURED, JT_STR, NULL, K_OFFLOAD_PARAM_DEVICE, NULL, "`--offload-param`: \"cpu\": stage-3 parameter shards in pinned host memory (GPU trainer; the CPU trainer notes that its state is in host memory already); \"nvme\" (`--offload-param-nvme DIR`): stage 3's parameter shard in each rank's file under `nvme_path`, each unit's slice read one unit ahead of its gather (both trainers; on the CPU trainer the shard is the fp32 master; on the GPU it needs the optimizer offloaded too); \"none\": off"},
    {"zero_optimization.offload_param.pin_memory", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "offloaded state is always in pinned host memory"},
    {"zero_optimization.offload_param.nvme_path", NULL, DS_HONOURED, JT_STR, NULL, K_NVME_PARAM_PATH, NULL, "device \"nvme\" (required there): the directory of each rank's file (`--offload-param-nvme DIR`)"},
    {"zero_optimization.offload_param.buffer_count", NULL, DS_HONOURED, JT_INT, &R_BUFFERS, K_NVME_PARAM_BUFFERS, NULL, "NVMe: at least 2 (an error below): a unit's slice is read one unit ahead of its gather, in 2 buffers (more give a note; DeepSpeed's default 5)"},
    {"zero_optimization.offload_param.buffer_size", NULL, DS_HONOURED, JT_INT, &R_ELEMS, K_NVME_PARAM_BUFSIZE, NULL, "NVMe: elements per buffer: it must hold a rank's largest unit slice (DeepSpeed's rule: a parameter fits a buffer; an error names the size), and the buffers get that size"},
    {"zero_optimization.offload_param.max_in_cpu", NULL, DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, NULL, "no parameter shard is cached in CPU memory: each gather reads its unit's slice from NVMe, one unit ahead"},
    {"zero_optimization.contiguous_gradients", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "gradients are always contiguous here (one flat buffer)"},
    {"zero_optimization.reduce_scatter", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "stages 1-3 always reduce-scatter the gradients, stage 0 all-reduces them"},
    {"zero_optimization.reduce_bucket_size", NULL, DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, NULL, "gradients are reduced one unit (a layer) at a time, as its backward finishes"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "there are no reduce buckets: one unit (a layer) at a time"},
    {"zero_optimization.allgather_partitions", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "updated parameters are always all-gathered"},
    {"zero_optimization.allgather_bucket_size", NULL, DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, NULL, "parameters are all-gathered one unit (a layer) at a time"},
    {"zero_optimization.load_from_fp32_weights", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "checkpoints hold fp32 weights and are always loaded from them"},
    {"zero_optimization.elastic_checkpoint", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "`--resume` always reshards to the current world size and stage"},
    {"zero_optimization.grad_hooks", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "the backward calls the reduction directly"},
    {"zero_optimization.round_robin_gradients", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "offload copies each gradient slice to the host as soon as it is reduced"},
    {"zero_optimization.sub_group_size", NULL, DS_HONOURED, JT_INT, &R_TILE, K_SUB_GROUP, NULL, "`--sub-group-size`: the sub-groups Twin-Flow's `offload_optimizer.ratio` splits (default 1e9, DeepSpeed's; at ratio 1 a note: no effect); CPU-Adam itself steps the partition in fixed tiles (with NVMe offload `--nvme-tile` elements)"},
    {"zero_optimization.stage3_prefetch_bucket_size", "prefetch_bucket_size", DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, NULL, "stage 3 prefetches exactly one unit ahead (`overlap_comm`)"},
    {"zero_optimization.stage3_model_persistence_threshold", "model_persistence_threshold", DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, NULL, "units below `stage3_param_persistence_threshold` stay whole without a total cap"},
    {"zero_optimization.stage3_max_reuse_distance", "max_reuse_distance", DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, NULL, "a unit is released after its forward and gathered again for its backward"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save", DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "checkpoints always hold the whole model in fp32 (`model.bin`)"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "checkpoints always hold the whole model in fp32 (`model.bin`)"},
    {"zero_optimization.stage3_module_granularity_threshold", "module_granularity_threshold", DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, "0", "units are fixed: the embedding, each layer, the head"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params", DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "stage 3 gathers parameters with all-gather"},
    {"zero_optimization.ignore_unused_parameters", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "every parameter receives a gradient"},
    {"zero_optimization.legacy_stage1", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "there is one stage-1 implementation"},
    {"zero_optimization.zero_hpz_partition_size", NULL, DS_HONOURED, JT_INT, &R_HPZ, K_HPZ, NULL, "`--zero-hpz-partition-size`: ZeRO++ hpZ, stage 3: a secondary parameter partition over groups of this many ranks, a divisor of the world, serving a unit's later gathers in each step (1: off)"},
    {"zero_optimization.zero_quantized_weights", NULL, DS_DIFFERS, JT_BOOL, NULL, K_QUANT_WEIGHTS, NULL, "`--zero-quantized-weights`: ZeRO++ qwZ, stage 3: int8 in every parameter all-gather, blocks of 256 values at -127..127 with an fp32 scale where DeepSpeed takes fp16 groups of about 8,000 at -128..127 (docs/zero.md)"},
    {"zero_optimization.zero_quantized_nontrainable_weights", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, ZEROPP},
    {"zero_optimization.zero_quantized_gradients", NULL, DS_DIFFERS, JT_BOOL, NULL, K_QUANT_GRADS, NULL, "`--zero-quantized-gradients`: ZeRO++ qgZ, stage 3, several nodes: the gradient reduce-scatter as hierarchical int4 all-to-alls, blocks of 256 values at -7..7 summed in fp32, where DeepSpeed groups by the tensor's dimensions at -8..7 and sums in fp16 (docs/zero.md)"},
    {"zero_optimization.zeropp_loco_param", NULL, DS_NO_EFFECT, JT_OPEN, NULL, K_NONE, NULL, ZEROPP},
    {"zero_optimization.mics_shard_size", NULL, DS_NO_EFFECT, JT_INT, &R_ANY_INT, K_NONE, "-1", MICS},
    {"zero_optimization.mics_hierarchical_params_gather", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, MICS},
    {"zero_optimization.memory_efficient_linear", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "a PyTorch-module option of DeepSpeed's stage 3; zeroc's layers are its own"},
    {"zero_optimization.override_module_apply", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "a PyTorch-module option of DeepSpeed's stage 3; zeroc's layers are its own"},
    {"zero_optimization.pipeline_loading_checkpoint", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "there is no pipeline parallelism"},
    {"zero_optimization.log_trace_cache_warnings", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "the stage-3 fetch order is planned, not traced"},
    {"zero_optimization.cpu_offload", NULL, DS_UNSUPPORTED, JT_BOOL, NULL, K_NONE, NULL, "deprecated in DeepSpeed: write \"offload_optimizer\": {\"device\": \"cpu\"}"},
    {"zero_optimization.cpu_offload_param", NULL, DS_UNSUPPORTED, JT_BOOL, NULL, K_NONE, NULL, "deprecated in DeepSpeed: write \"offload_param\": {\"device\": \"cpu\"}"},
    {"zero_optimization.cpu_offload_use_pin_memory", NULL, DS_UNSUPPORTED, JT_BOOL, NULL, K_NONE, NULL, "deprecated in DeepSpeed: write \"pin_memory\" inside offload_optimizer / offload_param"},

    // DeepSpeed's asynchronous I/O (deepspeed/runtime/swap_tensor/aio_config.py) for NVMe offload: zero/nvme_store.h
    {"aio", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "the I/O engine of NVMe offload (`zero/nvme_store.h`: io_uring); a note without NVMe offload"},
    {"aio.block_size", NULL, DS_HONOURED, JT_INT, &R_AIO_BLOCK, K_AIO_BLOCK, NULL, "bytes per I/O request (default 1048576); a multiple of 4096 (O_DIRECT)"},
    {"aio.queue_depth", NULL, DS_HONOURED, JT_INT, &R_QUEUE, K_AIO_QUEUE_DEPTH, NULL, "requests in flight per I/O thread (the size of its io_uring; default 8)"},
    {"aio.thread_count", "intra_op_parallelism", DS_HONOURED, JT_INT, &R_THREADS, K_AIO_THREADS, NULL, "I/O threads, each with its own io_uring; a request's blocks are dealt out among them (default 1)"},
    {"aio.single_submit", NULL, DS_HONOURED, JT_BOOL, NULL, K_AIO_SINGLE_SUBMIT, NULL, "true: one io_uring_submit per request; false (the default): one per batch of requests"},
    {"aio.overlap_events", NULL, DS_HONOURED, JT_BOOL, NULL, K_AIO_OVERLAP_EVENTS, NULL, "true (the default): a thread refills its queue as requests complete; false: waves of queue_depth requests, each waited for whole"},
    {"aio.use_gds", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "GPUDirect Storage is not used: NVMe data passes through host memory"},

    // optimizer: DeepSpeed's "Adam" / "AdamW" (engine._configure_basic_optimizer)
    {"optimizer", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "the optimizer"},
    {"optimizer.type", NULL, DS_HONOURED, JT_STR, NULL, K_OPT_TYPE, NULL, "\"AdamW\" or \"Adam\" (any case); any other optimizer is an error"},
    {"optimizer.legacy_fusion", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "zeroc has one fused Adam step"},
    {"optimizer.params", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "the optimizer's arguments; unknown keys are errors (DeepSpeed passes them to the constructor)"},
    {"optimizer.params.lr", NULL, DS_HONOURED, JT_NUM, &R_LR, K_LR, NULL, "`--lr` (the schedule's peak; `scheduler.params.warmup_max_lr` replaces it, as in DeepSpeed; zeroc's default 6e-4, DeepSpeed's Adam/AdamW 1e-3: a note when the block leaves it out)"},
    {"optimizer.params.betas", NULL, DS_HONOURED, JT_PAIR, &R_BETA, K_BETAS, NULL, "`--beta1`, `--beta2` (zeroc's default [0.9, 0.95], DeepSpeed's Adam/AdamW [0.9, 0.999]: a note when the block leaves them out)"},
    {"optimizer.params.eps", NULL, DS_HONOURED, JT_NUM, &R_EPS, K_EPS, NULL, "`--eps`"},
    {"optimizer.params.weight_decay", NULL, DS_HONOURED, JT_NUM, &R_WD, K_WEIGHT_DECAY, NULL, "`--weight-decay`, applied to the 2-D weights (not to biases, norms; zeroc's default 0.1, DeepSpeed's Adam/AdamW 0: a note when the block leaves it out)"},
    {"optimizer.params.adam_w_mode", NULL, DS_HONOURED, JT_BOOL, NULL, K_ADAM_W_MODE, NULL, "`--adam-w-mode`: true: decoupled weight decay (AdamW); false with type Adam: L2, the decay added to the gradient (type AdamW is always decoupled: false gives a note)"},
    {"optimizer.params.bias_correction", NULL, DS_HONOURED, JT_BOOL, NULL, K_BIAS_CORRECTION, NULL, "true only: the step always bias-corrects (false is an error)"},
    {"optimizer.params.amsgrad", NULL, DS_HONOURED, JT_BOOL, NULL, K_AMSGRAD, NULL, "false only (true is an error, as in DeepSpeed's FusedAdam)"},
    {"optimizer.params.torch_adam", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "zeroc's own Adam step (CPU-Adam, the GPU kernel) computes the same update"},
    {"optimizer.params.fp32_optimizer_states", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "optimizer states are always fp32"},
    {"optimizer.params.set_grad_none", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "true", "gradient buffers are reused, overwritten on the first micro-step"},
    {"optimizer.params.max_grad_norm", NULL, DS_UNSUPPORTED, JT_NUM, &R_ANY_NUM, K_NONE, NULL, "DeepSpeed refuses it too: use the top-level gradient_clipping"},

    // scheduler: DeepSpeed's warm-up schedules (deepspeed/runtime/lr_schedules.py)
    {"scheduler", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "the learning-rate schedule (absent: `--lr-schedule`, default cosine)"},
    {"scheduler.type", NULL, DS_HONOURED, JT_STR, NULL, K_SCHED_TYPE, NULL, "`--lr-schedule`: WarmupLR, WarmupDecayLR or WarmupCosineLR (OneCycle, LRRangeTest and torch schedulers are an error)"},
    {"scheduler.params", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "the schedule's arguments; a key the schedule does not take is an error"},
    {"scheduler.params.warmup_min_lr", NULL, DS_HONOURED, JT_NUM, &R_NONNEG, K_WARMUP_MIN_LR, NULL, "`--warmup-min-lr` (WarmupLR, WarmupDecayLR): the warm-up start and the decay's end"},
    {"scheduler.params.warmup_max_lr", NULL, DS_HONOURED, JT_NUM, &R_LR, K_WARMUP_MAX_LR, NULL, "`--lr` (WarmupLR, WarmupDecayLR; zeroc's default: `optimizer.params.lr`, else 6e-4; DeepSpeed's 0.001)"},
    {"scheduler.params.warmup_num_steps", NULL, DS_HONOURED, JT_INT, &R_STEPS, K_WARMUP_STEPS, NULL, "`--warmup` (zeroc's default 0; DeepSpeed's 1000; both use at least 2)"},
    {"scheduler.params.warmup_type", NULL, DS_HONOURED, JT_STR, NULL, K_WARMUP_TYPE, NULL, "`--warmup-type`: \"log\" (the default) or \"linear\""},
    {"scheduler.params.total_num_steps", NULL, DS_HONOURED, JT_INT, &R_STEPS, K_TOTAL_STEPS, NULL, "`--lr-total-steps`: the horizon of WarmupDecayLR and WarmupCosineLR; also `--steps` when that flag is not given"},
    {"scheduler.params.warmup_min_ratio", NULL, DS_HONOURED, JT_NUM, &R_FRAC, K_WARMUP_MIN_RATIO, NULL, "`--warmup-min-ratio` (WarmupCosineLR): warm-up start as a fraction of the lr"},
    {"scheduler.params.cos_min_ratio", NULL, DS_HONOURED, JT_NUM, &R_FRAC, K_COS_MIN_RATIO, NULL, "`--cos-min-ratio` (WarmupCosineLR): the cosine's end as a fraction of the lr"},
    {"scheduler.params.last_batch_iteration", NULL, DS_HONOURED, JT_INT, &R_ANY_INT, K_LAST_BATCH_ITERATION, NULL, "-1 only (the start); the schedule's position is the step (`--resume` restores it)"},

    // fp16: DeepSpeed's loss scaling (train/loss_scaler.h, train/step_guard.h)
    {"fp16", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "fp16 training with DeepSpeed's loss scaling and overflow skips (`train/step_guard.h`)"},
    {"fp16.enabled", NULL, DS_HONOURED, JT_BOOL, NULL, K_FP16, NULL, "`--fp16`: train_gpt_cpu stores parameters and gradients as fp16 values (a model of the GPU's fp16 storage; fp32 master); train_gpt must be the fp16 build (`make train_gpt FP16=1`), else one line says which build to use"},
    {"fp16.loss_scale", NULL, DS_HONOURED, JT_NUM, &R_NONNEG, K_LOSS_SCALE, NULL, "0: dynamic loss scaling; > 0: this static scale"},
    {"fp16.initial_scale_power", NULL, DS_HONOURED, JT_INT, &R_SCALE_POWER, K_SCALE_POWER, NULL, "dynamic: start at 2^power (default 16)"},
    {"fp16.loss_scale_window", NULL, DS_HONOURED, JT_INT, &R_WINDOW, K_SCALE_WINDOW, NULL, "dynamic: double the scale after this many overflow-free steps (default 1000)"},
    {"fp16.hysteresis", NULL, DS_HONOURED, JT_INT, &R_WINDOW, K_HYSTERESIS, NULL, "dynamic: the scale halves at the hysteresis-th overflow since the hysteresis was last refilled (default 2)"},
    {"fp16.consecutive_hysteresis", NULL, DS_HONOURED, JT_BOOL, NULL, K_CONSECUTIVE_HYSTERESIS, NULL, "dynamic: refill the hysteresis after every overflow-free step (default false)"},
    {"fp16.min_loss_scale", NULL, DS_HONOURED, JT_NUM, &R_MIN_SCALE, K_MIN_LOSS_SCALE, NULL, "dynamic: the scale never goes below this (default 1); an overflow at this scale stops the run, as in DeepSpeed"},
    {"fp16.auto_cast", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "the inputs are token ids: nothing to cast"},
    {"fp16.fp16_master_weights_and_grads", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "master weights and the optimizer's gradients are always fp32"},

    // bf16 (alias "bfloat16", DeepSpeed's old name)
    {"bf16", "bfloat16", DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "bf16 training"},
    {"bf16.enabled", NULL, DS_HONOURED, JT_BOOL, NULL, K_BF16, NULL, "train_gpt's default build trains in bf16 (false gives a note; true on the fp16 build is an error); the CPU trainer in fp32 (true gives a note)"},
    {"bf16.immediate_grad_update", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "gradients are accumulated in fp32 and applied at the step"},

    // activation checkpointing (DeepSpeed's checkpointing config): the block turns zeroc's
    // recomputation on; every transformer layer is a checkpoint
    {"activation_checkpointing", NULL, DS_HONOURED, JT_BLOCK, NULL, K_ACT_CKPT, NULL, "`--recompute 1`: each layer keeps only its input in the forward and is recomputed in the backward"},
    {"activation_checkpointing.partition_activations", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "partitions checkpoints across model-parallel ranks: zeroc has no model parallelism"},
    {"activation_checkpointing.cpu_checkpointing", NULL, DS_HONOURED, JT_BOOL, NULL, K_CPU_CKPT, NULL, "`--cpu-checkpointing`: the layer inputs in pinned host memory, back one layer ahead in the backward (train_gpt; the CPU trainer's are in host memory already)"},
    {"activation_checkpointing.contiguous_memory_optimization", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "the checkpoints already live in one buffer"},
    {"activation_checkpointing.number_checkpoints", NULL, DS_HONOURED, JT_INT, &R_LAYERS, K_NUM_CKPT, NULL, "the number of layers only: every layer is a checkpoint (another value is an error)"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "a profiling aid: zeroc's recompute is ordered on one stream already"},
    {"activation_checkpointing.profile", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, "`--log` records every step's time; there is no per-checkpoint profile"},

    // monitors (deepspeed/monitor/config.py): their "enabled" speaks for the block
    {"tensorboard", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "TensorBoard event files written by rank 0 (`train/monitor.h`, docs/monitoring.md)"},
    {"tensorboard.enabled", NULL, DS_HONOURED, JT_BOOL, NULL, K_TB_ENABLED, NULL, "`--tensorboard DIR`: DeepSpeed's `Train/Samples/*` scalars and zeroc's own, every step, at the samples seen"},
    {"tensorboard.output_path", NULL, DS_HONOURED, JT_STR, NULL, K_TB_PATH, NULL, "the directory the job's directory goes in (default \"\": the current directory)"},
    {"tensorboard.job_name", NULL, DS_HONOURED, JT_STR, NULL, K_TB_JOB, NULL, "`--job-name`: the files go in output_path/job_name (default DeepSpeedJobName)"},
    {"wandb", NULL, DS_NO_EFFECT, JT_BLOCK, NULL, K_NONE, "*", "zeroc does not call W&B and writes nothing for this block; `wandb sync --sync-tensorboard` uploads the tensorboard block's event files"},
    {"wandb.enabled", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_WANDB_ENABLED, NULL, "a note says it does nothing, with the upload line for the tensorboard block's files when that block is on"},
    {"wandb.group", NULL, DS_NO_EFFECT, JT_STR, NULL, K_WANDB_GROUP, NULL, "named in the note (`wandb sync` takes no group: set it in W&B)"},
    {"wandb.team", NULL, DS_NO_EFFECT, JT_STR, NULL, K_WANDB_TEAM, NULL, "the upload line's `-e TEAM`"},
    {"wandb.project", NULL, DS_NO_EFFECT, JT_STR, NULL, K_WANDB_PROJECT, NULL, "the upload line's `-p PROJECT` (default deepspeed)"},
    {"csv_monitor", NULL, DS_HONOURED, JT_BLOCK, NULL, K_NONE, NULL, "one CSV file per metric, as DeepSpeed's csvMonitor writes them (`train/monitor.h`)"},
    {"csv_monitor.enabled", NULL, DS_HONOURED, JT_BOOL, NULL, K_CSV_ENABLED, NULL, "`--csv-monitor DIR`: the tensorboard block's metrics, each in its own file (`Train_Samples_train_loss.csv`: `step,train_loss`)"},
    {"csv_monitor.output_path", NULL, DS_HONOURED, JT_STR, NULL, K_CSV_PATH, NULL, "the directory the job's directory goes in (default \"\": the current directory)"},
    {"csv_monitor.job_name", NULL, DS_HONOURED, JT_STR, NULL, K_CSV_JOB, NULL, "`--job-name`: the files go in output_path/job_name (default DeepSpeedJobName)"},
    {"comet", NULL, DS_NO_EFFECT, JT_BLOCK, NULL, K_NONE, "*", MONITOR},
    {"comet.enabled", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, NULL, MONITOR},
    {"comet.samples_log_interval", NULL, DS_NO_EFFECT, JT_INT, &R_COUNT, K_NONE, "*", MONITOR},
    {"comet.project", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", MONITOR},
    {"comet.workspace", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", MONITOR},
    {"comet.api_key", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", MONITOR},
    {"comet.experiment_name", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", MONITOR},
    {"comet.experiment_key", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", MONITOR},
    {"comet.online", NULL, DS_NO_EFFECT, JT_BOOL, NULL, K_NONE, "*", MONITOR},
    {"comet.mode", NULL, DS_NO_EFFECT, JT_STR, NULL, K_NONE, "*", MONITOR},
};
#define N_DS_KEYS ((int)(sizeof(DS_KEYS) / sizeof(DS_KEYS[0])))

// ----------------------------------------------------------------------------
// the pass over the file

typedef struct {
    TrainConfig *c;
    ConfigReport *r;
    int have_opt_lr, have_max_lr;
    double opt_lr, max_lr;
} DsPass;

static const char *last_component(const char *path) {
    const char *d = strrchr(path, '.');
    return d ? d + 1 : path;
}

// the length of the parent part of a path ("a.b.c" -> 3)
static size_t parent_len(const char *path) { return (size_t)(last_component(path) - path); }

static int ds_row_matches(const DsKey *k, const char *path) {
    if (strcmp(k->path, path) == 0) return 1;
    size_t pl = parent_len(path);
    return k->alias && pl == parent_len(k->path) && strncmp(k->path, path, pl) == 0 &&
           strcmp(last_component(path), k->alias) == 0;
}

static const DsKey *ds_find(const char *path) {
    for (int i = 0; i < N_DS_KEYS; i++) if (ds_row_matches(&DS_KEYS[i], path)) return &DS_KEYS[i];
    return NULL;
}

// The known key of the same block closest to `path`'s last component, if it is close
// enough to be a likely misspelling (likely_misspelling).
static const char *ds_did_you_mean(const char *path) {
    const char *name = last_component(path), *best = NULL;
    size_t pl = parent_len(path);
    int bestd = 4;
    for (int i = 0; i < N_DS_KEYS; i++) {
        const DsKey *k = &DS_KEYS[i];
        if (parent_len(k->path) != pl || strncmp(k->path, path, pl) != 0) continue;
        const char *names[2] = {last_component(k->path), k->alias};
        for (int j = 0; j < 2; j++) {
            if (!names[j]) continue;
            int d = edit_distance(name, names[j]);
            if (d < bestd && likely_misspelling(name, names[j], d)) { bestd = d; best = names[j]; }
        }
    }
    return best;
}

// a JSON value as short text for messages
static void json_text(const cJSON *v, char *buf, size_t n) {
    char *s = cJSON_PrintUnformatted(v);
    snprintf(buf, n, "%s", s ? s : "?");
    if (s && strlen(s) >= n && n > 4) strcpy(buf + n - 4, "...");
    free(s);
}

// "expected ..., got ..." for a value of the wrong type or out of range; 1 if it is fine
static int ds_check_value(DsPass *x, const DsKey *k, const char *path, const cJSON *v) {
    char want[160] = "", got[96], rt[128], why[192];
    const cJSON *as_float = NULL;   // a number in range as a double, but not as the float it is stored in
    switch (k->type) {
    case JT_BLOCK: case JT_OPEN: if (!cJSON_IsObject(v)) snprintf(want, sizeof(want), "an object {...}"); break;
    case JT_BOOL: if (!cJSON_IsBool(v)) snprintf(want, sizeof(want), "true or false"); break;
    case JT_STR: if (!cJSON_IsString(v)) snprintf(want, sizeof(want), "a string"); break;
    case JT_INT: case JT_NUM:
        if (cJSON_IsNumber(v) && k->type == JT_NUM && range_f32_why(k->range, v->valuedouble, why, sizeof(why))) as_float = v;
        else if (!cJSON_IsNumber(v) || !(k->type == JT_NUM ? range_ok_f32 : range_ok)(k->range, v->valuedouble))
            snprintf(want, sizeof(want), "%s", range_text(k->range, cJSON_IsNumber(v) ? v->valuedouble : 0, rt, sizeof(rt)));
        break;
    case JT_PAIR: {
        int ok = cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2;
        for (int i = 0; ok && i < 2; i++) {
            const cJSON *e = cJSON_GetArrayItem(v, i);
            if (!cJSON_IsNumber(e) || !range_ok(k->range, e->valuedouble)) ok = 0;
            else if (!as_float && range_f32_why(k->range, e->valuedouble, why, sizeof(why))) as_float = e;
        }
        if (!ok) as_float = NULL;
        if (!ok) snprintf(want, sizeof(want), "two numbers [a, b], each %s", range_text(k->range, 0, rt, sizeof(rt)));
        break;
    }
    }
    if (as_float) {   // every JT_NUM setting is a 32-bit float (TrainConfig)
        json_text(as_float, got, sizeof(got));
        report_at(x->r, MSG_ERROR, path, "%s %s", got, why);
        return 0;
    }
    if (!want[0]) return 1;
    json_text(v, got, sizeof(got));
    report_at(x->r, MSG_ERROR, path, "expected %s, got %s", want, got);
    return 0;
}

// the value of a no-effect / unsupported key that asks for nothing: no message
static int ds_value_is_off(const DsKey *k, const cJSON *v) {
    const char *off = k->off ? k->off : (k->type == JT_BOOL ? "false" : NULL);
    if (!off) return 0;
    if (strcmp(off, "*") == 0) return 1;
    char s[64];
    json_text(v, s, sizeof(s));
    return strcmp(s, off) == 0;
}

static int sched_from_config_name(const char *s) {
    for (int i = SCHED_WARMUP_LR; i < N_SCHED; i++) if (strcmp(s, SCHED_NAMES[i]) == 0) return i;
    return -1;
}

// a string key with a fixed set of values: the index, or -1 after an error naming them
static int ds_choice(DsPass *x, const char *path, const cJSON *v, const char *const *names, int n, const char *why) {
    for (int i = 0; i < n; i++) if (strcmp(v->valuestring, names[i]) == 0) return i;
    char list[160] = "";
    for (int i = 0; i < n; i++) snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s\"%s\"", i ? ", " : "", names[i]);
    report_at(x->r, MSG_ERROR, path, "\"%s\" is not supported (supported: %s)%s", v->valuestring, list, why ? why : "");
    return -1;
}

static const char *const OFFLOAD_DEVICES[] = {"none", "cpu", "nvme"};

// the first key of a block that only NVMe offload uses (its note if nothing goes to NVMe)
static void ds_nvme_key(TrainConfig *c, int id, const char *path) { if (!c->from[id]) c->from[id] = path; }

// Sets the setting an honoured or fp16 key maps to. `path` is the row's own path, a
// static string, since TrainConfig.from keeps it.
static void ds_apply(DsPass *x, const DsKey *k, const char *path, const cJSON *v) {
    TrainConfig *c = x->c;
    double d = v->valuedouble;
    switch (k->id) {
    case K_TRAIN_BATCH: c->total_batch = (int)d; c->from[FROM_TOTAL] = path; break;
    case K_MICRO_BATCH: c->B = (int)d; c->from[FROM_B] = path; break;
    case K_ACCUM: c->accum = (int)d; c->from[FROM_ACCUM] = path; break;
    case K_CLIP: c->grad_clip = (float)d; break;
    case K_STAGE: c->zero_stage = (int)d; c->from[FROM_STAGE] = path; break;
    case K_OVERLAP_COMM:
        c->prefetch = c->overlap_reduce = cJSON_IsTrue(v);
        if (ZERO_STAGE == 2)   // the estimator's stage-3 rows still use it
            report_at(x->r, MSG_NOTE, path, "%s: stage 2 always reduces each unit's gradient in the backward; "
                      "the key applies to stages 0-1's reductions and stage 3's prefetch", cJSON_IsTrue(v) ? "true" : "false");
        break;
    case K_PERSISTENCE: c->persistence_threshold = (long long)d; break;
    case K_MAX_LIVE: c->max_live_elems = (long long)d; break;
    case K_HPZ: c->zpp_hpz_size = (int)d; c->from[FROM_ZEROPP] = path; break;
    case K_QUANT_WEIGHTS: c->zpp_quantized_weights = cJSON_IsTrue(v); c->from[FROM_ZEROPP] = path; break;
    case K_QUANT_GRADS: c->zpp_quantized_gradients = cJSON_IsTrue(v); c->from[FROM_ZEROPP] = path; break;
    case K_OFFLOAD_OPT_DEVICE: case K_OFFLOAD_PARAM_DEVICE: {   // "nvme": its nvme_path is checked with the flags (nvme_config_check)
        int i = ds_choice(x, path, v, OFFLOAD_DEVICES, 3, NULL);
        if (i < 0) break;
        int opt = k->id == K_OFFLOAD_OPT_DEVICE;
        if (opt) { c->offload = i == 1; c->from[FROM_OFFLOAD] = path; }
        else { c->offload_param = i == 1; c->from[FROM_OFFLOAD_PARAM] = path; }
        c->from[opt ? FROM_NVME_OPTIM : FROM_NVME_PARAM] = i == 2 ? path : NULL;
        break;
    }
    case K_NVME_OPT_PATH: case K_NVME_PARAM_PATH: {
        int opt = k->id == K_NVME_OPT_PATH;
        char *dir = opt ? c->nvme_optim_dir : c->nvme_param_dir;
        if (strlen(v->valuestring) >= sizeof(c->nvme_optim_dir) || !v->valuestring[0])
            report_at(x->r, MSG_ERROR, path, "expected a directory (at most %zu characters), got \"%.40s\"", sizeof(c->nvme_optim_dir) - 1, v->valuestring);
        else strcpy(dir, v->valuestring);
        ds_nvme_key(c, opt ? FROM_NVME_OPTIM_KEY : FROM_NVME_PARAM_KEY, path);
        break;
    }
    case K_NVME_BUFFERS: c->nvme_buffers = (int)d; c->from[FROM_NVME_BUFFERS] = path; ds_nvme_key(c, FROM_NVME_OPTIM_KEY, path); break;
    case K_NVME_PIPE_READ: c->nvme_pipeline_read = cJSON_IsTrue(v); ds_nvme_key(c, FROM_NVME_OPTIM_KEY, path); break;
    case K_NVME_PIPE_WRITE: c->nvme_pipeline_write = cJSON_IsTrue(v); ds_nvme_key(c, FROM_NVME_OPTIM_KEY, path); break;
    case K_NVME_FAST_INIT: c->nvme_fast_init = cJSON_IsTrue(v); ds_nvme_key(c, FROM_NVME_OPTIM_KEY, path); break;
    case K_NVME_PARAM_BUFFERS: c->nvme_param_buffers = (int)d; c->from[FROM_NVME_PARAM_BUFFERS] = path; ds_nvme_key(c, FROM_NVME_PARAM_KEY, path); break;
    case K_NVME_PARAM_BUFSIZE: c->nvme_param_buffer_size = (long long)d; ds_nvme_key(c, FROM_NVME_PARAM_KEY, path); break;
    case K_AIO_BLOCK: c->aio_block_size = (long long)d; ds_nvme_key(c, FROM_AIO, path); break;
    case K_AIO_QUEUE_DEPTH: c->aio_queue_depth = (int)d; ds_nvme_key(c, FROM_AIO, path); break;
    case K_AIO_THREADS: c->aio_thread_count = (int)d; ds_nvme_key(c, FROM_AIO, path); break;
    case K_AIO_SINGLE_SUBMIT: c->aio_single_submit = cJSON_IsTrue(v); ds_nvme_key(c, FROM_AIO, path); break;
    case K_AIO_OVERLAP_EVENTS: c->aio_overlap_events = cJSON_IsTrue(v); ds_nvme_key(c, FROM_AIO, path); break;
    case K_OFFLOAD_RATIO: c->offload_ratio = d; c->from[FROM_RATIO] = path; break;
    case K_SUB_GROUP: c->sub_group_size = (long long)d; c->from[FROM_SUB_GROUP] = path; break;
    case K_DPU: c->offload_dpu = cJSON_IsTrue(v); c->from[FROM_DPU] = path; break;
    case K_DPU_WARMUP: c->dpu_warmup = (int)d; c->from[FROM_DPU_WARMUP] = path; break;
    case K_OPT_TYPE:
        if (strcasecmp(v->valuestring, "adam") == 0) c->opt_type = OPT_ADAM;
        else if (strcasecmp(v->valuestring, "adamw") == 0) c->opt_type = OPT_ADAMW;
        else report_at(x->r, MSG_ERROR, path, "\"%s\" is not supported: zeroc trains with \"Adam\" or \"AdamW\" (DeepSpeed's types; "
                       "\"Adam\" is AdamW unless params.adam_w_mode is false)", v->valuestring);
        break;
    case K_LR: x->opt_lr = d; x->have_opt_lr = 1; break;
    case K_BETAS:
        c->beta1 = (float)cJSON_GetArrayItem(v, 0)->valuedouble;
        c->beta2 = (float)cJSON_GetArrayItem(v, 1)->valuedouble;
        break;
    case K_EPS: c->eps = (float)d; break;
    case K_WEIGHT_DECAY: c->weight_decay = (float)d; break;
    case K_ADAM_W_MODE: c->adam_w_mode = cJSON_IsTrue(v); c->from[FROM_ADAM_W_MODE] = path; break;
    case K_BIAS_CORRECTION:
        if (!cJSON_IsTrue(v)) report_at(x->r, MSG_ERROR, path, "false is not supported: the Adam step always bias-corrects (remove the key or set true)");
        break;
    case K_AMSGRAD:
        if (cJSON_IsTrue(v)) report_at(x->r, MSG_ERROR, path, "AMSGrad is not implemented (DeepSpeed's FusedAdam refuses it too): remove the key or set false");
        break;
    case K_SCHED_TYPE: {
        int s = sched_from_config_name(v->valuestring);
        if (s < 0) report_at(x->r, MSG_ERROR, path, "\"%s\" is not supported: use \"WarmupLR\", \"WarmupDecayLR\" or \"WarmupCosineLR\" "
                             "(or leave the scheduler out and pick --lr-schedule cosine|constant)", v->valuestring);
        else { c->sched = s; c->from[FROM_SCHED] = path; }
        break;
    }
    case K_WARMUP_MIN_LR: c->warmup_min_lr = (float)d; c->from[FROM_WARMUP_MIN_LR] = path; break;
    case K_WARMUP_MAX_LR: x->max_lr = d; x->have_max_lr = 1; c->from[FROM_WARMUP_MAX_LR] = path; break;
    case K_WARMUP_STEPS: c->warmup = (int)d; c->from[FROM_WARMUP] = path; break;
    case K_WARMUP_TYPE: {
        static const char *const types[] = {"linear", "log"};
        int i = ds_choice(x, path, v, types, 2, NULL);
        if (i >= 0) { c->warmup_log = i; c->from[FROM_WARMUP_TYPE] = path; }
        break;
    }
    case K_TOTAL_STEPS: c->sched_total = (int)d; c->steps = (int)d; c->from[FROM_SCHED_TOTAL] = path; break;
    case K_WARMUP_MIN_RATIO: c->warmup_min_ratio = (float)d; c->from[FROM_WARMUP_MIN_RATIO] = path; break;
    case K_COS_MIN_RATIO: c->cos_min_ratio = (float)d; c->from[FROM_COS_MIN_RATIO] = path; break;
    case K_LAST_BATCH_ITERATION:
        if (d != -1) report_at(x->r, MSG_ERROR, path, "only -1 (the start) is supported: the schedule's position is the step (--resume restores it)");
        break;
    case K_FP16: c->fp16 = cJSON_IsTrue(v); c->from[FROM_FP16] = path; break;
    case K_LOSS_SCALE: c->loss_scale = (float)d; break;
    case K_SCALE_POWER: c->initial_scale_power = (int)d; break;
    case K_SCALE_WINDOW: c->loss_scale_window = (int)d; break;
    case K_HYSTERESIS: c->hysteresis = (int)d; break;
    case K_CONSECUTIVE_HYSTERESIS: c->consecutive_hysteresis = cJSON_IsTrue(v); break;
    case K_MIN_LOSS_SCALE: c->min_loss_scale = (float)d; break;
    case K_BF16: c->bf16 = cJSON_IsTrue(v); c->from[FROM_BF16] = path; break;
    case K_ACT_CKPT: c->recompute = 1; c->from[FROM_RECOMPUTE] = path; break;
    case K_BREAKDOWN: c->breakdown = cJSON_IsTrue(v); break;
    case K_CPU_CKPT: c->cpu_checkpointing = cJSON_IsTrue(v); c->from[FROM_CPU_CKPT] = path; break;
    case K_TB_ENABLED: c->tensorboard = cJSON_IsTrue(v); break;
    case K_CSV_ENABLED: c->csv_monitor = cJSON_IsTrue(v); break;
    case K_WANDB_ENABLED: c->wandb = cJSON_IsTrue(v); break;
    case K_TB_PATH: case K_TB_JOB: case K_CSV_PATH: case K_CSV_JOB: case K_WANDB_GROUP: case K_WANDB_TEAM: case K_WANDB_PROJECT: {
        char *dst[] = {c->tb_path, c->tb_job, c->csv_path, c->csv_job, c->wandb_group, c->wandb_team, c->wandb_project};
        size_t size[] = {sizeof(c->tb_path), sizeof(c->tb_job), sizeof(c->csv_path), sizeof(c->csv_job), sizeof(c->wandb_group),
                         sizeof(c->wandb_team), sizeof(c->wandb_project)};
        int i = k->id - K_TB_PATH;   // dst[] follows the K_ ids' order
        if (strlen(v->valuestring) >= size[i])
            report_at(x->r, MSG_ERROR, path, "expected at most %zu characters, got \"%.40s...\"", size[i] - 1, v->valuestring);
        else strcpy(dst[i], v->valuestring);
        break;
    }
    case K_NUM_CKPT:
        if ((int)d != c->model.n_layer)
            report_at(x->r, MSG_ERROR, path, "%d: zeroc checkpoints every layer (%d); remove the key or set it to the number of layers",
                      (int)d, c->model.n_layer);
        break;
    }
}

// the table's markdown text for a terminal line: without the `code` quotes
static const char *plain(const char *md, char *buf, size_t n) {
    size_t k = 0;
    for (const char *p = md; *p && k + 1 < n; p++) if (*p != '`') buf[k++] = *p;
    buf[k] = 0;
    return buf;
}

static void config_note_auto(TrainConfig *c, const char *path) {
    size_t n = strlen(c->config_auto), room = sizeof(c->config_auto) - n;
    if (room > strlen(path) + 8) snprintf(c->config_auto + n, room, "%s%s", n ? ", " : "", path);
    else if (room > 5 && strcmp(c->config_auto + n - 3, "...") != 0) snprintf(c->config_auto + n, room, ", ...");
}

// One block: every key checked against the table, in file order.
static void ds_walk(DsPass *x, const cJSON *obj, const char *prefix, int disabled) {
    for (const cJSON *v = obj->child; v; v = v->next) {
        char path[256], text[512];
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", v->string);
        const DsKey *k = strchr(v->string, '.') ? NULL : ds_find(path);   // a dotted name is no key
        if (!k) {
            const char *dym = ds_did_you_mean(path);
            char hint[96] = "";
            if (dym) snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", dym);
            if (!prefix[0] && !dym) report_at(x->r, MSG_WARNING, path, "unknown top-level key, ignored");
            else report_at(x->r, MSG_ERROR, path, "unknown %skey%s", prefix[0] ? "" : "top-level ", hint);
            continue;
        }
        if (cJSON_IsNull(v)) continue;   // DeepSpeed's Optional fields: null is the default
        if (cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0) { config_note_auto(x->c, path); continue; }
        if (!ds_check_value(x, k, path, v)) continue;
        if (k->type == JT_BLOCK || k->type == JT_OPEN) {
            const cJSON *en = cJSON_GetObjectItemCaseSensitive(v, "enabled");
            int off = disabled || cJSON_IsFalse(en);
            if (!off && !ds_value_is_off(k, v)) {
                if (k->kind == DS_NO_EFFECT) report_at(x->r, MSG_NOTE, path, "no effect here: %s", plain(k->what, text, sizeof(text)));
                if (k->kind == DS_UNSUPPORTED) report_at(x->r, MSG_ERROR, path, "not supported: %s", plain(k->what, text, sizeof(text)));
            }
            if (!off && k->id != K_NONE) ds_apply(x, k, k->path, v);   // a block that turns something on
            if (k->type == JT_BLOCK) ds_walk(x, v, k->path, off);
            continue;
        }
        if (k->id != K_NONE) { ds_apply(x, k, k->path, v); continue; }
        if (disabled || ds_value_is_off(k, v)) continue;
        if (k->kind == DS_NO_EFFECT) report_at(x->r, MSG_NOTE, path, "no effect here: %s", plain(k->what, text, sizeof(text)));
        else if (k->kind == DS_UNSUPPORTED) report_at(x->r, MSG_ERROR, path, "not supported: %s", plain(k->what, text, sizeof(text)));
    }
}

// The optimizer's arguments a config's optimizer block leaves out, where zeroc's default
// differs from the one DeepSpeed's Adam/AdamW (FusedAdam, CPU-Adam) takes: flags.h notes them.
// So is gradient_clipping beside an optimizer block: DeepSpeed leaves it off (0), zeroc sets 1.
enum { DS_ABSENT_LR = 1, DS_ABSENT_BETAS = 2, DS_ABSENT_WD = 4, DS_ABSENT_CLIP = 8 };

static int ds_absent_optimizer_args(const cJSON *root, int have_max_lr) {
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(root, "gradient_clipping");
    int absent_clip = !clip || cJSON_IsNull(clip) ? DS_ABSENT_CLIP : 0;
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    if (!cJSON_IsObject(opt)) return 0;   // a config that describes no optimizer describes no training to compare
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(opt, "params");
    const char *name[3] = {"lr", "betas", "weight_decay"};
    int absent = 0;
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, name[i]) : NULL;
        if (!v || cJSON_IsNull(v)) absent |= 1 << i;
    }
    return (have_max_lr ? absent & ~DS_ABSENT_LR : absent) | absent_clip;   // warmup_max_lr gives the lr
}

// A parsed DeepSpeed config, a JSON object, into c, collecting every problem in r.
// Returns the DS_ABSENT_* mask. tests/fuzz/ fuzzes it.
static int ds_config_apply_json(TrainConfig *c, const cJSON *root, ConfigReport *r) {
    DsPass x = {c, r, 0, 0, 0, 0};
    ds_walk(&x, root, "", 0);
    // DeepSpeed's WarmupLR / WarmupDecayLR set the optimizer's lr to warmup_max_lr
    if (x.have_max_lr) {
        if (x.have_opt_lr && x.opt_lr != x.max_lr)
            report_at(r, MSG_NOTE, "optimizer.params.lr", "%g is replaced by scheduler.params.warmup_max_lr %g, as in DeepSpeed", x.opt_lr, x.max_lr);
        c->lr = (float)x.max_lr;
    } else if (x.have_opt_lr) {
        c->lr = (float)x.opt_lr;
    }
    return ds_absent_optimizer_args(root, x.have_max_lr);
}

// Read a DeepSpeed config file into c, collecting every problem in r. Returns ds_config_apply_json's mask.
static int ds_config_apply(TrainConfig *c, const char *path, ConfigReport *r) {
    cJSON *root = json_parse_file_or_die(path);
    int absent = ds_config_apply_json(c, root, r);
    cJSON_Delete(root);
    return absent;
}

// ----------------------------------------------------------------------------
// DeepSpeed's batch semantics, as runtime/config.py's _set_batch_related_parameters
// and _batch_assertion apply them once the world size is known. Any two of
// train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps
// derive the third by integer division; each comes from its config key or its flag
// (--total-batch, --batch, --accum). All three must then satisfy
// total == micro * accum * world. Where DeepSpeed would refuse because neither the
// total nor the micro batch is given, zeroc takes its default micro batch (4), as it
// would for an "auto" value.

// a given batch setting's origin: its flag, or the config file
static const char *batch_source(const TrainConfig *c, int id) {
    const char *f = c->from[id];
    return !f ? "the caller" : strncmp(f, "--", 2) == 0 ? f : c->config_path;
}

static void config_resolve_batch(TrainConfig *c, int world) {
    int tb = c->total_batch, mb = c->B, ga = c->accum;   // 0: not given
    if (!tb && !mb) mb = 4;                               // zeroc's default micro batch
    if (tb && mb && ga) {
    } else if (tb && mb) ga = tb / mb / world;
    else if (tb && ga) mb = tb / world / ga;
    else if (mb && ga) tb = mb * ga * world;
    else if (tb) { ga = 1; mb = tb / world; }
    else { tb = mb * world; ga = 1; }
    char src[2048];
    snprintf(src, sizeof(src), "train_batch_size from %s, micro batch from %s, accumulation from %s",
             c->total_batch ? batch_source(c, FROM_TOTAL) : "the other two",
             c->B ? batch_source(c, FROM_B) : (c->total_batch ? "the other two" : "zeroc's default"),
             c->accum ? batch_source(c, FROM_ACCUM) : "the other two");
    if (mb <= 0) fatal("Micro batch size per gpu: %d has to be greater than 0 (%s, world size %d)", mb, src, world);
    if (ga <= 0) fatal("Gradient accumulation steps: %d has to be greater than 0 (%s, world size %d)", ga, src, world);
    if ((long long)tb != (long long)mb * ga * world)
        fatal("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
              "world_size %d != %d * %d * %d (%s)", tb, mb, ga, world, src);
    c->total_batch = tb; c->B = mb; c->accum = ga; c->world = world;
}

// ----------------------------------------------------------------------------
// The resolved configuration: a {"type":"config"} JSONL record shaped like a
// DeepSpeed config, saying what each key ended up as after "auto", the flags and
// the defaults; and the same printed at start-up.

// a float as the shortest decimal that reads back as the same float (3e-4f: 0.0003)
static double f32_decimal(float f) {
    char buf[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

static void add_f32(cJSON *o, const char *key, float v) { cJSON_AddNumberToObject(o, key, f32_decimal(v)); }

// after config_resolve_batch
static cJSON *config_json_record(const TrainConfig *c) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "type", "config");
    if (c->config_path[0]) cJSON_AddStringToObject(r, "config_file", c->config_path);
    cJSON_AddNumberToObject(r, "train_batch_size", c->total_batch);
    cJSON_AddNumberToObject(r, "train_micro_batch_size_per_gpu", c->B);
    cJSON_AddNumberToObject(r, "gradient_accumulation_steps", c->accum);
    cJSON_AddNumberToObject(r, "world_size", c->world);
    cJSON_AddNumberToObject(r, "steps", c->steps);
    cJSON_AddNumberToObject(r, "seq", c->T);
    add_f32(r, "gradient_clipping", c->grad_clip);
    cJSON_AddNumberToObject(r, "seed", (double)c->seed);

    // the model and the data: what the run trains, by zeroc's names (the start-up prints them on lines of their own)
    const ModelConfig *mc = &c->model;
    cJSON *mo = cJSON_AddObjectToObject(r, "model");
    model_config_json(mo, mc);
    cJSON_AddStringToObject(mo, "preset", c->preset);
    add_f32(mo, "norm_eps", mc->norm_eps);
    if (mc->arch == ARCH_LLAMA) add_f32(mo, "rope_theta", mc->rope_theta);
    if (c->init_path[0]) cJSON_AddStringToObject(mo, "init", c->init_path);
    if (c->resume_dir[0]) cJSON_AddStringToObject(mo, "resume", c->resume_dir);
    cJSON *da = cJSON_AddObjectToObject(r, "data");
    cJSON_AddStringToObject(da, "train", c->train_path);
    cJSON_AddStringToObject(da, "val", c->val_path);
    cJSON_AddBoolToObject(da, "shuffle", c->shuffle);
    cJSON_AddNumberToObject(da, "val_every", c->val_every);
    cJSON_AddNumberToObject(da, "val_batches", c->val_batches);

    cJSON *opt = cJSON_AddObjectToObject(r, "optimizer");
    cJSON_AddStringToObject(opt, "type", c->adam_w_mode && c->opt_type != OPT_ADAM ? "AdamW" : "Adam");
    cJSON *op = cJSON_AddObjectToObject(opt, "params");
    add_f32(op, "lr", c->lr);
    cJSON *betas = cJSON_AddArrayToObject(op, "betas");
    cJSON_AddItemToArray(betas, cJSON_CreateNumber(f32_decimal(c->beta1)));
    cJSON_AddItemToArray(betas, cJSON_CreateNumber(f32_decimal(c->beta2)));
    add_f32(op, "eps", c->eps);
    add_f32(op, "weight_decay", c->weight_decay);
    cJSON_AddBoolToObject(op, "adam_w_mode", c->adam_w_mode);

    cJSON *sc = cJSON_AddObjectToObject(r, "scheduler");
    cJSON_AddStringToObject(sc, "type", SCHED_NAMES[c->sched]);
    cJSON *sp = cJSON_AddObjectToObject(sc, "params");
    int s = c->sched;
    if (s == SCHED_WARMUP_LR || s == SCHED_WARMUP_DECAY_LR) {
        add_f32(sp, "warmup_min_lr", c->warmup_min_lr);
        add_f32(sp, "warmup_max_lr", c->lr);
    }
    if (s == SCHED_WARMUP_COSINE_LR) add_f32(sp, "warmup_min_ratio", c->warmup_min_ratio);
    if (s != SCHED_CONSTANT) cJSON_AddNumberToObject(sp, "warmup_num_steps", c->warmup);
    if (s >= SCHED_WARMUP_LR) cJSON_AddStringToObject(sp, "warmup_type", c->warmup_log ? "log" : "linear");
    if (s == SCHED_WARMUP_COSINE_LR) add_f32(sp, "cos_min_ratio", c->cos_min_ratio);
    if (s == SCHED_COSINE) add_f32(sp, "min_lr_frac", c->min_lr_frac);
    if (s == SCHED_COSINE || s == SCHED_WARMUP_DECAY_LR || s == SCHED_WARMUP_COSINE_LR)
        cJSON_AddNumberToObject(sp, "total_num_steps", lr_total_steps(c));

    cJSON *zo = cJSON_AddObjectToObject(r, "zero_optimization");
    cJSON_AddNumberToObject(zo, "stage", ZERO_STAGE);
    cJSON_AddBoolToObject(zo, "overlap_comm", c->prefetch);
    cJSON_AddNumberToObject(zo, "stage3_param_persistence_threshold", (double)c->persistence_threshold);
    cJSON_AddNumberToObject(zo, "stage3_max_live_parameters", (double)c->max_live_elems);
    cJSON *oo = cJSON_AddObjectToObject(zo, "offload_optimizer"), *op_ = cJSON_AddObjectToObject(zo, "offload_param");
    int nvme = c->nvme_optim_dir[0] || c->nvme_param_dir[0];
    cJSON_AddStringToObject(oo, "device", c->nvme_optim_dir[0] ? "nvme" : c->offload ? "cpu" : "none");
    if (c->nvme_optim_dir[0]) cJSON_AddStringToObject(oo, "nvme_path", c->nvme_optim_dir);
    if (nvme) {   // the NVMe step's settings, when either device is "nvme"
        cJSON_AddNumberToObject(oo, "buffer_count", c->nvme_buffers);
        cJSON_AddBoolToObject(oo, "pipeline_read", c->nvme_pipeline_read);
        cJSON_AddBoolToObject(oo, "pipeline_write", c->nvme_pipeline_write);
        cJSON_AddBoolToObject(oo, "fast_init", c->nvme_fast_init);
        cJSON_AddNumberToObject(zo, "nvme_tile", (double)c->nvme_tile);
    }
    if (c->offload_dpu) {   // zeroc's keys: DeepSpeed has no delayed update
        cJSON_AddBoolToObject(oo, "delayed_update", 1);
        cJSON_AddNumberToObject(oo, "delayed_update_warmup", c->dpu_warmup);
    }
    if (c->offload_ratio < 1) {
        cJSON_AddNumberToObject(oo, "ratio", c->offload_ratio);
        cJSON_AddNumberToObject(zo, "sub_group_size", (double)c->sub_group_size);
    }
    cJSON_AddStringToObject(op_, "device", c->nvme_param_dir[0] ? "nvme" : c->offload_param ? "cpu" : "none");
    if (c->nvme_param_dir[0]) {
        cJSON_AddStringToObject(op_, "nvme_path", c->nvme_param_dir);
        cJSON_AddNumberToObject(op_, "buffer_count", c->nvme_param_buffers);
    }

    cJSON_AddStringToObject(r, "precision", c->fp16 ? "fp16" : TRAINER_IS_GPU ? "bf16" : "fp32");
    cJSON *fp = cJSON_AddObjectToObject(r, "fp16");
    cJSON_AddBoolToObject(fp, "enabled", c->fp16);
    add_f32(fp, "loss_scale", c->loss_scale);
    cJSON_AddNumberToObject(fp, "initial_scale_power", c->initial_scale_power);
    cJSON_AddNumberToObject(fp, "loss_scale_window", c->loss_scale_window);
    cJSON_AddNumberToObject(fp, "hysteresis", c->hysteresis);
    cJSON_AddBoolToObject(fp, "consecutive_hysteresis", c->consecutive_hysteresis);
    add_f32(fp, "min_loss_scale", c->min_loss_scale);
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(r, "bf16"), "enabled", TRAINER_IS_GPU && !c->fp16);
    if (nvme) {
        cJSON *aio = cJSON_AddObjectToObject(r, "aio");
        cJSON_AddNumberToObject(aio, "block_size", (double)c->aio_block_size);
        cJSON_AddNumberToObject(aio, "queue_depth", c->aio_queue_depth);
        cJSON_AddNumberToObject(aio, "thread_count", c->aio_thread_count);
        cJSON_AddBoolToObject(aio, "single_submit", c->aio_single_submit);
        cJSON_AddBoolToObject(aio, "overlap_events", c->aio_overlap_events);
    }
    if (c->recompute) {   // the activation_checkpointing block is present exactly when recompute is on
        cJSON *ac = cJSON_AddObjectToObject(r, "activation_checkpointing");
        cJSON_AddNumberToObject(ac, "number_checkpoints", c->model.n_layer);
        cJSON_AddBoolToObject(ac, "cpu_checkpointing", c->cpu_checkpointing);
    }

    for (int csv = 0; csv < 2; csv++) {   // the monitors, where on (train/monitor.h)
        if (!(csv ? c->csv_monitor : c->tensorboard)) continue;
        cJSON *mo = cJSON_AddObjectToObject(r, csv ? "csv_monitor" : "tensorboard");
        cJSON_AddBoolToObject(mo, "enabled", 1);
        cJSON_AddStringToObject(mo, "output_path", csv ? c->csv_path : c->tb_path);
        cJSON_AddStringToObject(mo, "job_name", csv ? c->csv_job : c->tb_job);
    }

    cJSON *au = cJSON_AddArrayToObject(r, "auto");
    for (const char *p = c->config_auto; *p;) {
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char key[256];
        snprintf(key, sizeof(key), "%.*s", (int)(len < 255 ? len : 255), p);
        cJSON_AddItemToArray(au, cJSON_CreateString(key));
        p += len + (e ? 2 : 0);
    }
    return r;
}

// the leaves of a record as "a.b value, ..." appended to buf
static void json_flatten(const cJSON *o, const char *prefix, char *buf, size_t n) {
    for (const cJSON *v = o->child; v; v = v->next) {
        char key[256];
        snprintf(key, sizeof(key), "%s%s%s", prefix, prefix[0] ? "." : "", v->string);
        if (cJSON_IsObject(v)) { json_flatten(v, key, buf, n); continue; }
        char val[256];
        json_text(v, val, sizeof(val));
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, "%s%s %s", k ? ", " : "", key, val);
    }
}

// The resolved configuration, one line per block, for rank 0 at start-up.
static void config_print_resolved(const TrainConfig *c, FILE *f) {
    cJSON *r = config_json_record(c);
    fprintf(f, "configuration (%s%s):\n", c->config_path[0] ? c->config_path : "defaults", c->config_path[0] ? ", then flags" : " and flags");
    char line[4096] = "";
    for (const cJSON *v = r->child; v; v = v->next) {   // the top-level numbers on the first line
        if (cJSON_IsNumber(v)) {
            size_t k = strlen(line);
            snprintf(line + k, sizeof(line) - k, "%s%s %g", k ? ", " : "", v->string, v->valuedouble);
        }
    }
    fprintf(f, "  %s\n", line);
    for (const cJSON *v = r->child; v; v = v->next) {
        line[0] = 0;
        if (!strcmp(v->string, "model") || !strcmp(v->string, "data")) continue;   // their own start-up lines say them
        if (cJSON_IsObject(v)) json_flatten(v, "", line, sizeof(line));
        else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0) json_text(v, line, sizeof(line));
        else if (cJSON_IsString(v) && strcmp(v->string, "type") && strcmp(v->string, "config_file")) snprintf(line, sizeof(line), "%s", v->valuestring);
        if (line[0]) fprintf(f, "  %s: %s\n", v->string, line);
    }
    cJSON_Delete(r);
}

// The key table as markdown, for --config-keys; docs/config.md's key table is this output.
static void ds_print_keys(FILE *f) {
    fprintf(f, "| key | zeroc | what it does here |\n|---|---|---|\n");
    for (int i = 0; i < N_DS_KEYS; i++) {
        const DsKey *k = &DS_KEYS[i];
        fprintf(f, "| `%s`", k->path);
        if (k->alias) fprintf(f, " (or `%s`)", k->alias);
        fprintf(f, " | %s | ", DS_KIND_NAMES[k->kind]);
        for (const char *p = k->what; *p; p++) {
            if (*p == '|') fputc('\\', f);   // a table cell
            fputc(*p, f);
        }
        fprintf(f, " |\n");
    }
}
