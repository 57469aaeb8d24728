#!/usr/bin/env python3
"""gen_jinja_goldens.py — Python jinja2's renderings of llama.cpp's chat templates, the goldens of tests/test_jinja.c.

Contract: renders every *.jinja file of a templates folder (llama.cpp's
models/templates, which make_fixtures.py extracts into
$EL_FIXTURE_DIR/reference/templates from llama-cpp-python's source package)
with every conversation of tests/data/jinja/conversations.json, once with
add_generation_prompt false and once true, in the environment transformers'
apply_chat_template compiles a chat template in (_compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[a {% generation %} block, jinja2.ext.loopcontrols]), the filter
tojson = json.dumps(x, ensure_ascii=False, indent=..., separators=...,
sort_keys=...), the globals raise_exception (raises TemplateError) and
strftime_now — here with the FIXED date FIXED_NOW so goldens do not age.
Variables: messages, tools (when the conversation has them),
add_generation_prompt, bos_token, eos_token, plus the conversation's "extra".
Writes tests/data/jinja/goldens.json: "cases", one entry per (template,
conversation, add_generation_prompt) with the template's sha256 and either
"output" (the exact text) or "error" (the exception class name) and
"message"; "units", the same for each small template of
tests/data/jinja/unit_cases.json (one language construct each).
With --models NAME=GGUF...: the same for the chat templates inside GGUF files
(the default model Gemma 3 270M and Qwen2.5-Coder 1.5B, scripts/fetch-model.sh)
into tests/data/jinja/model_goldens.json, the way edgellm's chat path renders
them (structured/chat_jinja.c: messages carry role, content, tool_calls,
tool_call_id; a leading BOS text dropped).
Needs jinja2 (pip install jinja2); the C test needs no Python.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXED_NOW = datetime.datetime(2026, 7, 26, 12, 0, 0)


class GenerationBlock(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers'
    AssistantTracker also records the span; the text is the same)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(text):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(text)


def model_goldens(specs):
    """The goldens of tests/test_jinja.c's model check: each model's own template as
    edgellm renders it through structured/chat_jinja.c (content "" for none)."""
    import gguf
    convs = json.load(open(os.path.join(ROOT, "tests", "data", "jinja", "conversations.json"), encoding="utf-8"))
    models = []
    for spec in specs:
        name, path = spec.split("=", 1)
        r = gguf.GGUFReader(path)

        def field(key):
            f = r.fields[key]
            return f.parts[f.data[0]]
        if "tokenizer.chat_template" not in r.fields:  # e.g. Gemma 3 270M (a base model): built-in family
            models.append({"model": name, "template_sha256": None, "cases": []})
            continue
        text = bytes(field("tokenizer.chat_template")).decode("utf-8")
        toks = r.fields["tokenizer.ggml.tokens"]

        def tok(key):
            if key not in r.fields:
                return ""
            i = int(field(key)[0])
            return bytes(toks.parts[toks.data[i]]).decode("utf-8")
        bos, eos = tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")
        tpl = compile_template(text)
        cases = []
        for cname, conv in convs["conversations"].items():
            if any("reasoning_content" in m for m in conv["messages"]):
                continue  # el_chat_msg has no reasoning_content
            msgs = []
            for m in conv["messages"]:
                x = {"role": m["role"], "content": m.get("content") or ""}
                if m.get("tool_calls"):
                    x["tool_calls"] = [{"id": c["id"], "type": "function",
                                        "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                                       for c in m["tool_calls"]]
                if "tool_call_id" in m:
                    x["tool_call_id"] = m["tool_call_id"]
                msgs.append(x)
            for agp in (False, True):
                ctx = {"messages": msgs, "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos}
                if "tools" in conv:
                    ctx["tools"] = conv["tools"]
                ctx.update(conv.get("extra", {}))
                case = {"conversation": cname, "add_generation_prompt": agp}
                try:
                    out = tpl.render(**ctx)
                    case["output"] = out[len(bos):] if bos and out.startswith(bos) else out  # the tokenizer adds BOS
                except Exception as e:
                    case["error"], case["message"] = type(e).__name__, str(e)
                cases.append(case)
        models.append({"model": name, "template_sha256": hashlib.sha256(text.encode()).hexdigest(),
                       "bos_token": bos, "eos_token": eos, "cases": cases})
    out = os.path.join(ROOT, "tests", "data", "jinja", "model_goldens.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/tools/gen_jinja_goldens.py --models", "jinja2": jinja2.__version__,
                   "models": models}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{sum(len(m['cases']) for m in models)} cases from {len(models)} models -> {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fx = os.environ.get("EL_FIXTURE_DIR", os.path.expanduser("~/.cache/edgellm/fixtures"))
    ap.add_argument("--templates", default=os.path.join(fx, "reference", "templates"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "jinja", "goldens.json"))
    ap.add_argument("--models", nargs="*", metavar="NAME=GGUF",
                    help="instead: the chat templates of these GGUF files (tokenizer.chat_template, BOS/EOS token "
                         "texts) into tests/data/jinja/model_goldens.json, messages reduced to what edgellm's "
                         "el_chat_msg carries (role, content, tool_calls, tool_call_id)")
    a = ap.parse_args()
    if a.models is not None:
        return model_goldens(a.models)
    convs = json.load(open(os.path.join(ROOT, "tests", "data", "jinja", "conversations.json"), encoding="utf-8"))
    names = sorted(f for f in os.listdir(a.templates) if f.endswith(".jinja"))
    if not names:
        sys.exit(f"no *.jinja files in {a.templates}")
    cases, n_err = [], 0
    for name in names:
        raw = open(os.path.join(a.templates, name), "rb").read()
        text = raw.decode("utf-8")
        sha = hashlib.sha256(raw).hexdigest()
        try:
            tpl = compile_template(text)
            compile_err = None
        except Exception as e:  # a template jinja2 cannot parse
            tpl, compile_err = None, e
        for cname, conv in convs["conversations"].items():
            for agp in (False, True):
                case = {"template": name, "sha256": sha, "conversation": cname, "add_generation_prompt": agp}
                try:
                    if compile_err:
                        raise compile_err
                    ctx = {"messages": conv["messages"], "add_generation_prompt": agp,
                           "bos_token": convs["bos_token"], "eos_token": convs["eos_token"]}
                    if "tools" in conv:
                        ctx["tools"] = conv["tools"]
                    ctx.update(conv.get("extra", {}))
                    case["output"] = tpl.render(**ctx)
                except Exception as e:
                    case["error"] = type(e).__name__
                    case["message"] = str(e)
                    n_err += 1
                cases.append(case)
    units = []
    for uc in json.load(open(os.path.join(ROOT, "tests", "data", "jinja", "unit_cases.json"), encoding="utf-8"))["units"]:
        out = {"name": uc["name"]}
        try:
            out["output"] = compile_template(uc["template"]).render(**uc["vars"])
        except Exception as e:
            out["error"] = type(e).__name__
            out["message"] = str(e)
        units.append(out)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/tools/gen_jinja_goldens.py", "jinja2": jinja2.__version__,
                   "fixed_now": FIXED_NOW.isoformat(), "cases": cases, "units": units}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases from {len(names)} templates ({n_err} raise) -> {a.out}")


if __name__ == "__main__":
    main()
