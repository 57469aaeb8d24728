#!/usr/bin/env python3
"""Render the real chat templates in tests/data/chat_templates/*.jinja with
jinja2 (the way transformers' apply_chat_template does: sandboxed env,
trim_blocks + lstrip_blocks, raise_exception) and write
<name>.expected.json = [{messages, add_generation_prompt, output}, ...].

edgellm's el_chat_apply never emits the leading BOS text (the tokenizer adds
the BOS token), so a leading bos_token is stripped from each rendering. BOS/EOS
text inside the conversation (Llama 2's "</s><s>[INST]") is kept.

Usage: python3 tests/tools/gen_chat_goldens.py   (pip install jinja2 if missing)
"""
import json
import os
import sys

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:  # pragma: no cover
    sys.exit("jinja2 missing: pip install jinja2")

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data", "chat_templates"))

# file stem -> (bos_token, eos_token, which conversations apply)
TEMPLATES = {
    # Qwen2.5-Instruct injects "You are Qwen, created by Alibaba Cloud..." when
    # there is no system message; edgellm's generic ChatML does not, so only
    # conversations that start with a system message are rendered for it.
    "chatml":       (None, "<|im_end|>", "system_first"),
    "chatml_plain": (None, "<|im_end|>", "all"),   # OpenHermes-2.5 plain ChatML
    "llama3":       ("<|begin_of_text|>", "<|eot_id|>", "all"),  # Meta-Llama-3-8B-Instruct
    "llama2":       ("<s>", "</s>", "all"),         # Llama-2-7b-chat-hf
    "mistral":      ("<s>", "</s>", "all"),         # Mistral/Mixtral Instruct v0.1 ("v1")
    "gemma":        ("<bos>", "<eos>", "all"),      # Gemma 3 -it
    "phi3":         ("<s>", "<|endoftext|>", "all"),  # Phi-3.5-mini-instruct
}

SYS = "You are a helpful assistant."
CONVERSATIONS = [
    ([{"role": "system", "content": SYS},
      {"role": "user", "content": "Hello!"}], True),
    ([{"role": "user", "content": "What is 2+2?"}], True),
    ([{"role": "system", "content": "Answer briefly."},
      {"role": "user", "content": "Hi there"},
      {"role": "assistant", "content": "   Hello! How can I help?   "},
      {"role": "user", "content": "Tell me a joke.\n"}], True),
    ([{"role": "user", "content": "  你好，世界 🌍\u3000"},
      {"role": "assistant", "content": "\u00a0你好！😀 Ça va?\n\n"},
      {"role": "user", "content": "再见 👋"}], True),
    ([{"role": "system", "content": "  Système: réponds en français.  "},
      {"role": "user", "content": "Bonjour"},
      {"role": "assistant", "content": "Salut !"}], False),
    ([{"role": "user", "content": ""}], True),
    ([{"role": "system", "content": "Be terse."},
      {"role": "user", "content": " \t\n "}], True),
]


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def render(src, messages, add_gen, bos, eos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(src)
    out = tmpl.render(messages=messages, add_generation_prompt=add_gen,
                      bos_token=bos if bos is not None else "",
                      eos_token=eos)
    if bos and out.startswith(bos):
        out = out[len(bos):]
    return out


def main():
    for stem, (bos, eos, which) in TEMPLATES.items():
        with open(os.path.join(DATA, stem + ".jinja"), encoding="utf-8", newline="") as f:
            src = f.read()
        cases = []
        for msgs, add_gen in CONVERSATIONS:
            if which == "system_first" and msgs[0]["role"] != "system":
                continue
            out = render(src, msgs, add_gen, bos, eos)
            cases.append({"messages": msgs, "add_generation_prompt": add_gen, "output": out})
        path = os.path.join(DATA, stem + ".expected.json")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            json.dump(cases, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
