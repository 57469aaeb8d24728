#!/usr/bin/env python3
"""Content-free telemetry, the routing audit log, `route explain` and thermal
thread derating, end to end (issue 18, items 2-4).

Starts real processes on loopback: "the cloud" is an `edgellm serve` on the
tiny llama reference model; "the device" is an `edgellm serve --policy
--cloud-url --thermal-source --telemetry-dir --telemetry-max-bytes
--telemetry-keep --otlp-url --audit-log -t 2`; the OTLP collector is a
Python http.server on loopback that records every byte it receives.

Checks:
  - the leak test: requests carrying unique marker strings — in user and
    system messages, prompts, stop words, tool names, the "model" field,
    the "user" field, unknown X-Data-Class values (well-formed and not),
    unknown "edgellm" keys, other headers, the URL query — go through every
    route (local, cloud, declined, refused before a decision, refused by the
    API parser), streamed and not, and through cancellations (a client that
    leaves mid-stream, locally and in the cloud); then every byte under the
    telemetry dir, the audit log (and its rotated files) and every byte the
    OTLP receiver got is searched for each marker and for its first 8
    characters: none may appear;
  - the events are there: route decisions for every route, request ends
    (local and cloud, with gen_ai.* names), refusals, cancellations,
    thermal transitions; the spool rotated (several files, none over the
    cap); the OTLP receiver got OTLP/HTTP JSON logs (resourceLogs ->
    scopeLogs -> logRecords with gen_ai.* attributes), as many records as
    the spool has lines;
  - every audit line replays to the same decision (`edgellm route explain
    --audit-log F --line N`, exit 0, "same"); an edited line (decision
    changed) says "differs" with exit 3; `route explain REQUEST.json` with a
    hot device state says why a private request is declined and a public
    one goes to the cloud;
  - thermal derating of threads: normal -> /health threads_active 2,
    derated -> 1, hot -> 1, back -> 2 (and /metrics edgellm_threads_active),
    generation works while derated, and the thermal_transition events
    record the thread counts.

Exit status: 0 all passed, 1 something failed, 77 skipped (no reference model).
"""
import http.server
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import (assert_clean_stop, count_unclean_stop, metrics, post, require_setup,  # noqa: E402
                     route_ctx, route_of, route_policy, Runner, sanitizer_report, serve_in_thread, Server, set_temp,
                     sse_events, stream_and_leave, wait_no_model)

POLICY = route_policy("tel-2026-12-02", 10)
SPOOL_CAP = 4096

MARKERS = []


def marker():
    """A unique lower-case marker (also a well-formed class name)."""
    m = "zqx" + secrets.token_hex(10)
    MARKERS.append(m)
    return m


# ---------------------------------------------------------------- the OTLP receiver

class Otlp(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    got = []
    lock = threading.Lock()

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n)
        raw_headers = str(self.headers).encode()
        with Otlp.lock:
            Otlp.got.append((self.path, raw_headers, data))
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


# ---------------------------------------------------------------- helpers

def chat_body(extra_msgs=(), **kw):
    m1, m2 = marker(), marker()
    body = {"messages": [{"role": "system", "content": "You are %s." % m1}, *extra_msgs,
                         {"role": "user", "content": "Tell me about %s and the sea." % m2}],
            "max_tokens": 6, "temperature": 0}
    body.update(kw)
    return body


def spool_files(ctx):
    return sorted(os.path.join(ctx.tel_dir, f) for f in os.listdir(ctx.tel_dir))


def audit_files(ctx):
    d = os.path.dirname(ctx.audit)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("audit"))


def events(ctx):
    """Every JSONL event in the spool, oldest file first."""
    files = spool_files(ctx)
    # telemetry.N.jsonl are older the larger N; telemetry.jsonl is the newest
    def age(p):
        m = re.search(r"telemetry\.(\d+)\.jsonl$", p)
        return -int(m.group(1)) if m else 0
    out = []
    for p in sorted(files, key=age):
        with open(p) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


