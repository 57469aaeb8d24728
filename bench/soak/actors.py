"""actors.py — what runs beside the soak's clients: the fake cloud, the
schedule that takes it up and down and flips the thermal sensor file, the
slowloris client and the RSS sampler.

Contract:
  - FakeCloud: a real HTTP server on 127.0.0.1 speaking the OpenAI chat API
    (POST /v1/chat/completions, streamed and not; GET /v1/models), a fixed
    short reply; up() binds its port (the same port every time), down()
    closes it so a connect is refused; .hits counts the requests it answered;
  - schedule(t) -> (thermal level, cloud up?) for t seconds into the run: a
    60 s cycle, the same every minute, so minutes are comparable: normal
    0-35 s, derated 35-45 s, hot 45-50 s, normal 50-60 s; the cloud down
    from 20 s to 40 s of each minute; Flipper applies it (sensor file written
    atomically, cloud up/down) and logs each change with its time;
  - Slowloris: n connections that send a request's headers one byte a second
    and never finish; when the server closes one (its header deadline) it
    records how long it was held and opens another; never more than n open;
  - RssSampler: every period s, VmRSS/VmHWM/Threads/RssAnon/RssFile from
    /proc/PID/status and the count of /proc/PID/fd; samples are (t, rss_kb,
    hwm_kb, threads, fds, anon_kb, file_kb): anon is the heap, file the
    model's mapped pages (read in as they are first touched);
  - every actor is a thread started by start() and ended by stop() (which
    joins it); none prints.
"""
import http.server
import json
import os
import socket
import threading
import time

TEMPS = {"normal": "40000\n", "derated": "75000\n", "hot": "90000\n"}


def schedule(t):
    s = t % 60.0
    level = "normal" if s < 35 else "derated" if s < 45 else "hot" if s < 50 else "normal"
    return level, not (20 <= s < 40)


class _CloudHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cloud = None  # the FakeCloud (set per server)

    def log_message(self, *a):
        pass

    def _send(self, status, data, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [{"id": "cloud", "object": "model"}]}).encode())
        else:
            self._send(404, b'{"error":{"message":"not found"}}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self._send(400, b'{"error":{"message":"bad json"}}')
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, b'{"error":{"message":"not found"}}')
        self.server.cloud.count()
        head = {"id": "chatcmpl-cloud", "created": int(time.time()), "model": "cloud"}
        words = ["The", " cloud", " says", " hello."]
        if not body.get("stream"):
            msg = dict(head, object="chat.completion", choices=[{
                "index": 0, "message": {"role": "assistant", "content": "".join(words)}, "finish_reason": "stop"}],
                usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})
            return self._send(200, json.dumps(msg).encode())
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for i, w in enumerate(words + [None]):
            d = {"content": w} if w else {}
            if i == 0:
                d["role"] = "assistant"
            ev = dict(head, object="chat.completion.chunk",
                      choices=[{"index": 0, "delta": d, "finish_reason": None if w else "stop"}])
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class FakeCloud:
    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.srv, self.hits, self._mu = None, 0, threading.Lock()

    def count(self):
        with self._mu:
            self.hits += 1

    def url(self):
        return "http://127.0.0.1:%d/v1" % self.port

    def up(self):
        if self.srv is None:
            for _ in range(50):  # the port may linger a moment after down()
                try:
                    self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), _CloudHandler)
                    break
                except OSError:
                    time.sleep(0.1)
            self.srv.daemon_threads = True
            self.srv.cloud = self
            threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def down(self):
        if self.srv is not None:
            self.srv.shutdown()
            self.srv.server_close()
            self.srv = None


class _Thread:
    def __init__(self):
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._th.start()
        return self

    def stop(self, timeout=30):
        self._stop.set()
        self._th.join(timeout)


class Flipper(_Thread):
    """Applies schedule() every 0.2 s: the sensor file and the cloud."""

    def __init__(self, sensor, cloud, t0):
        super().__init__()
        self.sensor, self.cloud, self.t0 = sensor, cloud, t0
        self.changes = []  # (t, "thermal"|"cloud", value)
        self.state = (None, None)

    def apply(self, t):
        level, up = schedule(t)
        if level != self.state[0]:
            tmp = self.sensor + ".tmp"
            with open(tmp, "w") as f:
                f.write(TEMPS[level])
            os.replace(tmp, self.sensor)
            self.changes.append((round(t, 1), "thermal", level))
        if up != self.state[1]:
            self.cloud.up() if up else self.cloud.down()
            self.changes.append((round(t, 1), "cloud", "up" if up else "down"))
        self.state = (level, up)

    def _run(self):
        while not self._stop.wait(0.2):
            self.apply(time.time() - self.t0)
        self.cloud.down()


class Slowloris(_Thread):
    def __init__(self, port, n=6):
        super().__init__()
        self.port, self.n = port, n
        self.opened = 0
        self.held = []  # seconds each connection lasted until the server closed it
        self.answered = 0  # connections that got any bytes back (a 408 or other reply before the close)

    def _run(self):
        conns = []  # [socket, opened at, bytes sent]
        head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000
        while not self._stop.is_set():
            while len(conns) < self.n:
                try:
                    s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                    s.setblocking(False)
                    conns.append([s, time.time(), 0])
                    self.opened += 1
                except OSError:
                    break
            for c in list(conns):
                s, t_open, sent = c
                closed = False
                try:
                    got = s.recv(4096)
                    if got:
                        self.answered += 1
                    closed = True  # a reply or EOF: the server gave up on it
                except BlockingIOError:
                    pass
                except OSError:
                    closed = True
                if not closed:
                    try:
                        s.send(head[sent % len(head):sent % len(head) + 1])
                        c[2] += 1
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed = True
                if closed:
                    self.held.append(round(time.time() - t_open, 2))
                    s.close()
                    conns.remove(c)
            self._stop.wait(1.0)
        for s, _, _ in conns:
            s.close()


class RssSampler(_Thread):
    def __init__(self, pid, t0, period=10.0):
        super().__init__()
        self.pid, self.t0, self.period = pid, t0, period
        self.samples = []

    def sample(self):
        f = {}
        try:
            with open("/proc/%d/status" % self.pid) as st:
                for line in st:
                    k, _, v = line.partition(":")
                    f[k] = v.split()
            fds = len(os.listdir("/proc/%d/fd" % self.pid))
        except OSError:
            return
        self.samples.append((round(time.time() - self.t0, 1), int(f["VmRSS"][0]), int(f["VmHWM"][0]),
                             int(f["Threads"][0]), fds, int(f["RssAnon"][0]), int(f["RssFile"][0])))

    def _run(self):
        self.sample()
        while not self._stop.wait(self.period):
            self.sample()
