# Fuzzing (libFuzzer, clang) of every parser of outside input: tests/fuzz/fuzz_<name>.c, seeds in
# tests/fuzz/corpus/<name>/.
#   make fuzz                 build every target and run each for FUZZ_TIME seconds (default 60) under
#                             ASan + UBSan; the corpus grows in build/fuzz/corpus/, crashes go to
#                             build/fuzz/artifacts/ (scripts/fuzz.sh)
#   make fuzz-bins            build them only
# tests/test_fuzz.sh runs each for a few seconds in `make test`.
.PHONY: fuzz fuzz-bins
FUZZ_TIME ?= 60
FUZZ_CC ?= clang
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=gnu11 -D_GNU_SOURCE \
               -Wall -Wno-unused-function -I.

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< -o $@ -lcjson -lpcre2-8 -lm

fuzz-bins: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@bash scripts/fuzz.sh $(FUZZ_TIME) $(FUZZ_TARGETS)
