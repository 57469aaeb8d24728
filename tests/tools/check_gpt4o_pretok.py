#!/usr/bin/env python3
"""check_gpt4o_pretok.py — edgellm's gpt-4o (o200k) pre-tokenizer against llama.cpp's.

llama.cpp's sdist has no o200k vocabulary, so this writes one: the tokens and
merges of ggml-vocab-gpt-2.gguf with tokenizer.ggml.pre = "gpt-4o" (the
pre-tokenizer gpt-oss uses), then tokenizes hard strings (digit runs, which
gpt-4o splits in threes and gpt-2 does not; contractions in both cases; CJK;
emoji with joiners; runs of spaces, tabs and newlines; no-break and thin
spaces) with llama.cpp (llama_cpp, vocab only) and with `edgellm tokenize`,
and exits 1 on any difference. ctest test_gpt4o_pretok; run from a Python
without llama_cpp it re-runs itself in $EL_LLAMA_PYTHON (scripts/llama-cpp-python.sh's
environment); with neither, skipped (exit 77; a failure under CI=true).

usage: python3 tests/tools/check_gpt4o_pretok.py [--cli build/edgellm] [--ref FIXTURE_REF_DIR]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402

try:
    import gguf
    import llama_cpp as L
except Exception as e:  # noqa: BLE001
    alt = os.environ.get("EL_LLAMA_PYTHON") or os.path.expanduser("~/.cache/edgellm/llama-cpp-python/bin/python")
    if os.access(alt, os.X_OK) and not os.environ.get("EL_LLAMA_PYTHON_TRIED"):
        os.environ["EL_LLAMA_PYTHON_TRIED"] = "1"
        os.execv(alt, [alt] + sys.argv)
    fixtures.missing(f"llama_cpp and gguf ({e})", "make fixtures (scripts/llama-cpp-python.sh builds llama_cpp)")

STRINGS = ["Hello world 12345 don't", "1234567890 123 4567", "I'M HERE you're THEY'LL we've",
           "端侧推理系统由五个核心模块拼成：", "emoji 🤖🚀 x🤷\u200d♂️y", "a   b\t\tc\n\n\nd  \n  e",
           "  leading and trailing  ", "ÀÉÎõü naïve café", "x=1;y=22;z=333", "'s 'S 're 'VE 'm 'LL 'd",
           "CamelCaseWord HTTPServer getURL", "\n\n\n", "    def f(x):\n        return x**2\n",
           "数字123和English混合", "a\u00a0b\u2009c"]


def write_vocab(src, dst):
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, "gpt2")
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        t = f.types[0]
        if k == "tokenizer.ggml.pre":
            w.add_string(k, "gpt-4o")
        elif t == gguf.GGUFValueType.ARRAY and f.types[1] == gguf.GGUFValueType.STRING:
            w.add_array(k, [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data])
        elif t == gguf.GGUFValueType.ARRAY:
            w.add_array(k, [f.parts[i][0].item() for i in f.data])
        elif t == gguf.GGUFValueType.STRING:
            w.add_string(k, bytes(f.parts[f.data[0]]).decode())
        else:
            w.add_key_value(k, f.parts[f.data[0]][0].item(), t)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.environ.get("EL_CLI_PATH", "build/edgellm"))
    ap.add_argument("--ref", default=fixtures.ref())
    a = ap.parse_args()
    src = os.path.join(a.ref, "tokenizer", "ggml-vocab-gpt-2.gguf")
    if not os.path.exists(src):
        fixtures.missing(src)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "vocab-gpt-4o.gguf")
        write_vocab(src, path)
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.vocab_only = True
        m = L.llama_model_load_from_file(path.encode(), mp)
        v = L.llama_model_get_vocab(m)
        bad = 0
        for s in STRINGS:
            b = s.encode()
            arr = (L.llama_token * 512)()
            n = L.llama_tokenize(v, b, len(b), arr, 512, False, False)
            ref = [arr[i] for i in range(n)]
            got = json.loads(subprocess.run([a.cli, "tokenize", "-m", path, "-p", s], capture_output=True, text=True,
                                            check=True).stdout)
            bad += got != ref
            print("ok  " if got == ref else "DIFF", repr(s), "" if got == ref else f"llama.cpp {ref} edgellm {got}")
        L.llama_model_free(m)
    print(f"gpt-4o pre-tokenizer: {len(STRINGS) - bad}/{len(STRINGS)} strings tokenized as llama.cpp does")
    print(f"{len(STRINGS) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