# ---------------------------------------------------------------- traffic through every route

def t_traffic(ctx):
    port = ctx.edge.port
    # local, not streamed: system + user markers, stop word, model and user fields, extra headers, URL query
    q1, q2 = marker(), marker()
    st, h, b = post(port, "/v1/chat/completions?%s=%s" % (q1, q2),
                    chat_body(stop=[marker()], model=marker(), user=marker(), edgellm={"data_class": "public"}),
                    headers={"X-Custom": marker(), "User-Agent": marker()})
    assert st == 200 and route_of(b)["source"] == "local", (st, b[:300])
    # local, streamed (default class)
    st, h, b = post(port, "/v1/chat/completions", chat_body(stream=True, stop=marker()))
    assert st == 200 and sse_events(b)[-1] == "[DONE]", b[:300]
    # completions: prompt marker, streamed and not
    for stream in (False, True):
        st, _, b = post(port, "/v1/completions", {"prompt": "Once %s upon" % marker(), "max_tokens": 5,
                                                    "temperature": 0, "stream": stream, "stop": [marker()]})
        assert st == 200, b[:300]
    # llama-server's /completion
    st, _, b = post(port, "/completion", {"prompt": "Hello %s" % marker(), "n_predict": 4, "stop": [marker()]})
    assert st == 200, b[:300]
    # unknown classes: header (well-formed and malformed), body
    st, _, b = post(port, "/v1/chat/completions", chat_body(), headers={"X-Data-Class": marker()})
    assert st == 400 and route_of(b)["reason"] == "unknown_data_class", b[:300]
    st, _, b = post(port, "/v1/chat/completions", chat_body(stream=True), headers={"X-Data-Class": "Bad %s!" % marker()})
    assert st == 400, b[:300]
    st, _, b = post(port, "/v1/chat/completions", chat_body(edgellm={"data_class": marker(), "consent": True}))
    assert st == 400 and route_of(b)["source"] == "declined", b[:300]
    ctx.echoed = b  # the client's own answer names the class it sent: the search below must find such a marker
    # refused before a decision: an unknown "edgellm" key, a class in both places that differ
    st, _, b = post(port, "/v1/chat/completions", chat_body(edgellm={marker(): 1}))
    assert st == 400, b[:300]
    st, _, b = post(port, "/v1/chat/completions", chat_body(edgellm={"data_class": marker()}),
                    headers={"X-Data-Class": marker()})
    assert st == 400, b[:300]
    # a tool definition (a field the server does not act on): a tool name marker
    st, _, b = post(port, "/v1/chat/completions",
                    chat_body(tools=[{"type": "function", "function": {"name": marker(), "parameters": {}}}]))
    assert st in (200, 400), b[:300]
    # refused by the API parser: a bad temperature next to the markers
    st, _, b = post(port, "/v1/chat/completions", chat_body(temperature="hot %s" % marker()))
    assert st == 400, b[:300]
    # deadline below any estimate: public goes to the cloud, not streamed and streamed
    st, h, b = post(port, "/v1/chat/completions", chat_body(edgellm={"data_class": "public", "deadline_ms": 0.001}))
    assert st == 200 and route_of(b)["source"] == "cloud", b[:300]
    st, h, b = post(port, "/v1/chat/completions",
                    chat_body(stream=True, edgellm={"data_class": "ask", "consent": True, "deadline_ms": 0.001}))
    assert st == 200 and "source=cloud" in h.get("x-edgellm-route", ""), (h, b[:300])
    # cancellations: a client that leaves mid-stream, locally and in the cloud
    stream_and_leave(port, "/v1/chat/completions", chat_body(stream=True, max_tokens=200, ignore_eos=True))
    stream_and_leave(port, "/v1/chat/completions",
                     chat_body(stream=True, max_tokens=200, edgellm={"data_class": "public", "deadline_ms": 0.001}))
    # hot: public to the cloud, private and unconsented ask declined, streamed and not
    set_temp(ctx, "90000\n", "hot")
    st, _, b = post(port, "/v1/chat/completions", chat_body(edgellm={"data_class": "public"}))
    assert st == 200 and route_of(b)["reason"] == "thermal_hot" and route_of(b)["source"] == "cloud", b[:300]
    st, _, b = post(port, "/v1/completions", {"prompt": "Hot %s" % marker(), "max_tokens": 4, "stream": True,
                                                "edgellm": {"data_class": "public"}})
    assert st == 200, b[:300]
    for body in (chat_body(edgellm={"data_class": "private"}), chat_body(stream=True),
                 chat_body(edgellm={"data_class": "ask"})):
        st, _, b = post(port, "/v1/chat/completions", body)
        assert st == 503 and route_of(b)["source"] == "declined", (st, b[:300])
    set_temp(ctx, "40000\n", "normal")
    # wait until the cancelled requests have ended (their events are written at the end)
    deadline = time.time() + 30
    while time.time() < deadline:
        m = metrics(port)
        if m.get('edgellm_requests_total{state="cancelled"}', 0) >= 2:
            break
        time.sleep(0.1)


