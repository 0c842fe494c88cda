# Thin wrapper: everything real lives in CMake and scripts/.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
PYTHON ?= /usr/bin/python3

.PHONY: all deps build demo test format clean

all: build

deps:
	@scripts/install_deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release > $(BUILD_DIR).cmake.log 2>&1 || (cat $(BUILD_DIR).cmake.log; exit 1)
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD_DIR)

test: build
	@$(PYTHON) scripts/run_tests.py --build $(BUILD_DIR)

format:
	@find include src tools tests python -name '*.hpp' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR).cmake.log
