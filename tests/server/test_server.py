#!/usr/bin/env python3
"""End-to-end tests of `edgellm serve` over real HTTP on loopback.

Starts the server binary ($EL_CLI_PATH, default build/edgellm) on the tiny
llama model from $EL_FIXTURE_DIR/reference/models and checks:

  1. the official `openai` client: chat and completions, streamed and not,
     usage in the stream with stream_options.include_usage, /v1/models;
  2. greedy /v1/completions equals `edgellm run --temp 0` for the same prompt;
  3. bad input (malformed JSON, wrong types, limits, 404/405/413, …): the
     status code and the OpenAI error shape {"error":{"message":…}}; the
     server stays healthy afterwards;
  4. --api-key: missing/wrong key → 401, right key → 200;
  5. 100 streams closed by the client after 1–3 chunks: the slots and the
     queue drain, most are counted as cancelled, the server still serves;
  6. --parallel 1 --queue 1 with 4 concurrent long streams: 503 + Retry-After;
  7. SIGINT: every server exits 0 within 10 s and its stderr has no
     sanitizer report.

A plain script with its own runner; the last line is "N passed, N failed".
Exit status: 0 all passed, 1 something failed, 77 skipped (no reference data
or no `openai` package).
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)
SKIP = 77

SANITIZER_MARKERS = ("LeakSanitizer", "ERROR: AddressSanitizer", "runtime error:")


# ---------------------------------------------------------------- setup

def find_cli():
    p = os.environ.get("EL_CLI_PATH") or "build/edgellm"
    if not os.path.isabs(p) and not os.path.exists(p):
        p = os.path.join(REPO, p)
    return os.path.abspath(p)


def require_cli():
    """The server binary's path, or None after printing a failure line."""
    cli = find_cli()
    if not os.access(cli, os.X_OK):
        print("FAIL: no server binary at %s (set EL_CLI_PATH)" % cli)
        print("0 passed, 1 failed")
        return None
    return cli


def shared_dir():
    """The fixture root (tests/fixtures/fixtures.py): reference/ lies under it."""
    return fixtures.fixture_dir()


def require_setup(model_name, need_openai=True):
    """(cli, model path) to test with, or (None, exit status) after a line
    saying why: 77 (skip) without the reference model or the `openai`
    package, 1 without the server binary."""
    model = os.path.join(shared_dir(), "reference", "models", model_name)
    if not os.path.exists(model):
        fixtures.missing(model)  # exit 77, or a failure under CI=true
    if need_openai:
        try:
            import openai  # noqa: F401
        except ImportError:
            print("skip: the `openai` package is not installed (pip install openai)")
            return None, SKIP
    cli = require_cli()
    return (cli, model) if cli else (None, 1)


