#!/usr/bin/env bash
# run-upstream-server-tests.sh — llama.cpp's server test suite, from a llama.cpp
# checkout you already have, against `edgellm serve`. Not part of `make test`:
# the repository stands alone and this needs a checkout it does not hold
# (make test runs the fixed list from llama-cpp-python's sdist: ctest
# test_llama_suite).
#
#   LLAMA_CPP_SRC=/path/to/llama.cpp bash scripts/run-upstream-server-tests.sh [unit/test_x.py ...]
#
# Runs whole files (default: the ten of docs/SERVER.md's table) through
# tests/server/test_llama_suite.py --all: the suite is $LLAMA_CPP_SRC/tools/server/tests,
# the chat templates its tests name are $LLAMA_CPP_SRC/models/templates, the
# servers are tests/server/llama-server-wrapper -> $EL_CLI_PATH (default
# build/edgellm) with the models of $EL_FIXTURE_DIR. Nothing is downloaded: a
# test whose model is not mapped fails at its server's start, naming the model.
# Prints one line per test and the totals; EL_SUITE_LOG=FILE keeps pytest's
# whole output. Exit status: 0 all ran tests passed, 1 some failed, 2 usage.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
src="${LLAMA_CPP_SRC:-}"
if [ -z "$src" ] || [ ! -f "$src/tools/server/tests/utils.py" ]; then
  echo "run-upstream-server-tests: set LLAMA_CPP_SRC to a llama.cpp checkout (with tools/server/tests/utils.py)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  set -- unit/test_basic.py unit/test_completion.py unit/test_chat_completion.py unit/test_ctx_shift.py \
    unit/test_ignore_eos.py unit/test_security.py unit/test_tokenize.py unit/test_template.py \
    unit/test_tool_call.py unit/test_stream.py
fi
if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
  echo "llama.cpp at $(git -C "$src" log -1 --format='%H (%cs)')"
fi
export EL_LLAMA_SERVER_TESTS="$src/tools/server/tests"
[ -d "$src/models/templates" ] && export EL_LLAMA_TEMPLATES="$src/models/templates"
exec python3 "$here/tests/server/test_llama_suite.py" --all "$@"
