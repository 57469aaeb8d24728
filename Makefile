# edgellm — `make run` builds, fetches the default model and runs it;
# `make test` installs what it needs, builds (release + ASan/UBSan) and runs every test.
JOBS ?= $(shell nproc)
PROMPT ?= Explain in two sentences why the sky is blue.
BUILD := build
ASAN := build-asan

.PHONY: all deps build asan run chat test test-release test-asan fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

asan:
	@cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEL_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN) -j$(JOBS)

run: deps build
	@MODEL=$$(bash scripts/fetch-model.sh) && \
	  if [ -t 0 ] && [ -z "$(NOCHAT)" ] && [ -z "$(P)" ]; then \
	    ./$(BUILD)/edgellm chat -m "$$MODEL"; \
	  else \
	    ./$(BUILD)/edgellm run -m "$$MODEL" -p "<start_of_turn>user\n$(if $(P),$(P),$(PROMPT))<end_of_turn>\n<start_of_turn>model\n" -n 128 --temp 0; \
	  fi

test: deps build asan test-release test-asan

test-release:
	@cd $(BUILD) && ctest --output-on-failure

test-asan:
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure

fuzz:
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEL_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz
