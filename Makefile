# attn: the two commands.
#   make demo   install what is missing, build, compile the default example
#   make check  install what is missing, build, run every test suite
BUILD   ?= build
PYTHON  ?= /usr/bin/python3
JOBS    ?= $(shell nproc)
EXAMPLE ?= examples/llama3-8b.mlir
CHIP    ?= sm_90

.PHONY: all deps configure build demo check docs clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -G Ninja -S . -B $(BUILD) \
	  -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PYTHON)

build: configure
	ninja -C $(BUILD) -j$(JOBS)

demo: build
	@scripts/demo.sh $(BUILD) $(EXAMPLE) $(CHIP)

check: build
	@PYTHON=$(PYTHON) scripts/check.sh $(BUILD)

# Regenerates the dialect and pass reference (docs/reference/) from ODS.
docs: configure
	ninja -C $(BUILD) attn-doc

clean:
	rm -rf $(BUILD)
