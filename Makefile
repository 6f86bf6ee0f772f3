# zeroc: build, data, tests, demo.
#   make demo                  prepare the Brown data, build, train (GPU if found, else CPU on 4 ranks), sample
#   make test                  the test suite (GPU tests skip without a GPU)
#   make train_gpt_cpu ZERO=k  CPU trainer with ZeRO stage k (0..3)
#   make train_gpt ZERO=k      GPU trainer (OFFLOAD=1: optimizer offload on by default; FP16=1: fp16 instead of bf16)
#   make compare ARCH=gpt2 STEPS=200   C vs PyTorch loss curves
.DEFAULT_GOAL := all
SHELL := /bin/bash

ZERO ?= 0
OFFLOAD ?= 0
FP16 ?= 0
ARCH ?= gpt2
STEPS ?= 200
PYTHON ?= /usr/bin/python3
CC ?= gcc
MPICC ?= mpicc
NVCC ?= /usr/local/cuda/bin/nvcc
CPU_ARCH_FLAGS ?= -march=native
NVCC_OPT ?= -O3
CUDA_DEV_BIN ?= dev/cuda/bin
MPIRUN_FLAGS ?= --allow-run-as-root --oversubscribe

OPENBLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
CFLAGS := -O3 $(CPU_ARCH_FLAGS) -fopenmp -std=gnu11 -D_GNU_SOURCE -Wall -Wno-unused-function -Wno-unused-result \
          -I. -I/usr/include/x86_64-linux-gnu/openblas-openmp
LDLIBS := -L$(OPENBLAS_DIR) -Wl,-rpath,$(OPENBLAS_DIR) -lopenblas -lcjson -lpcre2-8 -luring -lpthread -lmvec -lm
NVCCFLAGS := $(NVCC_OPT) -std=c++17 -gencode=arch=compute_90,code=sm_90 -I. -Xcompiler -fopenmp,-D_GNU_SOURCE -diag-suppress 177,550
NVLDLIBS := -lcublasLt -lcublas -lnccl -lcjson -lpcre2-8 -luring -lpthread -lgomp -lstdc++ -lm

