# The GPU step's opt-in paths, every one at once: the flags config/train_config.h's defaults leave off
# until a device run validates them (docs/gpu.md, "Validated and opt-in paths"). One list, sourced by
# scripts/gpu_check.sh, tests/test_gpu.sh and bench/gpu_train.sh from the repository root. A path made
# the default leaves this list in the same commit.
NEW_PATHS="--attention flash --lean-step 1 --fuse-residual 1 --device-loss 1 --plan-cache 1 --bias-grad-epilogue 1"