# ---------------------------------------------------------------- thermal derating of threads

def t_thread_derating(ctx):
    port = ctx.edge.port
    th = set_temp(ctx, "40000\n", "normal")
    assert th["threads_total"] == 2 and th["threads_active"] == 2, th
    th = set_temp(ctx, "75000\n", "derated")
    assert th["threads_active"] == 1, th
    assert metrics(port)["edgellm_threads_active"] == 1
    st, _, b = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                    "max_tokens": 8, "temperature": 0})
    j = json.loads(b)
    assert st == 200 and j["usage"]["completion_tokens"] == 3, (st, b[:300])  # derated: the policy's cap
    assert j["choices"][0]["message"]["content"], j
    th = set_temp(ctx, "90000\n", "hot")
    assert th["threads_active"] == 1, th  # hot: a quarter of 2, at least 1
    th = set_temp(ctx, "60000\n", "normal")
    assert th["threads_active"] == 2, th
    assert metrics(port)["edgellm_threads_active"] == 2
    st, _, b = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                    "max_tokens": 8, "temperature": 0})
    assert st == 200 and json.loads(b)["usage"]["completion_tokens"] == 8, b[:300]
    m = metrics(port)
    assert m['edgellm_telemetry_events_total{outcome="spooled"}'] > 20, m
    assert m['edgellm_telemetry_events_total{outcome="dropped"}'] == 0, m


# ---------------------------------------------------------------- after the edge stopped

def t_no_marker_anywhere(ctx):
    blobs = []
    for p in spool_files(ctx) + audit_files(ctx):
        with open(p, "rb") as f:
            blobs.append((p, f.read()))
    for i, text in enumerate(getattr(ctx, "extra_blobs", [])):
        blobs.append(("load-error spool#%d" % i, text.encode()))
    with Otlp.lock:
        for i, (path, hdrs, data) in enumerate(Otlp.got):
            blobs.append(("otlp#%d" % i, path.encode() + b"\n" + hdrs + b"\n" + data))
    assert sum(len(b) for _, b in blobs) > 1000, [(p, len(b)) for p, b in blobs]
    assert len(MARKERS) >= 40, len(MARKERS)
    print("  %d markers, %d bytes searched" % (len(MARKERS), sum(len(b) for _, b in blobs)))
    # the search works: the declined answer (sent to the client, not written) holds a marker
    assert any(m.encode() in ctx.echoed for m in MARKERS), ctx.echoed[:300]
    leaks = []
    for name, data in blobs:
        low = data.lower()
        for m in MARKERS:
            for needle in (m, m[:8]):
                if needle.encode() in low:
                    leaks.append((name, needle))
    assert not leaks, leaks[:10]


