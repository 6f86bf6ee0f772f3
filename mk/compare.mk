# make compare ARCH=gpt2|llama STEPS=200: loss curves of ./train_gpt_cpu vs the PyTorch reference
# (scripts/train_gpt.py) from the same initial weights; writes out/compare/{c,torch}_$(ARCH).jsonl and
# out/compare/loss_$(ARCH).png, and ends with "max |loss diff| over N steps: X".
ARCH ?= gpt2
STEPS ?= 200
PYTHON ?= /usr/bin/python3
ZERO ?= 0

compare:
	@ARCH=$(ARCH) STEPS=$(STEPS) PYTHON=$(PYTHON) ZERO=$(ZERO) bash scripts/compare.sh
