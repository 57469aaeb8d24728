"""harness.py — what the multi-server tests share: test_router.py,
test_run_route.py, test_telemetry.py (a "cloud" and a "device" server, a
policy, a sensor file), test_batch.py and test_serve_spec.py.

Contract:
  - re-exports test_server.py's base (Server, Runner, require_setup, request,
    post, metrics, sse_events, expect_error, cancelled_count,
    SANITIZER_MARKERS), so a test imports its harness from here alone;
  - stopping: assert_clean_stop(srv) raises AssertionError unless SIGINT
    ends the server with exit 0 and no sanitizer report;
    count_unclean_stop(r, srv, name) does the same at the end of a run
    without adding a pass: a failure adds one failure named `name` to the
    Runner (the tests' "N passed, N failed" totals are what they were);
  - streams: sse_objects(body) is the JSON of every `data:` event less
    [DONE]; stream_and_leave() sends a streamed POST on a raw socket and
    hangs up after n `data:` events;
  - serve_refused(cli, model, *flags) runs a `serve` expected to exit before
    listening (CompletedProcess, text); wait_no_model(srv) waits, after
    srv.spawn(), for a server whose model did not load;
  - routing: route_policy() builds the tests' policy (classes private / ask /
    public), route_ctx() a temporary folder holding it (and the sensor
    file), set_temp() / wait_level() drive and read the thermal level,
    route_of() reads a body's route, cloud_requests(ctx) counts ctx.cloud's
    requests; FaultHandler is the fault cloud (the URL's first path segment
    picks the fault) and serve_in_thread() runs it or another handler on a
    loopback port.
Nothing here prints a result line or exits: the tests do.
"""
import http.server
import json
import os
import socket
import struct
import subprocess
import tempfile
import threading
import time

from test_server import (SANITIZER_MARKERS, Runner, Server, cancelled_count, expect_error, metrics, post, request,
                         require_setup, sse_events)

__all__ = [
    # test_server.py's base
    "SANITIZER_MARKERS", "Runner", "Server", "cancelled_count", "expect_error", "metrics", "post", "request",
    "require_setup", "sse_events",
    # stopping, starting, streams
    "sanitizer_report", "assert_clean_stop", "count_unclean_stop", "serve_refused", "wait_no_model",
    "serve_in_thread", "sse_objects", "stream_and_leave",
    # routing
    "THERMAL", "route_policy", "write_file", "Ctx", "route_ctx", "wait_level", "set_temp", "route_of",
    "cloud_requests", "FaultHandler",
]


# ---------------------------------------------------------------- stopping

def sanitizer_report(text):
    """True when text (a process's stderr) holds a sanitizer report."""
    return any(mk in text for mk in SANITIZER_MARKERS)


def assert_clean_stop(srv):
    """SIGINT: exit 0 and no sanitizer report."""
    code = srv.interrupt()
    assert code == 0, (code, srv.stderr()[-2000:])
    assert not sanitizer_report(srv.stderr()), srv.stderr()[-3000:]


def count_unclean_stop(r, srv, name):
    """SIGINT at the end of a run: an exit other than 0, or a sanitizer
    report, is one failure in r named `name`; a clean exit counts nothing."""
    code = srv.interrupt()
    if code != 0 or sanitizer_report(srv.stderr()):
        r.failed += 1
        r.names.append(name)
        print("FAIL %s: %r\n%s" % (name, code, srv.stderr()[-3000:]))


# ---------------------------------------------------------------- starting

def serve_refused(cli, model, *flags, timeout=60):
    """`edgellm serve` with flags that should make it exit before listening."""
    return subprocess.run([cli, "serve", "-m", model, "--allow-unsigned", "--port", "0", *flags],
                          capture_output=True, text=True, timeout=timeout)


def wait_no_model(srv, timeout=60):
    """After srv.spawn() of a server whose model does not load: waits for
    "listening" (timeout s), then for /health to say no_local_model (30 s).
    Returns /health's status code."""
    assert srv.ready.wait(timeout), srv.stderr()
    deadline = time.time() + 30
    while True:
        st, _, b = request(srv.port, "GET", "/health")
        if json.loads(b)["status"] == "no_local_model":
            return st
        assert time.time() < deadline, b
        time.sleep(0.1)