def t_events(ctx):
    files = spool_files(ctx)
    assert len(files) >= 2, files  # rotated
    for p in files:
        assert os.path.getsize(p) <= SPOOL_CAP, (p, os.path.getsize(p))
    ev = events(ctx)
    kinds = {}
    for e in ev:
        kinds[e["event"]] = kinds.get(e["event"], 0) + 1
    for k in ("route_decision", "request_end", "request_cancelled", "route_refused", "thermal_transition"):
        assert kinds.get(k), (k, kinds)
    dec = [e for e in ev if e["event"] == "route_decision"]
    assert {e["edgellm.route.source"] for e in dec} == {"local", "cloud", "declined"}, dec
    assert any(e["edgellm.data_class"] == "unknown" for e in dec)
    ends = [e for e in ev if e["event"] == "request_end"]
    cloud_ends = [e for e in ends if e.get("edgellm.route.source") == "cloud"]
    local_ends = [e for e in ends if e.get("edgellm.route.source") == "local"]
    assert cloud_ends and local_ends, kinds
    assert all(e["gen_ai.system"] == "openai" for e in cloud_ends)
    assert any(e.get("gen_ai.usage.output_tokens", 0) > 0 and not e["edgellm.streamed"] for e in cloud_ends), cloud_ends
    le = local_ends[0]
    for k in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons",
              "edgellm.ttft_bucket", "edgellm.total_time_bucket", "edgellm.peak_memory_bucket", "edgellm.fingerprint",
              "edgellm.device_class", "gen_ai.operation.name", "edgellm.threads_active"):
        assert k in le, (k, le)
    assert re.fullmatch(r"edgellm-[0-9.]+-[0-9a-f]{16}", le["edgellm.fingerprint"]), le
    canc = [e for e in ev if e["event"] == "request_cancelled"]
    assert {e.get("edgellm.route.source") for e in canc} >= {"local", "cloud"}, canc
    th = [e for e in ev if e["event"] == "thermal_transition"]
    assert any(e["edgellm.thermal"] == "derated" and e.get("edgellm.threads_active") == 1 for e in th), th
    assert any(e["edgellm.thermal"] == "normal" and e.get("edgellm.threads_active") == 2 for e in th), th
    # every value is a number, a boolean, or a string of the schema's alphabet
    for e in ev:
        for k, v in e.items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                assert isinstance(x, (int, float, bool)) or re.fullmatch(r"[A-Za-z0-9_.<=>-]{1,80}", x), (k, v)
    ctx.n_events = len(ev)


def t_otlp(ctx):
    with Otlp.lock:
        got = list(Otlp.got)
    assert got, "the OTLP receiver got nothing"
    n_records, names = 0, set()
    for path, _, data in got:
        assert path == "/v1/logs", path
        j = json.loads(data)
        for rl in j["resourceLogs"]:
            res = {a["key"]: a["value"] for a in rl["resource"]["attributes"]}
            assert res["service.name"] == {"stringValue": "edgellm"}, res
            for sl in rl["scopeLogs"]:
                for rec in sl["logRecords"]:
                    n_records += 1
                    assert rec["timeUnixNano"].isdigit() and rec["body"]["stringValue"], rec
                    for a in rec["attributes"]:
                        names.add(a["key"])
                        assert len(a["value"]) == 1 and list(a["value"])[0] in (
                            "stringValue", "intValue", "boolValue", "arrayValue"), a
    assert n_records == ctx.n_events, (n_records, ctx.n_events)
    for k in ("gen_ai.system", "gen_ai.request.model", "gen_ai.operation.name", "gen_ai.usage.input_tokens",
              "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"):
        assert k in names, (k, sorted(names))


