# edgellm — `make run` builds, fetches the default model and runs it;
# `make chat` chats with it; `make test` installs what it needs, builds (release + ASan/UBSan) and runs every test.
JOBS ?= $(shell nproc)
PROMPT ?= Once upon a time, there was a little girl named
BUILD := build
ASAN := build-asan

.PHONY: all deps build cli asan run chat test test-release test-asan fuzz clean goldens

all: build

deps:
	@bash scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

asan:
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEL_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN) -j$(JOBS)

cli:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j$(JOBS) --target edgellm-cli

run: deps cli
	@MODEL=$$(bash scripts/fetch-model.sh) && \
	  ./$(BUILD)/edgellm run -m "$$MODEL" --allow-unsigned -p "$(if $(P),$(P),$(PROMPT))" -n 128 --temp 0

chat: deps cli
	@MODEL=$$(bash scripts/fetch-model.sh) && ./$(BUILD)/edgellm chat -m "$$MODEL" --allow-unsigned

test: deps build asan test-release test-asan

test-release:
	@cd $(BUILD) && ctest --output-on-failure

test-asan:
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure

# Not part of `make test`: builds llama-cpp-python from its source package (minutes)
# and rewrites the fidelity goldens in tests/data (scripts/make-goldens.sh).
goldens:
	@JOBS=$(JOBS) bash scripts/make-goldens.sh

fuzz:
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEL_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz
