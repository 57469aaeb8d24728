"""traffic.py — the soak's request kinds: one function per kind, each sending
one real request to `edgellm serve` on loopback and classifying its answer.

Contract:
  - every kind is fn(port, rng, seq) -> Outcome; it never raises for what the
    server did (a connection error, a timeout, a bad body are outcomes too),
    only for a bug in this file;
  - Outcome.cls is one of
      "ok"        a 2xx with a well-formed body (JSON parsed; a stream ends in
                  `data: [DONE]`; the kind's own check passed, see below),
      "declared"  a refusal the API documents: 503 with a typed error
                  (queue full, route declined: thermal_hot, cloud down...),
                  409 slot_busy, or a typed cloud_error (502/504) while the
                  fake cloud is down or cut,
      "left"      the client hung up mid-stream on purpose, after the server
                  had answered 200 (cancel, disconnect),
      "fail"      anything else: no answer (reset, timeout), an undeclared
                  5xx, an unexpected 4xx, a malformed body, a failed check;
    Outcome.status is the HTTP status (0 when none came), .detail says why
    for anything not "ok", .extra holds counters (cache hits, tool calls);
  - a kind may wait (slot: for an idle slot) but never retries a request;
  - kinds' checks: tools: a tool call whose arguments parse as JSON when the
    reply ends with finish_reason "tool_calls"; json_schema: content parses
    as the schema's object when finish_reason is "stop"; embeddings: one
    finite vector per input, all of one width; cache: a repeat of a prompt
    prefix reuses cached tokens (counted, not required: another request may
    have taken the slot); slot: save then restore the same file;
  - nothing here starts processes or threads: soak.py does.
"""
import http.client
import json
import math
import socket
import struct
import time

TIMEOUT_S = 300.0  # one request's limit; past it the request is a "fail" (a hang)

SYSTEM = ("You are a concise assistant running on a small device. Answer in one short sentence. "
          "Never use lists. Keep every answer under twenty words. ")
TOPICS = ["the sea", "a red bicycle", "rain in April", "a lighthouse", "bread", "the moon", "a small robot",
          "mountains", "a library", "coffee", "a train at night", "snow"]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                            "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
CACHE_PREFIX = ("Here is a long note kept as context for several questions. " * 12)


class Outcome:
    def __init__(self, cls, status=0, detail="", **extra):
        self.cls, self.status, self.detail, self.extra = cls, status, detail, extra