def explain(ctx, *args):
    p = subprocess.run([ctx.cli, "route", "explain", *args], capture_output=True, text=True, timeout=60)
    assert not sanitizer_report(p.stderr), p.stderr[-3000:]
    return p.returncode, p.stdout, p.stderr


def t_audit_replay(ctx):
    lines = []
    for p in audit_files(ctx):
        with open(p) as f:
            lines += [(p, i + 1, l) for i, l in enumerate(f) if l.strip()]
    assert len(lines) >= 15, len(lines)
    decisions = {json.loads(l)["decision"] for _, _, l in lines}
    assert decisions == {"local", "cloud", "declined", "refused"}, decisions
    for p, n, l in lines:
        rc, out, err = explain(ctx, "--audit-log", p, "--line", str(n), "--policy", ctx.policy_path)
        assert rc == 0, (p, n, rc, out, err, l)
        if json.loads(l)["decision"] == "refused":
            assert "nothing to replay" in out, out
        else:
            assert "replay: same" in out, (out, l)
            assert "rule: row" in out, out
    # an edited line: the replay says it differs
    p, n, l = next(x for x in lines if json.loads(x[2])["decision"] == "local")
    j = json.loads(l)
    j["decision"] = "cloud"
    edited = os.path.join(ctx.tmp, "edited.jsonl")
    with open(edited, "w") as f:
        f.write(json.dumps(j) + "\n")
    rc, out, err = explain(ctx, "--audit-log", edited, "--line", "1", "--policy", ctx.policy_path)
    assert rc == 3 and "differs" in out, (rc, out, err)
    rc, out, err = explain(ctx, "--audit-log", edited, "--line", "2", "--policy", ctx.policy_path)
    assert rc == 1 and "fewer lines" in err, (rc, out, err)
    with open(edited, "w") as f:
        f.write('{"decision":"local"}\n')
    rc, out, err = explain(ctx, "--audit-log", edited, "--line", "1", "--policy", ctx.policy_path)
    assert rc == 1 and "policy_version" in err, (rc, out, err)


def t_explain_request(ctx):
    req = os.path.join(ctx.tmp, "req.json")
    state = os.path.join(ctx.tmp, "state.json")
    with open(state, "w") as f:
        json.dump({"thermal": "hot", "thermal_factor": 0}, f)
    with open(req, "w") as f:
        json.dump({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
                   "edgellm": {"data_class": "private"}}, f)
    rc, out, err = explain(ctx, req, "--policy", ctx.policy_path, "--state", state)
    assert rc == 0 and "decision: declined (reason thermal_hot)" in out and "row 3" in out, (rc, out, err)
    assert "retry later" in out, out
    rc, out, err = explain(ctx, req, "--policy", ctx.policy_path, "--state", state, "--header", "X-Data-Class: public")
    assert rc == 0 and "refused before any decision" in out, (rc, out, err)  # header and body name different classes
    with open(req, "w") as f:
        json.dump({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}, f)
    rc, out, err = explain(ctx, req, "--policy", ctx.policy_path, "--state", state, "--header", "X-Data-Class: public",
                           "--json")
    j = json.loads(out)
    assert rc == 0 and j["decision"] == "cloud" and j["reason"] == "thermal_hot", (rc, out, err)
    assert j["request"]["class_source"] == "header" and j["device"]["thermal"] == "hot", j
    rc, out, err = explain(ctx, req, "--policy", ctx.policy_path)
    assert rc == 0 and "decision: local (reason local_only_class)" in out and "strictest" in out, (rc, out, err)
    # the header in the file: {"body": ..., "headers": ...}
    with open(req, "w") as f:
        json.dump({"body": {"messages": [{"role": "user", "content": "hi"}]}, "headers": {"x-data-class": "secret"}}, f)
    rc, out, err = explain(ctx, req, "--policy", ctx.policy_path, "--json")
    j = json.loads(out)
    assert rc == 0 and j["reason"] == "unknown_data_class" and j["request"]["class_source"] == "header", (rc, out, err)
    assert j["request"]["max_tokens"] == 256, j
    # usage errors and bad files
    rc, _, err = explain(ctx, req)
    assert rc == 2 and "--policy" in err, err
    with open(state, "w") as f:
        f.write('{"thermal": "warm"}')
    rc, _, err = explain(ctx, req, "--policy", ctx.policy_path, "--state", state)
    assert rc == 1 and "thermal" in err, err


