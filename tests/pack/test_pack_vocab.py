#!/usr/bin/env python3
"""`edgellm pack`'s tokenizer conversion on real vocabularies, against llama.cpp.

For llama.cpp's vocab files in reference/tokenizer (llama-spm: 32000
SentencePiece pieces; phi-3: SentencePiece with user-defined chat tokens and no
prefix space; gpt-2: 50257 byte-level BPE tokens) this writes the
tokenizer.json transformers' converters make for such a vocab — for
SentencePiece a BPE model with byte fallback whose merges are every split of a
piece into two pieces, ordered by the merged piece's score as transformers'
SentencePieceExtractor orders them (the scores themselves are not in the
file); for GPT-2 the vocab, merges and a ByteLevel pre-tokenizer — plus a tiny
random llama around it, packs it with `edgellm pack`, and tokenizes every test
string of llama.cpp's vectors (X.gguf.inp) with `edgellm tokenize` on the
pack: the ids must be llama.cpp's (X.gguf.out). This checks that merge ranks
turned back into SentencePiece scores tokenize as the original scores do.

Needs numpy and gguf (PyPI) and the shared reference data; exit 77 otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
except Exception as e:  # noqa: BLE001
    print(f"SKIPPED: needs numpy and gguf ({e})")
    sys.exit(77)

SRC = os.environ.get("EL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("EL_CLI_PATH", os.path.join(SRC, "build", "edgellm"))
sys.path.insert(0, os.path.join(SRC, "tests", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

REF = fixtures.ref("tokenizer")
VOCABS = ["llama-spm", "phi-3", "gpt-2"]

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)


def field(r, key):
    f = r.fields.get(key)
    if f is None:
        return None
    if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[-1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def tokenizer_json(r):
    model = field(r, "tokenizer.ggml.model")
    toks = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    vocab = {t: i for i, t in reversed(list(enumerate(toks)))}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": types[i] == 3} for i, t in enumerate(toks) if types[i] in (2, 3, 4)]
    if model == "llama":
        scores = field(r, "tokenizer.ggml.scores")
        normal = {t for i, t in enumerate(toks) if types[i] == 1}
        merges = []
        for i, t in enumerate(toks):
            if types[i] != 1:
                continue
            local = [(t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in normal and t[k:] in normal]
            local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
            merges.extend((scores[i], a, b) for a, b in local)
        merges.sort(key=lambda m: m[0], reverse=True)  # stable: transformers' order
        prefix = field(r, "tokenizer.ggml.add_space_prefix")
        norm = [{"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]
        if prefix is None or prefix:
            norm.insert(0, {"type": "Prepend", "prepend": "\u2581"})
        unk = field(r, "tokenizer.ggml.unknown_token_id")
        return {"version": "1.0", "added_tokens": added, "normalizer": {"type": "Sequence", "normalizers": norm},
                "pre_tokenizer": None,
                "model": {"type": "BPE", "byte_fallback": True, "unk_token": toks[unk] if unk is not None else None,
                          "fuse_unk": True, "vocab": vocab, "merges": [[a, b] for _, a, b in merges]}}
    merges = field(r, "tokenizer.ggml.merges")
    return {"version": "1.0", "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "byte_fallback": False, "vocab": vocab, "merges": merges}}


def write_model(d, n_vocab, bos, eos):
    E = 32
    cfg = {"architectures": ["LlamaForCausalLM"], "vocab_size": n_vocab, "hidden_size": E, "intermediate_size": 32,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-5,
           "max_position_embeddings": 256, "tie_word_embeddings": True, "hidden_act": "silu"}
    if bos is not None:
        cfg["bos_token_id"] = bos
    if eos is not None:
        cfg["eos_token_id"] = eos
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    rng = np.random.default_rng(3)
    shapes = {"model.embed_tokens.weight": (n_vocab, E), "model.norm.weight": (E,),
              "model.layers.0.input_layernorm.weight": (E,), "model.layers.0.post_attention_layernorm.weight": (E,),
              "model.layers.0.self_attn.q_proj.weight": (E, E), "model.layers.0.self_attn.k_proj.weight": (16, E),
              "model.layers.0.self_attn.v_proj.weight": (16, E), "model.layers.0.self_attn.o_proj.weight": (E, E),
              "model.layers.0.mlp.gate_proj.weight": (32, E), "model.layers.0.mlp.up_proj.weight": (32, E),
              "model.layers.0.mlp.down_proj.weight": (E, 32)}
    header, blobs, off = {}, [], 0
    for name, shp in shapes.items():
        b = rng.standard_normal(shp).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shp), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def main():
    if not os.path.isdir(REF):
        fixtures.missing(REF)
    with tempfile.TemporaryDirectory() as tmp:
        for name in VOCABS:
            path = os.path.join(REF, f"ggml-vocab-{name}.gguf")
            if not os.path.exists(path + ".inp"):
                print(f"{name}: no vectors, skipped")
                continue
            r = gguf.GGUFReader(path)
            d = os.path.join(tmp, name)
            os.makedirs(d)
            tj = tokenizer_json(r)
            json.dump(tj, open(os.path.join(d, "tokenizer.json"), "w"), ensure_ascii=False)
            n_vocab = len(field(r, "tokenizer.ggml.tokens"))
            write_model(d, n_vocab, field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id"))
            out = os.path.join(tmp, f"{name}.gguf")
            p = subprocess.run([CLI, "pack", d, "-o", out, "--type", "F32", "-q"], capture_output=True, text=True)
            check(p.returncode == 0, f"{name}: pack: {p.stderr}")
            if p.returncode:
                continue
            inp = open(path + ".inp", "rb").read().split(b"\n__ggml_vocab_test__\n")
            outs = open(path + ".out").read().split("\n")
            ok = 0
            for i, text in enumerate(inp):
                want = [int(x) for x in outs[i].split()] if i < len(outs) else None
                if want is None:
                    continue
                f = os.path.join(tmp, "in.txt")
                open(f, "wb").write(text)
                q = subprocess.run([CLI, "tokenize", "-m", out, "-f", f, "--no-bos", "--no-parse-special"], capture_output=True)
                got = json.loads(q.stdout) if q.returncode == 0 else None
                if got == want:
                    ok += 1
                else:
                    print(f"  {name} case {i} {text[:40]!r}: got {got if got is None else got[:12]}, want {want[:12]}")
            print(f"{name:10s} packed from tokenizer.json: {ok}/{len(inp)} llama.cpp vectors tokenize the same")
            check(ok == len(inp), f"{name}: {len(inp) - ok} vectors differ")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