# the top level (zero.h, adamw.cuh, dataloader.h, tokenizer.h) and the folders it is written against
HEADERS := zero.h adamw.cuh dataloader.h tokenizer.h tests/debug_state.h \
           $(wildcard util/*.h comm/*.h config/*.h model/*.h zero/*.h zero/*.cuh train/*.h formats/*.h)
BUILD := build

.PHONY: all setup data demo test compare clean train_gpt_cpu test_gpt_cpu train_gpt no-nvcc test_gpt cuda bench FORCE
all: train_gpt_cpu test_gpt_cpu

setup:
	@bash scripts/setup.sh

# ---------------------------------------------------------------------------
# CPU trainer: one binary per ZeRO stage, ./train_gpt_cpu_zero<k>, and ./train_gpt_cpu a link to the one
# built last, said in one line: a build of one stage never replaces another stage's binary unannounced
$(BUILD)/z%/train_gpt_cpu: train_gpt.c $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -DZERO_STAGE=$* $< -o $@ $(LDLIBS)

$(BUILD)/z%/test_gpt_cpu: test_gpt.c train_gpt.c $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -DZERO_STAGE=$* $< -o $@ $(LDLIBS)

train_gpt_cpu_zero%: $(BUILD)/z%/train_gpt_cpu
	@cp $< $@
train_gpt_cpu: train_gpt_cpu_zero$(ZERO)
	@$(call link_stage,$@,$<,$(ZERO))
test_gpt_cpu: $(BUILD)/z0/test_gpt_cpu
	@cp $< $@

# ---------------------------------------------------------------------------
# the per-stage builds under build/ stay (make would delete them as intermediate files): the tests and
# the "run build/z<k>/..." hints use them
.SECONDARY: $(foreach k,0 1 2 3,$(BUILD)/z$(k)/train_gpt_cpu $(foreach o,0 1,$(BUILD)/gpu_z$(k)_o$(o)/train_gpt $(BUILD)/gpu_z$(k)_o$(o)_fp16/train_gpt))

# ./train_gpt_cpu or ./train_gpt pointed at the stage's binary, said in one line (link_stage NAME TARGET STAGE)
link_stage = ln -sfn $(2) $(1) && echo "./$(1) -> ./$(2) (ZeRO stage $(3)); each stage keeps its own binary, ./$(1)_zero<k>"

# GPU trainer (compiles and links without a GPU)
$(BUILD)/gpu_z%_o$(OFFLOAD)/train_gpt: train_gpt.cu $(HEADERS) $(wildcard cuda/*.cuh)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DZERO_STAGE=$* -DOFFLOAD=$(OFFLOAD) -ccbin $(MPICC) $< -o $@ $(NVLDLIBS)

# FP16=1: floatX = __half (fp16 parameters, gradients and activations, DeepSpeed's loss scaling),
# built by mk/gpu.mk's rules into build/gpu_z<k>_o<o>_fp16/
# ./train_gpt_zero<k>[_offload][_fp16] per variant, ./train_gpt linked to the last one built. Without a CUDA
# compiler the build ends in one line saying what to install and how to build the CPU trainer instead.
GPU_SUFFIX := $(if $(filter 1,$(OFFLOAD)),_offload)$(if $(filter 1,$(FP16)),_fp16)
train_gpt_zero%$(GPU_SUFFIX): $(BUILD)/gpu_z%_o$(OFFLOAD)$(if $(filter 1,$(FP16)),_fp16)/train_gpt
	@cp $< $@
train_gpt: $(if $(shell command -v $(NVCC) 2> /dev/null),train_gpt_zero$(ZERO)$(GPU_SUFFIX),no-nvcc)
	@$(call link_stage,$@,$<,$(ZERO))
no-nvcc:
	$(error no CUDA compiler ($(NVCC) not found): install the CUDA toolkit (nvcc; or set NVCC=path), or train on the CPU: make train_gpt_cpu ZERO=$(ZERO))

-include mk/*.mk

# ---------------------------------------------------------------------------
clean:
	rm -rf $(BUILD) train_gpt_cpu train_gpt_cpu_zero? test_gpt_cpu train_gpt train_gpt_zero?* test_gpt prepare_data export_model dev/cuda/bin

# stage 3 with released gather buffers poisoned with NaN (tests)
$(BUILD)/z3/train_gpt_cpu_poison: train_gpt.c $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -DZERO_STAGE=3 -DZERO_POISON=1 $< -o $@ $(LDLIBS)

ZERO_BINS := $(BUILD)/z0/train_gpt_cpu $(BUILD)/z1/train_gpt_cpu $(BUILD)/z2/train_gpt_cpu $(BUILD)/z3/train_gpt_cpu $(BUILD)/z3/train_gpt_cpu_poison
zero-bins: $(ZERO_BINS)

# ---------------------------------------------------------------------------
# the two README commands
demo: setup
	@$(if $(filter command line,$(origin ZERO)),ZERO=$(ZERO)) $(if $(filter command line,$(origin STEPS)),STEPS=$(STEPS)) bash scripts/demo.sh

# the programs the tests run, built before them and two at a time on CI's two cores (the tests' own
# make calls then find them built); the CUDA and clang builds stay in the tests that skip without them
TEST_BINS := $(BUILD)/asan_z0/train_gpt_cpu $(BUILD)/asan_z3/train_gpt_cpu $(BUILD)/z0/test_gpt_cpu \
             $(BUILD)/z0/test_decode_cpu $(BUILD)/z3/test_decode_cpu $(BUILD)/config_test $(BUILD)/dataloader_test \
             $(BUILD)/adamw_test $(BUILD)/adamw_test_generic $(BUILD)/export_model \
             dev/cuda/bin/flash_emulate dev/cuda/bin/flash_emulate_asan dev/cuda/bin/kernels_emulate \
             dev/cuda/bin/kernels_emulate_asan
test: setup
	@$(MAKE) -s -j$$(nproc) all zero-bins prepare_data $(TEST_BINS)
	@bash scripts/prepare_data.sh > /dev/null
	@bash tests/run.sh

# AddressSanitizer + UndefinedBehaviorSanitizer builds of the CPU trainer (tests/test_sanitizers.sh)
$(BUILD)/asan_z%/train_gpt_cpu: train_gpt.c $(HEADERS)
	@mkdir -p $(@D)
	$(MPICC) $(filter-out -O3,$(CFLAGS)) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -DZERO_STAGE=$* $< -o $@ $(LDLIBS)