def serve_in_thread(handler):
    """A ThreadingHTTPServer for handler on a free loopback port, serving
    from a daemon thread; its .server_address[1] is the port."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


# ---------------------------------------------------------------- streams

def sse_objects(body):
    """The JSON object of each `data:` event of an SSE body, in order, less [DONE]."""
    return [json.loads(e) for e in sse_events(body) if e != "[DONE]"]


def stream_and_leave(port, path, body, n_events=1, headers=None, reset=False, timeout=30):
    """POSTs body (JSON) on a raw socket, reads until n_events `data:` events
    have come (or the server closed), then hangs up: abortively with reset
    (the server sees ECONNRESET at once). Returns the bytes read."""
    data = json.dumps(body).encode()
    h = {"Host": "127.0.0.1:%d" % port, "Content-Type": "application/json", "Content-Length": str(len(data))}
    h.update(headers or {})
    head = "POST %s HTTP/1.1\r\n%s\r\n\r\n" % (path, "\r\n".join("%s: %s" % kv for kv in h.items()))
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head.encode() + data)
        got = b""
        while got.count(b"data:") < n_events:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        return got
    finally:
        if reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


# ---------------------------------------------------------------- routing

THERMAL = {"derate_c": 70, "hot_c": 85, "hysteresis_c": 5, "sample_ms": 50, "max_tokens_derated": 3,
           "slots_derated": 1}


def route_policy(version, timeout_s, thermal=None):
    """The routing tests' policy: private never leaves the device, ask needs
    consent, public may go to the cloud; thermal (default THERMAL); the cloud
    never marked down, timeout_s its timeout."""
    return {
        "format": "edgellm-policy/1",
        "version": version,
        "classes": {
            "private": {"cloud": "never"},
            "ask": {"cloud": "with_consent", "legal_basis": "consent"},
            "public": {"cloud": "allowed", "legal_basis": "contract"},
        },
        "thermal": dict(thermal or THERMAL),
        "cloud": {"down_for_s": 0, "timeout_s": timeout_s},
    }


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


class Ctx:
    """What a test's checks share (attributes set by route_ctx and the test)."""


def route_ctx(cli, model, prefix, policy, sensor=None):
    """A Ctx with cli, model, tmp (a new folder), policy_path (policy written
    there) and, given sensor (the file's first text), sensor: tmp/temp."""
    ctx = Ctx()
    ctx.cli, ctx.model = cli, model
    ctx.tmp = tempfile.mkdtemp(prefix=prefix)
    ctx.policy_path = os.path.join(ctx.tmp, "policy.json")
    with open(ctx.policy_path, "w") as f:
        json.dump(policy, f, indent=1)
    if sensor is not None:
        ctx.sensor = write_file(os.path.join(ctx.tmp, "temp"), sensor)
    return ctx


def wait_level(ctx, want_level, port=None):
    """Polls /health (of port, default ctx.edge's) for 10 s until the thermal
    level is want_level; returns its "thermal" object."""
    deadline = time.time() + 10
    while True:
        st, _, b = request(port or ctx.edge.port, "GET", "/health", timeout=10)
        th = json.loads(b)["thermal"]
        if th["level"] == want_level:
            return th
        if time.time() > deadline:
            raise AssertionError("thermal level %s, want %s: %r" % (th["level"], want_level, th))
        time.sleep(0.05)


def set_temp(ctx, text, want_level):
    """Writes text to ctx.sensor (atomically) and waits for want_level."""
    tmp = ctx.sensor + ".tmp"
    write_file(tmp, text)
    os.replace(tmp, ctx.sensor)
    return wait_level(ctx, want_level)


def route_of(body):
    return json.loads(body)["edgellm"]["route"]


def cloud_requests(ctx):
    """Every request ctx.cloud has counted, whatever its end."""
    m = metrics(ctx.cloud.port)
    return sum(v for k, v in m.items() if k.startswith("edgellm_requests_total"))


class FaultHandler(http.server.BaseHTTPRequestHandler):
    """The fault cloud: POST /MODE/... answers 503 (e503), non-JSON (garbage),
    after 15 s (slow), a body claiming a local route (spoof) or one SSE event
    and a closed connection (cut); hits counts each mode, last_body is the
    last request's JSON."""
    protocol_version = "HTTP/1.1"
    hits = {}

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        mode = self.path.split("/")[1]
        FaultHandler.hits[mode] = FaultHandler.hits.get(mode, 0) + 1
        FaultHandler.last_body = body
        if mode == "e503":
            self.reply(503, b'{"error":{"message":"overloaded"}}')
        elif mode == "garbage":
            self.reply(200, b"<html>this is not json</html>")
        elif mode == "slow":
            time.sleep(15)
            self.reply(200, b'{"choices":[]}')
        elif mode == "spoof":
            self.reply(200, json.dumps({"choices": [{"message": {"content": "x"}}],
                                        "edgellm": {"route": {"source": "local"}}}).encode())
        elif mode == "cut":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = {"choices": [{"index": 0, "delta": {"content": "partial"}}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self.reply(404, b"{}")

    def reply(self, status, data):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # "slow": the device gave up waiting, as it should
