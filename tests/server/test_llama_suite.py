#!/usr/bin/env python3
"""llama.cpp's own server test suite against `edgellm serve` (issue 20, "Test").

Runs a FIXED LIST of test ids from llama.cpp's tools/server/tests (PASSING
below: the tests that pass against edgellm for the right reason and do not
depend on the text of the suite's own models) with pytest and the suite's own
conftest.py and utils.py, unmodified. The suite starts `llama-server` from
LLAMA_SERVER_BIN_PATH; that is tests/server/llama-server-wrapper, which maps
llama-server's flags (and the suite's Hugging Face model names) onto
`edgellm serve` ($EL_CLI_PATH) and the reference models ($EL_FIXTURE_DIR).
Fails if any listed test fails, errors, is skipped or is not found, or (in a
sanitizer build) if any server wrote an ASan/LSan/UBSan report.

Where the suite is looked for: $EL_LLAMA_SERVER_TESTS (a path to
tools/server/tests), else ~/.cache/edgellm/llama-server-tests (what
scripts/fetch-llama-server-tests.sh extracts from llama-cpp-python's source
package). It is copied to a temporary directory and run there, so the suite's
scratch files (./tmp) never land in the cache. The suite is not part of this
repository.

This file is also the pytest plugin (-p test_llama_suite) that replaces the
suite's session-start ServerPreset.load_all(): in llama.cpp that starts every
preset once to download its model from Hugging Face; here nothing is
downloaded (the wrapper maps models to local files), and starting the presets
edgellm cannot serve (BERT, a reranker, router mode) would fail the whole
session instead of the tests that use them.

`python3 test_llama_suite.py --all unit/test_x.py ...` runs whole files
instead of the list and prints each test's outcome (how the README's counts
were made); EL_SUITE_LOG=FILE keeps pytest's whole output there.

Exit status: 0 all listed tests passed, 1 something failed, 77 skipped (no
suite, no reference models, or the suite's Python packages missing).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)
SKIP = 77
WRAPPER = os.path.join(HERE, "llama-server-wrapper")

# The fixed list: each passes against edgellm because edgellm answers the API
# the test checks, not because of a model's text. Three assert a refusal that
# edgellm gives because it lacks the whole feature (a multimodal prompt, a
# local media file, a grammar): that refusal is its designed behaviour. See README ("llama-server
# compatibility", "llama.cpp's server test suite") for the rest.
PASSING = [
    # server start, /health, /props (n_ctx per slot, the seed), /models (--alias), /slots (501 with --no-slots)
    "unit/test_basic.py::test_server_start_simple",
    "unit/test_basic.py::test_server_props",
    "unit/test_basic.py::test_server_models",
    "unit/test_basic.py::test_server_slots",
    # /completion: stream == non-stream, seeds, batch sizes, context overflow, response_fields,
    # n_probs (streamed too), token-id logit_bias, multimodal prompts refused
    "unit/test_completion.py::test_completion_stream_vs_non_stream",
    "unit/test_completion.py::test_consistent_result_same_seed[1]",
    "unit/test_completion.py::test_consistent_result_same_seed[2]",
    "unit/test_completion.py::test_different_result_different_seed[1]",
    "unit/test_completion.py::test_different_result_different_seed[2]",
    "unit/test_completion.py::test_consistent_result_different_batch_size[0.0-16]",
    "unit/test_completion.py::test_consistent_result_different_batch_size[0.0-32]",
    "unit/test_completion.py::test_nocache_long_input_prompt",
    "unit/test_completion.py::test_json_prompt_mtm_error_when_not_supported",
    "unit/test_completion.py::test_completion_unified[256-4-n_predict_vals0-expected_success0]",
    "unit/test_completion.py::test_completion_unified[256-4-n_predict_vals1-expected_success1]",
    "unit/test_completion.py::test_completion_unified[256-4-n_predict_vals2-expected_success2]",
    "unit/test_completion.py::test_completion_unified[256-4-n_predict_vals3-expected_success3]",
    "unit/test_completion.py::test_completion_response_fields[I believe the meaning of life is-8-response_fields0]",
    "unit/test_completion.py::test_completion_response_fields[I believe the meaning of life is-32-response_fields1]",
    "unit/test_completion.py::test_n_probs",
    "unit/test_completion.py::test_n_probs_stream",
    "unit/test_completion.py::test_logit_bias[True-True]",
    # chat: malformed messages are 400, a grammar is refused (edgellm takes none), logprobs (streamed
    # too), logit_bias, input token count
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[None]",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[string]",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[messages2]",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[messages3]",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[messages4]",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[messages5]",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[messages6]",
    "unit/test_chat_completion.py::test_completion_with_invalid_grammar",
    "unit/test_chat_completion.py::test_logprobs",
    "unit/test_chat_completion.py::test_logprobs_stream",
    "unit/test_chat_completion.py::test_logit_bias",
    "unit/test_chat_completion.py::test_chat_completions_token_count",
    # /tokenize (with_pieces too), /detokenize
    "unit/test_tokenize.py::test_tokenize_detokenize",
    "unit/test_tokenize.py::test_tokenize_with_bos",
    "unit/test_tokenize.py::test_tokenize_with_pieces",
    # API key (Bearer, X-Api-Key, the openai client), public /health, local media refused
    "unit/test_security.py::test_access_public_endpoint[/health]",
    "unit/test_security.py::test_incorrect_api_key[None]",
    "unit/test_security.py::test_incorrect_api_key[invalid-key]",
    "unit/test_security.py::test_correct_api_key",
    "unit/test_security.py::test_correct_api_key_anthropic_header",
    "unit/test_security.py::test_openai_library_correct_api_key",
    "unit/test_security.py::test_local_media_file[None-file://mtmd/test-1.jpeg-False]",
    # generation up to n_predict without context shift; a streamed /v1/completions ends with "length"
    "unit/test_ctx_shift.py::test_ctx_shift_disabled_short_prompt[64-64-False]",
    "unit/test_ctx_shift.py::test_ctx_shift_disabled_stream",
    # end-of-generation biases (null = -inf) in generation_settings with ignore_eos, none without
    "unit/test_ignore_eos.py::test_ignore_eos_populates_logit_bias",
    "unit/test_ignore_eos.py::test_ignore_eos_false_no_logit_bias",
    # --no-ui; two trailing assistant messages are a 400; a context overflow's type is llama-server's
    "unit/test_basic.py::test_no_ui",
    "unit/test_chat_completion.py::test_invalid_chat_completion_req[messages7]",
    "unit/test_chat_completion.py::test_context_size_exceeded",
    "unit/test_chat_completion.py::test_context_size_exceeded_stream",
    # llama.cpp's models/templates through --chat-template-file: today's date (date_string), and
    # /apply-template's add_generation_prompt
    "unit/test_template.py::test_date_inside_prompt[meta-llama-Llama-3.3-70B-Instruct-%d %b %Y-None]",
    "unit/test_template.py::test_date_inside_prompt[meta-llama-Llama-3.3-70B-Instruct-%d %b %Y-tools1]",
    "unit/test_template.py::test_date_inside_prompt[meta-llama-Llama-3.3-70B-Instruct-%d %b %Y-tools2]",
    "unit/test_template.py::test_add_generation_prompt[meta-llama-Llama-3.3-70B-Instruct-<|start_header_id|>assistant<|end_header_id|>-False]",
    "unit/test_template.py::test_add_generation_prompt[meta-llama-Llama-3.3-70B-Instruct-<|start_header_id|>assistant<|end_header_id|>-True]",
    # slot save/restore round trip on a Gemma 3 (sliding-window) slot, text only
    "unit/test_slot_save.py::test_slot_save_restore_text_only_on_multimodal",
    # logit_bias text keys (tokenized) and repeated ids (summed); "verbose"/--verbose's __verbose;
    # timings_per_token; add_generation_prompt + continue_final_message both true refused
    "unit/test_completion.py::test_logit_bias[False-False]",
    "unit/test_completion.py::test_logit_bias[False-True]",
    "unit/test_completion.py::test_logit_bias[True-False]",
    "unit/test_chat_completion.py::test_verbose_debug",
    "unit/test_chat_completion.py::test_chat_template",
    "unit/test_chat_completion.py::test_chat_completion_with_timings_per_token",
    "unit/test_chat_completion.py::test_chat_template_continue_final_message_mutual_exclusion",
    # llama-server's prefill: a final assistant message continued
    "unit/test_chat_completion.py::test_chat_template_assistant_prefill[Whill-Whill]",
    "unit/test_chat_completion.py::test_chat_template_continue_final_message_vllm_compat",
]


# ------------------------------------------------------------ pytest plugin

def pytest_sessionstart(session):
    import utils  # the suite's utils.py (its directory is the rootdir)
    utils.ServerPreset.load_all = staticmethod(lambda: None)


# ------------------------------------------------------------ runner

def find_suite():
    looked = []
    env = os.environ.get("EL_LLAMA_SERVER_TESTS")
    cands = ([env] if env else []) + [os.path.join(os.path.expanduser("~"), ".cache", "edgellm",
                                                   "llama-server-tests")]
    for c in cands:
        looked.append(c)
        if os.path.isfile(os.path.join(c, "utils.py")) and os.path.isdir(os.path.join(c, "unit")):
            return c, looked
    return None, looked


def find_templates(suite):
    """llama.cpp's models/templates: $EL_LLAMA_TEMPLATES, else the one beside the suite (a llama.cpp
    checkout), else the copy in the fixtures ($EL_FIXTURE_DIR/reference/templates); None if none."""
    cands = [os.environ.get("EL_LLAMA_TEMPLATES"),
             os.path.join(suite, "..", "..", "..", "models", "templates"),
             os.path.join(fixtures.fixture_dir(), "reference", "templates")]
    for c in cands:
        if c and os.path.isdir(c):
            return os.path.abspath(c)
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    suite, looked = find_suite()
    if not suite:
        print("skip: llama.cpp's server test suite not found (looked in: %s); get it with "
              "`bash scripts/fetch-llama-server-tests.sh` (llama-cpp-python's source package from PyPI) "
              "or set EL_LLAMA_SERVER_TESTS to a llama.cpp checkout's tools/server/tests" % ", ".join(looked))
        return SKIP
    missing = []
    for mod in ("pytest", "requests", "wget", "filelock", "openai"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        print("skip: the suite needs the Python packages %s (pip install %s)" % (", ".join(missing), " ".join(missing)))
        return SKIP
    shared = fixtures.fixture_dir()
    ref = fixtures.ref("models", "tiny-llama-F16.gguf")
    if not os.path.isfile(ref):
        fixtures.missing(ref)
    cli = os.environ.get("EL_CLI_PATH") or os.path.join(REPO, "build", "edgellm")
    if not os.access(cli, os.X_OK):
        print("FAIL: no edgellm binary at %s (set EL_CLI_PATH)" % cli)
        return 1

    run_all = argv[:1] == ["--all"]
    ids = argv[1:] if run_all else list(PASSING)
    if not ids:
        print("FAIL: nothing to run")
        return 1
    work = tempfile.mkdtemp(prefix="el-llama-suite-")
    try:
        # the suite's own layout: tools/server/tests, with the chat templates its tests name as
        # ../../../models/templates/NAME.jinja beside it (llama.cpp's models/templates)
        tests = os.path.join(work, "tools", "server", "tests")
        shutil.copytree(suite, tests, ignore=shutil.ignore_patterns("tmp", "__pycache__", ".pytest_cache"))
        templates = find_templates(suite)
        if templates:
            os.makedirs(os.path.join(work, "models"))
            os.symlink(templates, os.path.join(work, "models", "templates"))
        os.makedirs(os.path.join(tests, "tmp"), exist_ok=True)
        env = dict(os.environ)
        env.update({
            "LLAMA_SERVER_BIN_PATH": WRAPPER,
            "EL_CLI_PATH": os.path.abspath(cli),
            "EL_FIXTURE_DIR": os.path.abspath(shared),
            "PORT": str(free_port()),   # the suite's servers listen here (default 8080)
            "PYTHONPATH": HERE + os.pathsep + env.get("PYTHONPATH", ""),
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        env.pop("DEBUG_EXTERNAL", None)
        # a sanitizer build's reports (ASan, LSan at a server's exit, UBSan) go to files checked below:
        # the suite's own assertions never see a server's stderr
        san = os.path.join(work, "san")
        os.makedirs(san)
        for var, name in (("ASAN_OPTIONS", "asan"), ("UBSAN_OPTIONS", "ubsan")):
            env[var] = (env[var] + ":" if env.get(var) else "") + "log_path=" + os.path.join(san, name)
        cmd = [sys.executable, "-m", "pytest", "-p", "test_llama_suite", "-p", "no:cacheprovider",
               "-rfEsp", "-q", "--color=no", "-o", "console_output_style=classic"]
        if run_all:
            cmd += ["-v"]
        cmd += ids
        print("running in %s: %s" % (tests, " ".join(cmd)), flush=True)
        p = subprocess.run(cmd, cwd=tests, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = p.stdout.decode("utf-8", "replace")
        if os.environ.get("EL_SUITE_LOG"):  # the whole pytest output, servers' logs included
            with open(os.environ["EL_SUITE_LOG"], "w", encoding="utf-8") as f:
                f.write(out)
        # the short summary: one "PASSED id" / "FAILED id - why" line per test
        outcome = {}
        for line in out.splitlines():
            m = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (unit/\S.*?)(?: - .*)?$", line)
            if m:
                outcome.setdefault(m.group(2), m.group(1))
        reports = sorted(os.listdir(san))
        for r in reports:
            with open(os.path.join(san, r), encoding="utf-8", errors="replace") as f:
                print("FAIL: sanitizer report %s:\n%s" % (r, f.read()[-6000:]))
        if reports:
            return 1
        if run_all:
            print(out[-20000:] if os.environ.get("EL_SUITE_VERBOSE") else "")
            for tid, o in outcome.items():
                print("%-8s %s" % (o, tid))
            counts = {}
            for o in outcome.values():
                counts[o] = counts.get(o, 0) + 1
            for n, where in re.findall(r"^SKIPPED \[(\d+)\] (\S+)", out, re.M):  # skips name no test id
                print("SKIPPED  %s (%s test%s)" % (where, n, "" if n == "1" else "s"))
                counts["SKIPPED"] = counts.get("SKIPPED", 0) + int(n)
            print("totals: %s" % ", ".join("%s %d" % kv for kv in sorted(counts.items())))
            return 0 if p.returncode == 0 else 1
        bad = [(t, outcome.get(t, "NOT RUN")) for t in ids if outcome.get(t) != "PASSED"]
        if bad:
            print(out[-30000:])
            for t, o in bad:
                print("FAIL: %s: %s" % (t, o))
            print("%d passed, %d failed" % (len(ids) - len(bad), len(bad)))
            return 1
        print("%d passed, 0 failed (llama.cpp's server tests, listed in %s)" % (len(ids), os.path.basename(__file__)))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