def read_prompts(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    prompts = text.split("\n---\n")
    if prompts and prompts[-1].endswith("\n"):
        prompts[-1] = prompts[-1][:-1]
    return [p for p in prompts if p]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `edgellm serve` process; stderr is collected in the background."""

    def __init__(self, cli, model, *extra):
        self.port = free_port()
        self.args = [cli, "serve", "-m", model, "--allow-unsigned", "--host", "127.0.0.1", "--port", str(self.port), *extra]
        self.proc = None
        self.lines = []
        self.ready = threading.Event()
        self.exit_code = None

    def spawn(self):
        """Starts the process and its stderr reader; waits for nothing (start()
        waits for /health 200, which a server without a loaded model never gives)."""
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        return self

    def start(self, timeout=120):
        self.spawn()
        deadline = time.time() + timeout
        while not self.ready.wait(0.1):
            if self.proc.poll() is not None:
                self.reader.join(2)
                raise RuntimeError("server exited with %d before listening:\n%s"
                                   % (self.proc.returncode, self.stderr()[-3000:]))
            if time.time() > deadline:
                raise RuntimeError("server did not print 'listening' in %d s:\n%s" % (timeout, self.stderr()[-3000:]))
        # "listening" may come before the model is loaded: wait for /health.
        while True:
            try:
                st, _, _ = request(self.port, "GET", "/health", timeout=5)
                if st == 200:
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %d while loading:\n%s"
                                   % (self.proc.returncode, self.stderr()[-3000:]))
            if time.time() > deadline:
                raise RuntimeError("/health not 200 within %d s" % timeout)
            time.sleep(0.1)

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            m = re.search(r"listening on http://[^\s:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.ready.set()

    def stderr(self):
        return "".join(self.lines)

    def base(self):
        return "http://127.0.0.1:%d" % self.port

    def interrupt(self, timeout=10):
        """SIGINT; returns the exit code (None if it did not exit in time)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        self.reader.join(5)
        self.exit_code = self.proc.returncode
        return self.exit_code

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------- HTTP helpers

def request(port, method, path, body=None, headers=None, timeout=120):
    """Raw HTTP: returns (status, headers dict lower-cased, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = dict(headers or {})
        if body is not None:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            elif isinstance(body, str):
                body = body.encode()
            h.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def post(port, path, body, **kw):
    return request(port, "POST", path, body, **kw)


def expect_error(status_got, body, status_want, what=""):
    assert status_got == status_want, "%s: status %d, want %d; body %r" % (what, status_got, status_want, body[:300])
    try:
        j = json.loads(body)
    except ValueError:
        raise AssertionError("%s: error body is not JSON: %r" % (what, body[:300]))
    assert isinstance(j, dict) and isinstance(j.get("error"), dict), "%s: no error object: %r" % (what, j)
    msg = j["error"].get("message")
    assert isinstance(msg, str) and msg, "%s: error.message missing/empty: %r" % (what, j)
    return j["error"]


def metrics(port):
    st, _, body = request(port, "GET", "/metrics", timeout=10)
    assert st == 200, "/metrics: %d" % st
    out = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def cancelled_count(m):
    return m.get('edgellm_requests_total{state="cancelled"}', 0.0)


def sse_events(body):
    """The `data:` payloads of an SSE body, in order."""
    return [line[5:].strip() for line in body.decode("utf-8").splitlines() if line.startswith("data:")]


# ---------------------------------------------------------------- runner

class Runner:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.names = []

    def run(self, name, fn, *a):
        t0 = time.time()
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001 — every failure is reported, the run goes on
            self.failed += 1
            self.names.append(name)
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            if not isinstance(e, AssertionError):
                detail += "\n" + "".join(traceback.format_tb(e.__traceback__)[-3:])
            print("FAIL %-44s %s" % (name, detail), flush=True)
            return False
        self.passed += 1
        print("ok   %-44s (%.2f s)" % (name, time.time() - t0), flush=True)
        return True

    def finish(self):
        """Prints the summary lines; the script's exit status."""
        if self.failed:
            print("failed: " + "; ".join(self.names))
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


# ---------------------------------------------------------------- 1. openai client

def t_models(ctx):
    models = ctx.client.models.list()
    ids = [m.id for m in models.data]
    assert ids and all(isinstance(i, str) and i for i in ids), ids


def t_chat(ctx):
    r = ctx.client.chat.completions.create(model="tiny", messages=[
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."}], max_tokens=12, temperature=0)
    assert r.object == "chat.completion", r.object
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.message.role == "assistant"
    assert isinstance(c.message.content, str)
    assert c.finish_reason in ("stop", "length"), c.finish_reason
    assert r.usage and r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 12, r.usage
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.system_fingerprint, "no system_fingerprint"
    ctx.chat_text = c.message.content


def t_chat_stream(ctx):
    stream = ctx.client.chat.completions.create(model="tiny", messages=[
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."}], max_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True})
    text, finish, usage, roles, n = "", None, None, [], 0
    for chunk in stream:
        n += 1
        assert chunk.object == "chat.completion.chunk", chunk.object
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            if ch.delta.role:
                roles.append(ch.delta.role)
            if ch.delta.content:
                text += ch.delta.content
            if ch.finish_reason:
                assert finish is None, "two finish_reasons"
                finish = ch.finish_reason
    assert n >= 2, "only %d chunks" % n
    assert finish in ("stop", "length"), finish
    assert roles and roles[0] == "assistant", roles
    assert usage is not None, "no usage chunk with include_usage"
    assert 0 < usage.completion_tokens <= 12 and usage.prompt_tokens > 0, usage
    if getattr(ctx, "chat_text", None) is not None:
        assert text == ctx.chat_text, "greedy stream %r != non-stream %r" % (text, ctx.chat_text)


def t_chat_stream_no_usage(ctx):
    stream = ctx.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=4, stream=True)
    chunks = list(stream)
    assert chunks and all(c.usage is None for c in chunks), "usage sent without include_usage"
    assert any(ch.finish_reason for c in chunks for ch in c.choices)


def t_completion(ctx):
    r = ctx.client.completions.create(model="tiny", prompt="The capital of France is", max_tokens=10,
                                      temperature=0)
    assert r.object == "text_completion", r.object
    assert len(r.choices) == 1 and isinstance(r.choices[0].text, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 10 and r.usage.prompt_tokens > 0
    ctx.completion_text = r.choices[0].text


def t_completion_stream(ctx):
    stream = ctx.client.completions.create(model="tiny", prompt="The capital of France is", max_tokens=10,
                                           temperature=0, stream=True, stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.text or ""
            finish = ch.finish_reason or finish
    assert finish in ("stop", "length"), finish
    assert usage is not None and usage.completion_tokens <= 10
    if getattr(ctx, "completion_text", None) is not None:
        assert text == ctx.completion_text, "stream %r != non-stream %r" % (text, ctx.completion_text)


def t_sse_raw(ctx):
    st, h, body = post(ctx.port, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": True})
    assert st == 200, st
    assert h.get("content-type", "").startswith("text/event-stream"), h.get("content-type")
    ev = sse_events(body)
    assert ev and ev[-1] == "[DONE]", ev[-3:]
    assert ev.count("[DONE]") == 1
    for e in ev[:-1]:
        j = json.loads(e)
        assert j["object"] == "chat.completion.chunk" and j["id"].startswith("chatcmpl"), j
    assert body.decode().endswith("\n\n"), "SSE body does not end with a blank line"


def t_seeded_sampling(ctx):
    body = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 1.0, "seed": 1234}
    a = post(ctx.port, "/v1/completions", body)
    b = post(ctx.port, "/v1/completions", body)
    assert a[0] == 200 and b[0] == 200
    ta, tb = json.loads(a[2])["choices"][0]["text"], json.loads(b[2])["choices"][0]["text"]
    assert ta == tb, "same seed, different text: %r vs %r" % (ta, tb)


def t_concurrent_greedy(ctx):
    """Two slots at once give the same greedy text as one at a time."""
    prompts = ["The capital of France is", "Once upon a time, there was a little robot who"]
    solo = []
    for p in prompts:
        st, _, b = post(ctx.port, "/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0})
        assert st == 200, st
        solo.append(json.loads(b)["choices"][0]["text"])
    res = [None] * 4

    def go(i):
        st, _, b = post(ctx.port, "/v1/completions", {"prompt": prompts[i % 2], "max_tokens": 24, "temperature": 0})
        res[i] = (st, b)
    ts = [threading.Thread(target=go, args=(i,)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    for i, (st, b) in enumerate(res):
        if st == 503:
            continue  # 2 slots + 2 queue: should not happen, but is not what this checks
        assert st == 200, (st, b[:200])
        got = json.loads(b)["choices"][0]["text"]
        assert got == solo[i % 2], "concurrent %r != solo %r" % (got, solo[i % 2])


def t_tokenize_roundtrip(ctx):
    st, _, b = post(ctx.port, "/tokenize", {"content": "Hello world"})
    assert st == 200, (st, b)
    toks = json.loads(b)["tokens"]
    assert toks and all(isinstance(t, int) for t in toks), toks
    st, _, b = post(ctx.port, "/detokenize", {"tokens": toks})
    assert st == 200, (st, b)
    content = json.loads(b)["content"]
    assert content.strip() == "Hello world", repr(content)


def t_chat_content_is_text(ctx):
    # A user who types the EOS text "</s>" (a control token of the tiny llama,
    # whose chat template is llama2) must not get the EOS token into the
    # prompt: the prompt is "[INST] x</s>y [/INST]" tokenized with only the
    # template's markers special, i.e. here without special parsing at all.
    assert "chat template: llama2" in ctx.main_srv.stderr(), ctx.main_srv.stderr()[-2000:]
    rendered = "[INST] x</s>y [/INST]"
    counts = {}
    for parse in (False, True):
        st, _, b = post(ctx.port, "/tokenize", {"content": rendered, "add_special": True, "parse_special": parse})
        assert st == 200, (st, b)
        counts[parse] = len(json.loads(b)["tokens"])
    assert counts[False] > counts[True], counts
    r = ctx.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x</s>y"}],
                                           max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == counts[False], (r.usage.prompt_tokens, counts)


def t_page(ctx):
    st, h, b = request(ctx.port, "GET", "/")
    assert st == 200, st
    assert h.get("content-type", "").startswith("text/html"), h.get("content-type")
    with open(os.path.join(REPO, "src", "server", "ui", "index.html"), "rb") as f:
        assert b == f.read(), "GET / is not src/server/ui/index.html"
    # the doctype as llama-server writes it (llama.cpp's test_no_ui looks for it case-sensitively)
    assert b.startswith(b"<!doctype html>"), b[:40]


def t_metrics_names(ctx):
    st, h, b = request(ctx.port, "GET", "/metrics")
    assert st == 200
    text = b.decode()
    for name in ("edgellm_requests_total", "edgellm_prompt_tokens_total", "edgellm_generated_tokens_total",
                 "edgellm_ttft_seconds_bucket", "edgellm_itl_seconds_bucket", "edgellm_slots_busy",
                 "edgellm_slots_total", "edgellm_queue_depth"):
        assert name in text, "/metrics lacks " + name
    m = metrics(ctx.port)
    assert m.get("edgellm_slots_total") == 2, m.get("edgellm_slots_total")
    assert m.get('edgellm_requests_total{state="done"}', 0) >= 1


# ---------------------------------------------------------------- 2. greedy parity with the CLI

def t_greedy_parity(ctx):
    """Every golden prompt: the server's greedy text equals `edgellm run`'s
    stdout, streamed and not. Where the tokens end mid-character the CLI
    prints raw bytes and JSON cannot carry them: those bytes must come back as
    U+FFFD, one per maximal ill-formed subpart (as Python's 'replace' does)."""
    prompts = read_prompts(os.path.join(ctx.shared, "reference", "goldens", "prompts.txt"))
    exact = 0
    for p in prompts:
        r = subprocess.run([ctx.cli, "run", "-m", ctx.model, "--allow-unsigned", "-p", p, "--no-escape", "-n", "16", "--temp", "0"],
                           capture_output=True, timeout=120)
        assert r.returncode == 0, "edgellm run: %d %s" % (r.returncode, r.stderr[-500:])
        st, _, b = post(ctx.port, "/v1/completions", {"prompt": p, "max_tokens": 16, "temperature": 0})
        assert st == 200, (st, b[:300])
        got = json.loads(b)["choices"][0]["text"]   # strict: the body must be valid UTF-8 JSON
        want = r.stdout.decode("utf-8", "replace")
        assert got == want, "prompt %r: server %r != CLI %r" % (p[:40], got, want)
        exact += want == r.stdout.decode("utf-8", "ignore")
        st, _, b = post(ctx.port, "/v1/completions", {"prompt": p, "max_tokens": 16, "temperature": 0,
                                                       "stream": True})
        assert st == 200, (st, b[:300])
        streamed = "".join(c["text"] for e in sse_events(b)[:-1] for c in json.loads(e)["choices"])
        assert streamed == got, "prompt %r: streamed %r != whole %r" % (p[:40], streamed, got)
    assert exact >= 1, "no prompt with an all-valid UTF-8 continuation"
    print("     (%d prompts; %d with valid UTF-8 throughout, %d with U+FFFD)" % (len(prompts), exact,
                                                                               len(prompts) - exact))


# ---------------------------------------------------------------- 3. bad input

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
USER = [{"role": "user", "content": "hi"}]


def bad_cases():
    big = b'{"messages":[{"role":"user","content":"' + b"a" * (1 << 20) + b'"}]}'
    return [
        ("malformed JSON", "POST", CHAT, b'{"messages": [', 400),
        ("empty body", "POST", CHAT, b"", 400),
        ("body is an array", "POST", CHAT, b"[1, 2]", 400),
        ("messages is a string", "POST", CHAT, {"messages": "hello"}, 400),
        ("max_tokens is a string", "POST", CHAT, {"messages": USER, "max_tokens": "5"}, 400),
        ("temperature is a string", "POST", CHAT, {"messages": USER, "temperature": "hot"}, 400),
        ("temperature out of range", "POST", CHAT, {"messages": USER, "temperature": 7}, 400),
        ("top_p zero", "POST", CHAT, {"messages": USER, "top_p": 0}, 400),
        ("stream is a string", "POST", CHAT, {"messages": USER, "stream": "yes"}, 400),
        ("missing messages", "POST", CHAT, {"max_tokens": 5}, 400),
        ("empty messages", "POST", CHAT, {"messages": []}, 400),
        ("message not an object", "POST", CHAT, {"messages": ["hi"]}, 400),
        ("unknown role", "POST", CHAT, {"messages": [{"role": "wizard", "content": "hi"}]}, 400),
        ("missing role", "POST", CHAT, {"messages": [{"content": "hi"}]}, 400),
        ("content is a number", "POST", CHAT, {"messages": [{"role": "user", "content": 5}]}, 400),
        ("content is null", "POST", CHAT, {"messages": [{"role": "user", "content": None}]}, 400),
        ("invalid UTF-8 bytes", "POST", CHAT, b'{"messages":[{"role":"user","content":"a\xff\xfeb"}]}', 400),
        ("max_tokens negative", "POST", CHAT, {"messages": USER, "max_tokens": -1}, 400),
        ("max_tokens zero", "POST", CHAT, {"messages": USER, "max_tokens": 0}, 400),
        ("max_tokens absurd", "POST", CHAT, {"messages": USER, "max_tokens": 10 ** 12}, 400),
        ("n = 2", "POST", CHAT, {"messages": USER, "n": 2}, 400),
        ("too many stop strings", "POST", CHAT, {"messages": USER, "stop": ["x%d" % i for i in range(9)]}, 400),
        ("stop is a number", "POST", CHAT, {"messages": USER, "stop": 3}, 400),
        ("completion without prompt", "POST", COMP, {"max_tokens": 5}, 400),
        ("completion prompt is a number", "POST", COMP, {"prompt": 42}, 400),
        ("body over 1 MiB", "POST", CHAT, big, 413),
        ("unknown endpoint", "POST", "/v1/nope", {"messages": USER}, 404),
        ("unknown GET path", "GET", "/v2/models", None, 404),
        ("GET on chat completions", "GET", CHAT, None, 405),
        ("DELETE on completions", "DELETE", COMP, None, 405),
        ("POST on /v1/models", "POST", "/v1/models", {}, 405),
        ("detokenize bad token id", "POST", "/detokenize", {"tokens": [1, 99999999]}, 400),
        ("detokenize negative id", "POST", "/detokenize", {"tokens": [-5]}, 400),
        ("detokenize tokens not a list", "POST", "/detokenize", {"tokens": "1 2 3"}, 400),
        ("tokenize content wrong type", "POST", "/tokenize", {"content": 5}, 400),
        ("tokenize malformed JSON", "POST", "/tokenize", b"{content", 400),
    ]


def make_bad_case(method, path, body, want, name):
    def t(ctx):
        st, h, b = request(ctx.port, method, path, body)
        err = expect_error(st, b, want, name)
        if want == 405:
            assert "allow" in h, "405 without an Allow header"
        return err
    return t


def t_context_overflow(ctx):
    """prompt + max_tokens > context (256): 400 that names the numbers."""
    prompt = "The capital of France is"
    st, _, b = post(ctx.port, "/tokenize", {"content": prompt})
    assert st == 200
    max_tokens = 250
    st, _, b = post(ctx.port, COMP, {"prompt": prompt, "max_tokens": max_tokens})
    err = expect_error(st, b, 400, "context overflow")
    msg = err["message"]
    assert "256" in msg and str(max_tokens) in msg, "message lacks the numbers: %r" % msg
    # And the chat endpoint, with a long conversation and no max_tokens.
    long = [{"role": "user", "content": "word " * 400}]
    st, _, b = post(ctx.port, CHAT, {"messages": long})
    err = expect_error(st, b, 400, "chat prompt over context")
    assert "256" in err["message"], err["message"]


def t_health_after(ctx):
    st, _, b = request(ctx.port, "GET", "/health")
    assert st == 200, (st, b)
    st, _, b = post(ctx.port, COMP, {"prompt": "Hello", "max_tokens": 3})
    assert st == 200, (st, b[:300])


def t_openai_client_error(ctx):
    import openai
    try:
        ctx.client.chat.completions.create(model="tiny", messages=[{"role": "wizard", "content": "x"}])
    except openai.BadRequestError as e:
        assert e.status_code == 400
        return
    raise AssertionError("no BadRequestError")


# ---------------------------------------------------------------- 4. API key

def t_api_key(ctx):
    srv = ctx.key_server
    body = {"messages": USER, "max_tokens": 2}
    st, _, b = post(srv.port, CHAT, body)
    err = expect_error(st, b, 401, "no key")
    st, _, b = post(srv.port, CHAT, body, headers={"Authorization": "Bearer wrong"})
    expect_error(st, b, 401, "wrong key")
    st, _, b = post(srv.port, CHAT, body, headers={"Authorization": "Bearer secretX"})
    expect_error(st, b, 401, "key with a suffix")
    st, _, b = post(srv.port, CHAT, body, headers={"Authorization": "secret"})
    expect_error(st, b, 401, "key without Bearer")
    st, _, b = request(srv.port, "GET", "/v1/models")
    expect_error(st, b, 401, "models without key")
    st, _, b = post(srv.port, CHAT, body, headers={"Authorization": "Bearer secret"})
    assert st == 200, (st, b[:300])
    st, _, b = request(srv.port, "GET", "/v1/models", headers={"Authorization": "Bearer secret"})
    assert st == 200, (st, b[:300])
    import openai
    good = openai.OpenAI(base_url=srv.base() + "/v1", api_key="secret", max_retries=0)
    assert good.models.list().data
    bad = openai.OpenAI(base_url=srv.base() + "/v1", api_key="nope", max_retries=0)
    try:
        bad.models.list()
    except openai.AuthenticationError:
        pass
    else:
        raise AssertionError("wrong key accepted by the openai client")


# ---------------------------------------------------------------- 5. disconnects

def stream_and_hang_up(port, n_chunks, rst):
    """Start a long streaming chat, read n_chunks `data:` events, close.
    Returns the status code (0 when the connection failed)."""
    body = json.dumps({"messages": [{"role": "user", "content": "Tell me a long story."}],
                       "max_tokens": 200, "stream": True, "temperature": 0.8}).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(req)
        buf = b""
        status = 0
        while True:
            data = s.recv(4096)
            if not data:
                break
            buf += data
            if not status and b"\r\n" in buf:
                status = int(buf.split(b" ", 2)[1])
                if status != 200:
                    break
            if buf.count(b"data: ") >= n_chunks:
                break
        return status
    finally:
        if rst:  # abortive close: the server sees ECONNRESET, not just EOF
            import struct
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def t_disconnects(ctx):
    port = ctx.port
    before = metrics(port)
    statuses = []
    lock = threading.Lock()

    def worker(k):
        for i in range(50):
            n = 1 + (i + k) % 3
            st = stream_and_hang_up(port, n, rst=(i % 4 == 3))
            with lock:
                statuses.append(st)
            if st == 503:
                time.sleep(0.05)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(statuses) == 100
    ok = statuses.count(200)
    other = [s for s in statuses if s not in (200, 503)]
    assert not other, "unexpected statuses: %r" % other[:10]
    deadline = time.time() + 30
    while True:
        m = metrics(port)
        if m.get("edgellm_slots_busy") == 0 and m.get("edgellm_queue_depth") == 0:
            break
        if time.time() > deadline:
            raise AssertionError("slots/queue did not drain in 30 s: busy=%s queue=%s"
                                 % (m.get("edgellm_slots_busy"), m.get("edgellm_queue_depth")))
        time.sleep(0.2)
    cancelled = cancelled_count(m) - cancelled_count(before)
    print("     (%d streamed, %d rejected with 503, %d counted as cancelled)" % (ok, statuses.count(503), cancelled))
    assert ok >= 50, "only %d of 100 streams were accepted" % ok
    assert cancelled >= 0.6 * ok, "only %d of %d hung-up streams counted as cancelled" % (cancelled, ok)
    st, _, b = post(port, COMP, {"prompt": "Hello", "max_tokens": 4})
    assert st == 200, (st, b[:300])


# ---------------------------------------------------------------- 6. queue full

def t_queue_full(ctx):
    srv = ctx.queue_server
    res = []
    lock = threading.Lock()
    barrier = threading.Barrier(5)

    def go():
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        body = json.dumps({"messages": [{"role": "user", "content": "Tell me a long story."}],
                           "max_tokens": 200, "stream": True})
        barrier.wait()
        try:
            conn.request("POST", CHAT, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            with lock:
                res.append((r.status, r.getheader("Retry-After"), data))
        finally:
            conn.close()
    ts = [threading.Thread(target=go) for _ in range(5)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    codes = sorted(r[0] for r in res)
    assert all(c in (200, 503) for c in codes), codes
    rejected = [r for r in res if r[0] == 503]
    assert rejected, "no 503 with 5 concurrent streams on 1 slot + queue 1: %r" % codes
    assert codes.count(200) >= 1, codes
    for st, retry, data in rejected:
        assert retry is not None and retry.strip().isdigit(), "503 without a numeric Retry-After: %r" % retry
        expect_error(st, data, 503, "queue full")
    for st, _, data in res:
        if st == 200:
            assert sse_events(data)[-1] == "[DONE]"
    m = metrics(srv.port)
    assert m.get('edgellm_requests_total{state="rejected"}', 0) >= len(rejected), m


# ---------------------------------------------------------------- 7. shutdown

def make_shutdown(get_srv):
    def t(ctx):
        srv = get_srv(ctx)
        assert srv is not None, "server never started"
        t0 = time.time()
        rc = srv.interrupt(10)
        if rc is None:
            srv.kill()
            raise AssertionError("did not exit within 10 s of SIGINT")
        assert rc == 0, "exit status %d after SIGINT; stderr tail:\n%s" % (rc, srv.stderr()[-2000:])
        err = srv.stderr()
        for marker in SANITIZER_MARKERS:
            assert marker not in err, "stderr contains %r:\n%s" % (marker, err[err.find(marker) - 200:][:3000])
        print("     (exited 0 in %.2f s)" % (time.time() - t0))
    return t


# ---------------------------------------------------------------- main

class Ctx:
    pass


def main():
    cli, model = require_setup("tiny-llama-F16.gguf")
    if cli is None:
        return model
    import openai
    shared = shared_dir()

    ctx = Ctx()
    ctx.shared, ctx.model, ctx.cli = shared, model, cli
    ctx.key_server = ctx.queue_server = None
    R = Runner()
    servers = []
    try:
        main_srv = Server(cli, model, "--parallel", "2", "-c", "256", "--queue", "2")
        servers.append(main_srv)
        if not R.run("start server (--parallel 2 -c 256 --queue 2)", main_srv.start):
            print("%d passed, %d failed" % (R.passed, R.failed + 1))
            return 1
        ctx.port = main_srv.port
        ctx.main_srv = main_srv
        ctx.client = openai.OpenAI(base_url=main_srv.base() + "/v1", api_key="x", max_retries=0, timeout=120)

        # 1. the openai client and basic behaviour
        for name, fn in [("models list", t_models), ("chat", t_chat), ("chat stream + usage", t_chat_stream),
                         ("chat stream without usage", t_chat_stream_no_usage), ("completion", t_completion),
                         ("completion stream", t_completion_stream), ("raw SSE framing", t_sse_raw),
                         ("seeded sampling repeats", t_seeded_sampling),
                         ("concurrent greedy == solo", t_concurrent_greedy),
                         ("tokenize/detokenize round trip", t_tokenize_roundtrip),
                         ("chat content is text, not control tokens", t_chat_content_is_text), ("GET / chat page", t_page),
                         ("metrics names", t_metrics_names)]:
            R.run(name, fn, ctx)
        # 2. parity with the CLI
        R.run("greedy completion == edgellm run", t_greedy_parity, ctx)
        # 3. bad input
        cases = bad_cases()
        for name, method, path, body, want in cases:
            R.run("bad input: " + name, make_bad_case(method, path, body, want, name), ctx)
        R.run("bad input: prompt+max_tokens over context", t_context_overflow, ctx)
        R.run("openai client raises BadRequestError", t_openai_client_error, ctx)
        R.run("healthy after %d bad inputs" % (len(cases) + 1), t_health_after, ctx)
        # 5. disconnects
        R.run("100 streams hung up early", t_disconnects, ctx)

        # 4. API key
        ctx.key_server = Server(cli, model, "--parallel", "1", "-c", "256", "--api-key", "secret")
        servers.append(ctx.key_server)
        if R.run("start server with --api-key", ctx.key_server.start):
            R.run("api key: 401 / 401 / 200", t_api_key, ctx)
        # 6. queue full
        ctx.queue_server = Server(cli, model, "--parallel", "1", "-c", "256", "--queue", "1")
        servers.append(ctx.queue_server)
        if R.run("start server --parallel 1 --queue 1", ctx.queue_server.start):
            R.run("queue full: 503 + Retry-After", t_queue_full, ctx)

        # 7. clean shutdown of all three
        R.run("SIGINT main server: exit 0, no sanitizer report", make_shutdown(lambda c: main_srv), ctx)
        if ctx.key_server.proc:
            R.run("SIGINT api-key server", make_shutdown(lambda c: c.key_server), ctx)
        if ctx.queue_server.proc:
            R.run("SIGINT queue server", make_shutdown(lambda c: c.queue_server), ctx)
    finally:
        for s in servers:
            s.kill()
    return R.finish()


if __name__ == "__main__":
    sys.exit(main())