def _request(port, method, path, body=None, timeout=TIMEOUT_S):
    """(status, headers, body bytes) or raises OSError / http.client errors."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _error_of(b):
    try:
        j = json.loads(b)
    except ValueError:
        return None
    e = j.get("error") if isinstance(j, dict) else None
    return e if isinstance(e, dict) and isinstance(e.get("message"), str) and e["message"] else None


def classify_refusal(st, h, b, cloud_may_fail=False):
    """The outcome of a non-2xx answer: declared or fail."""
    e = _error_of(b)
    if e is None:
        return Outcome("fail", st, "status %d without an error object: %r" % (st, b[:200]))
    code = "%s/%s" % (e.get("type"), e.get("code"))
    if st == 503 and h.get("retry-after"):
        return Outcome("declared", st, code)
    if st == 409 and e.get("code") == "slot_busy":
        return Outcome("declared", st, code)
    if cloud_may_fail and st in (502, 504) and e.get("type") == "cloud_error":
        return Outcome("declared", st, code)
    return Outcome("fail", st, "%s: %s" % (code, e["message"][:200]))


def _call(port, method, path, body, check, cloud_may_fail=False):
    try:
        st, h, b = _request(port, method, path, body)
    except (OSError, http.client.HTTPException) as ex:
        return Outcome("fail", 0, "no answer: %s: %s" % (type(ex).__name__, ex))
    if st // 100 != 2:
        return classify_refusal(st, h, b, cloud_may_fail)
    try:
        extra = check(b, h) or {}
    except (ValueError, KeyError, TypeError, IndexError, AssertionError) as ex:
        return Outcome("fail", st, "bad body (%s: %s): %r" % (type(ex).__name__, ex, b[:200]))
    return Outcome("ok", st, **extra)


def _stream_check(b, h):
    assert h.get("content-type", "").startswith("text/event-stream"), h
    events = [ln[5:].strip() for ln in b.decode("utf-8").splitlines() if ln.startswith("data:")]
    assert events and events[-1] == "[DONE]", "stream without [DONE]: %r" % events[-2:]
    objs = [json.loads(e) for e in events[:-1]]
    errs = [o["error"] for o in objs if "error" in o]
    assert not errs or all(isinstance(e, dict) and e.get("message") for e in errs), errs
    return {"stream_error": errs[0].get("code")} if errs else {}


def _chat_body(rng, seq, **kw):
    topic = TOPICS[rng.randrange(len(TOPICS))]
    body = {"messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": "Say something about %s. (%d)" % (topic, seq)}],
            "max_tokens": rng.choice((8, 16, 24)), "temperature": 0.7, "seed": seq}
    body.update(kw)
    return body


def _chat_check(b, h):
    j = json.loads(b)
    assert isinstance(j["choices"][0]["message"]["content"], str), j
    return {}


# ---------------------------------------------------------------- the kinds

def chat(port, rng, seq):
    return _call(port, "POST", "/v1/chat/completions", _chat_body(rng, seq), _chat_check)


def chat_stream(port, rng, seq):
    body = _chat_body(rng, seq, stream=True, stream_options={"include_usage": True})
    return _call(port, "POST", "/v1/chat/completions", body, _stream_check)


def completion(port, rng, seq):
    body = {"prompt": "A short story about %s:" % TOPICS[seq % len(TOPICS)], "max_tokens": rng.choice((8, 16, 24)),
            "temperature": 0.8, "seed": seq}
    return _call(port, "POST", "/v1/completions", body,
                 lambda b, h: {} if isinstance(json.loads(b)["choices"][0]["text"], str) else 1 / 0)


def completion_stream(port, rng, seq):
    body = {"prompt": "Three words about %s:" % TOPICS[seq % len(TOPICS)], "max_tokens": 16, "temperature": 0.8,
            "seed": seq, "stream": True}
    return _call(port, "POST", "/v1/completions", body, _stream_check)


def _leave(port, rng, seq, reset):
    """A long stream left after 1-3 events; reset: abortively (RST)."""
    body = json.dumps(_chat_body(rng, seq, stream=True, max_tokens=200)).encode()
    head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (port, len(body))).encode()
    n = rng.randint(1, 3)
    got = b""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    except OSError as ex:
        return Outcome("fail", 0, "no connection: %s" % ex)
    try:
        s.sendall(head + body)
        while got.count(b"data:") < n:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError as ex:
        return Outcome("fail", 0, "no answer: %s" % ex)
    finally:
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    line = got.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    st = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if st == 200:
        # the server may have finished first (EOS): then the whole stream came
        return Outcome("left" if got.count(b"data:") >= n or b"[DONE]" not in got else "ok", st)
    if st == 0:
        return Outcome("fail", 0, "no status line: %r" % got[:200])
    hdrs, _, bb = got.partition(b"\r\n\r\n")
    h = {}
    for ln in hdrs.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        h[k.decode().strip().lower()] = v.decode().strip()
    if "content-length" in h:  # the whole refusal body came before the server closed
        return classify_refusal(st, h, bb[:int(h["content-length"])])
    return Outcome("fail", st, "refusal without a length: %r" % got[:200])


def cancel(port, rng, seq):
    return _leave(port, rng, seq, reset=False)


def disconnect(port, rng, seq):
    return _leave(port, rng, seq, reset=True)


def tools(port, rng, seq):
    body = {"messages": [{"role": "user", "content": "What is the weather in %s?" % rng.choice(("Paris", "Oslo", "Lima"))}],
            "tools": [WEATHER], "tool_choice": "required", "max_tokens": 64, "temperature": 0.5, "seed": seq}

    def check(b, h):
        c = json.loads(b)["choices"][0]
        if c["finish_reason"] == "tool_calls":
            args = json.loads(c["message"]["tool_calls"][0]["function"]["arguments"])
            assert isinstance(args, dict), args
            return {"tool_call": 1}
        return {}
    return _call(port, "POST", "/v1/chat/completions", body, check)


def json_schema(port, rng, seq):
    body = {"messages": [{"role": "user", "content": "Invent a person."}], "max_tokens": 48, "temperature": 0.7,
            "seed": seq, "response_format": {"type": "json_schema",
                                             "json_schema": {"name": "person", "strict": True, "schema": PERSON}}}

    def check(b, h):
        c = json.loads(b)["choices"][0]
        if c["finish_reason"] == "stop":
            obj = json.loads(c["message"]["content"])
            assert set(obj) == {"name", "age"} and isinstance(obj["age"], int), obj
            return {"schema_object": 1}
        return {}
    return _call(port, "POST", "/v1/chat/completions", body, check)


def embeddings(port, rng, seq):
    inputs = [TOPICS[(seq + i) % len(TOPICS)] for i in range(rng.randint(1, 3))]

    def check(b, h):
        d = json.loads(b)["data"]
        assert len(d) == len(inputs), d
        widths = {len(x["embedding"]) for x in d}
        assert len(widths) == 1 and widths.pop() > 0, widths
        assert all(math.isfinite(v) for x in d for v in x["embedding"]), "non-finite"
        return {}
    return _call(port, "POST", "/v1/embeddings", {"input": inputs, "encoding_format": "float"}, check)


def lora(port, rng, seq):
    """A chat with one of the three adapters, or two, at scale 1 (the budget
    holds two: LRU evictions, and a refusal while running requests hold it):
    its fingerprint says "+lora-"."""
    ids = rng.choice(([0], [1], [2], [0, 2]))
    body = _chat_body(rng, seq, lora=[{"id": i, "scale": 1.0} for i in ids])

    def check(b, h):
        j = json.loads(b)
        assert isinstance(j["choices"][0]["message"]["content"], str), j
        assert "+lora-" in j["system_fingerprint"], j["system_fingerprint"]
        return {}
    return _call(port, "POST", "/v1/chat/completions", body, check)


def lora_swap(port, rng, seq):
    """The defaults every request without "lora" runs with: none, one or two adapters."""
    body = [{"id": 0, "scale": rng.choice((0.0, 0.0, 0.5))}, {"id": 1, "scale": rng.choice((0.0, 1.0))}]
    return _call(port, "POST", "/lora-adapters", body, lambda b, h: {} if isinstance(json.loads(b), (dict, list)) else 1 / 0)


def slot(port, rng, seq):
    """Save an idle slot (GET /slots; up to 20 looks 0.25 s apart, as a client
    that waits for one) to one of four files, then restore it; 409 slot_busy
    when another request took it in between."""
    name = "soak-%d.bin" % (seq % 4)
    sid = rng.randrange(2)
    for _ in range(20):
        try:
            st, _, b = _request(port, "GET", "/slots")
            idle = [x["id"] for x in json.loads(b) if not x["is_processing"]] if st == 200 else []
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
            idle = []
        if idle:
            sid = rng.choice(idle)
            break
        time.sleep(0.25)
    o = _call(port, "POST", "/slots/%d?action=save" % sid, {"filename": name},
              lambda b, h: {} if json.loads(b)["filename"] == name else 1 / 0)
    if o.cls != "ok":
        return o
    return _call(port, "POST", "/slots/%d?action=restore" % sid, {"filename": name},
                 lambda b, h: {"slot_restored": 1} if json.loads(b)["filename"] == name else 1 / 0)


def cache(port, rng, seq):
    body = {"prompt": CACHE_PREFIX + "Question %d: what is the note about?" % (seq % 5), "n_predict": 4,
            "temperature": 0, "cache_prompt": True}

    def check(b, h):
        j = json.loads(b)
        return {"cache_hit": 1} if j["timings"]["cache_n"] > 0 else {}
    return _call(port, "POST", "/completion", body, check)


def cloud(port, rng, seq):
    """A public request with a deadline no local run meets: the router sends it
    to the (fake) cloud, which soak.py takes up and down."""
    body = _chat_body(rng, seq, edgellm={"data_class": "public", "deadline_ms": 0.01}, stream=rng.random() < 0.3)

    def check(b, h):
        if b.lstrip().startswith(b"{"):
            j = json.loads(b)
            return {"route_" + j["edgellm"]["route"]["source"]: 1}
        return _stream_check(b, h)
    return _call(port, "POST", "/v1/chat/completions", body, check, cloud_may_fail=True)


def health(port, rng, seq):
    """GET /health: 200 (or 503 no_local_model, which must not happen here)."""
    return _call(port, "GET", "/health", None, lambda b, h: {} if "status" in json.loads(b) else 1 / 0)


# name -> (function, weight): the mix each client draws from
KINDS = {
    "chat": (chat, 14), "chat_stream": (chat_stream, 12), "completion": (completion, 8),
    "completion_stream": (completion_stream, 8), "cancel": (cancel, 5), "disconnect": (disconnect, 4),
    "tools": (tools, 5), "json_schema": (json_schema, 5), "embeddings": (embeddings, 8), "lora": (lora, 6),
    "lora_swap": (lora_swap, 2), "slot": (slot, 3), "cache": (cache, 8), "cloud": (cloud, 8), "health": (health, 4),
}