def t_load_error(ctx):
    """A model that fails to load (a file that is not GGUF) with --policy: a load_error event, content-free."""
    bad = os.path.join(ctx.tmp, "broken-model.gguf")  # its name is the operator's: telemetry may name it
    with open(bad, "w") as f:
        f.write("not a gguf file %s\n" % marker())
    tel = os.path.join(ctx.tmp, "tel-load")
    edge = Server(ctx.cli, bad, "-c", "256", "--policy", ctx.policy_path, "--telemetry-dir", tel).spawn()
    try:
        wait_no_model(edge)
        st, _, b = post(edge.port, "/v1/chat/completions", chat_body(edgellm={"data_class": "private"}))
        assert st == 503 and route_of(b)["reason"] == "model_unavailable", b[:300]
        assert_clean_stop(edge)
    finally:
        edge.kill()
    with open(os.path.join(tel, "telemetry.jsonl")) as f:
        text = f.read()
    ev = [json.loads(line) for line in text.splitlines()]
    le = [e for e in ev if e["event"] == "load_error"]
    assert len(le) == 1 and le[0]["error.type"] == "bad_magic", ev
    assert le[0]["gen_ai.request.model"] == "broken-model.gguf", le
    assert any(e["event"] == "route_decision" and e["edgellm.route.reason"] == "model_unavailable" for e in ev), ev
    ctx.extra_blobs = [text]


def main():
    cli, model = require_setup("tiny-llama-Q4_K_M.gguf", need_openai=False)
    if cli is None:
        return model
    ctx = route_ctx(cli, model, "el_tel_", POLICY, sensor="40000\n")
    ctx.tel_dir = os.path.join(ctx.tmp, "telemetry")
    os.mkdir(os.path.join(ctx.tmp, "audit"))
    ctx.audit = os.path.join(ctx.tmp, "audit", "audit.jsonl")
    otlp = serve_in_thread(Otlp)
    ctx.cloud = Server(cli, model, "-c", "512").start()
    ctx.edge = Server(cli, model, "-c", "512", "-t", "2", "--parallel", "2", "--policy", ctx.policy_path,
                      "--cloud-url", ctx.cloud.base() + "/v1", "--thermal-source", ctx.sensor,
                      "--telemetry-dir", ctx.tel_dir, "--telemetry-max-bytes", str(SPOOL_CAP), "--telemetry-keep", "60",
                      "--otlp-url", "http://127.0.0.1:%d/v1/logs" % otlp.server_address[1],
                      "--audit-log", ctx.audit).start()
    r = Runner()
    try:
        r.run("traffic through every route, with markers", t_traffic, ctx)
        r.run("thermal derating of threads", t_thread_derating, ctx)
        r.run("load error event", t_load_error, ctx)
        count_unclean_stop(r, ctx.edge, "edge clean exit")  # flushes the OTLP queue
        r.run("no marker (nor its first 8 chars) in any byte written or exported", t_no_marker_anywhere, ctx)
        r.run("events: every kind, rotation, schema alphabet", t_events, ctx)
        r.run("OTLP receiver: logs with gen_ai.* names, one per event", t_otlp, ctx)
        r.run("every audit line replays to the same decision", t_audit_replay, ctx)
        r.run("route explain REQUEST.json", t_explain_request, ctx)
        count_unclean_stop(r, ctx.cloud, "cloud clean exit")
    finally:
        ctx.edge.kill()
        ctx.cloud.kill()
        otlp.shutdown()
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
