#!/usr/bin/env python3
"""`edgellm pack` output read by llama.cpp itself (llama-cpp-python).

1. Each fixture in tests/data/pack/ packed to F32 is loaded by llama.cpp and run
   on expected.json's tokens: its logits must match transformers' (the committed
   expectations) within 0.05 at every position, the same tolerance test_pack.c
   gives edgellm — so the GGUF means to llama.cpp what the HF model means to
   transformers (names, shapes, permutations, norms, rope and window metadata).
   llama.cpp's tokenizer on the packed vocab must give the HF ids too.
2. Quantized types: the F32 pack quantized by llama.cpp's own quantizer
   (llama_model_quantize) must equal `edgellm pack --type T` byte for byte,
   tensor by tensor (types and data), for every type edgellm's quantizer
   supports in this build. Besides the fixtures (rows of 32/64, where the
   K-quants fall back to legacy types) this runs on two models made here with
   numpy — llama and qwen2 with hidden size 256, two layers — whose rows take
   the K-quant paths and Q4_K_M/Q5_K_M's per-layer mixes.

llama_cpp is imported from this Python, else from $EL_LLAMA_PYTHON (default
~/.cache/edgellm/llama-cpp-python/bin/python, what scripts/llama-cpp-python.sh
builds from the source package on PyPI; the test re-runs itself there).
Exit 77 (skipped) where none imports llama_cpp, numpy and gguf; under CI=true
that fails instead.
Env: EL_CLI_PATH (the edgellm binary), EL_SOURCE_DIR (the checkout).
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

try:
    import numpy as np
    import llama_cpp
    import gguf
except Exception as e:  # noqa: BLE001
    # llama.cpp as `make test` builds it: scripts/llama-cpp-python.sh's environment
    alt = os.environ.get("EL_LLAMA_PYTHON") or os.path.expanduser("~/.cache/edgellm/llama-cpp-python/bin/python")
    if os.access(alt, os.X_OK) and not os.environ.get("EL_LLAMA_PYTHON_TRIED"):
        os.environ["EL_LLAMA_PYTHON_TRIED"] = "1"
        os.execv(alt, [alt] + sys.argv)
    fixtures.missing(f"llama_cpp, numpy and gguf ({e})", "make fixtures (scripts/llama-cpp-python.sh builds llama_cpp)")

SRC = os.environ.get("EL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("EL_CLI_PATH", os.path.join(SRC, "build", "edgellm"))
ARCHS = ["llama", "qwen2", "qwen3", "gemma3", "llama3"]
TOL = 0.05
# edgellm --type -> llama.cpp LLAMA_FTYPE
FTYPES = {"Q8_0": 7, "Q4_0": 2, "Q4_1": 3, "Q5_0": 8, "Q5_1": 9, "Q4_K": 14, "Q5_K": 16, "Q6_K": 18,
          "Q4_K_M": 15, "Q5_K_M": 17}

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)


def pack(src, out, typ):
    if "/" not in src:
        src = os.path.join(SRC, "tests", "data", "pack", src)
    r = subprocess.run([CLI, "pack", src, "-o", out, "--type", typ, "-q"], capture_output=True, text=True)
    return r.returncode, r.stderr


def llamacpp_quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    return llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))


def tensors(path):
    r = gguf.GGUFReader(path)
    return {t.name: (int(t.tensor_type), bytes(np.asarray(t.data).tobytes())) for t in r.tensors}


def write_safetensors(path, tensors_):
    """tensors_: name -> float32 array, stored as BF16 (truncated)."""
    header, blobs, off = {}, [], 0
    for name, a in tensors_.items():
        b = (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def synth_model(tmp, arch):
    """A 256-wide random model in HF layout with a fixture's tokenizer."""
    src = os.path.join(SRC, "tests", "data", "pack", "llama" if arch == "llama" else "qwen2")
    d = os.path.join(tmp, f"synth-{arch}")
    os.makedirs(d)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(src, fn), "rb") as a, open(os.path.join(d, fn), "wb") as b:
            b.write(a.read())
    cfg = json.load(open(os.path.join(src, "config.json")))
    E, F, L, H, KV, V = 256, 512, 2, 4, 2, cfg["vocab_size"]
    cfg.update(hidden_size=E, intermediate_size=F, num_hidden_layers=L, num_attention_heads=H, num_key_value_heads=KV)
    cfg.pop("head_dim", None)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    rng = np.random.default_rng(11)
    hd = E // H
    t = {"model.embed_tokens.weight": rng.standard_normal((V, E)) * 0.5, "model.norm.weight": 1 + rng.standard_normal(E) * 0.1}
    if not cfg.get("tie_word_embeddings"):
        t["lm_head.weight"] = rng.standard_normal((V, E)) * 0.06
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + rng.standard_normal(E) * 0.1
        t[p + "post_attention_layernorm.weight"] = 1 + rng.standard_normal(E) * 0.1
        for n, rows, cols in (("self_attn.q_proj", H * hd, E), ("self_attn.k_proj", KV * hd, E), ("self_attn.v_proj", KV * hd, E),
                              ("self_attn.o_proj", E, H * hd), ("mlp.gate_proj", F, E), ("mlp.up_proj", F, E), ("mlp.down_proj", E, F)):
            t[p + n + ".weight"] = rng.standard_normal((rows, cols)) / np.sqrt(cols)
            if arch == "qwen2" and n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                t[p + n + ".bias"] = rng.standard_normal(rows) * 0.1
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    return d


def compare_quantized(tag, src_dir, f32, tmp):
    ref = tensors(f32)
    for typ, ft in FTYPES.items():
        mine = os.path.join(tmp, f"{tag}-{typ}.gguf")
        rc, err = pack(src_dir, mine, typ)
        if rc != 0:
            print(f"{tag:12s} {typ:6s} not packed here ({err.strip()})")
            continue
        theirs = os.path.join(tmp, f"{tag}-{typ}-llamacpp.gguf")
        check(llamacpp_quantize(f32, theirs, ft) == 0, f"{tag}: llama.cpp quantize {typ} failed")
        a, b = tensors(mine), tensors(theirs)
        check(set(a) == set(b) == set(ref), f"{tag} {typ}: tensor sets differ")
        diff = [n for n in a if n in b and a[n] != b[n]]
        tdiff = [n for n in a if n in b and a[n][0] != b[n][0]]
        kinds = sorted({gguf.GGMLQuantizationType(v[0]).name for v in a.values()})
        print(f"{tag:12s} {typ:6s} vs llama-quantize: {len(a) - len(diff)}/{len(a)} tensors identical [{' '.join(kinds)}]"
              + (f" (types differ: {tdiff[:3]})" if tdiff else "") + (f" (bytes differ: {diff[:3]})" if diff else ""))
        check(not diff, f"{tag} {typ}: {len(diff)} tensors differ from llama-quantize's, e.g. {diff[:3]}")
        os.unlink(mine)
        os.unlink(theirs)


def main():
    llama_cpp.llama_backend_init()
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ("llama", "qwen2"):
            d = synth_model(tmp, arch)
            f32 = os.path.join(tmp, f"synth-{arch}-F32.gguf")
            rc, err = pack(d, f32, "F32")
            check(rc == 0, f"synth {arch}: pack F32 failed: {err}")
            if rc == 0:
                compare_quantized(f"{arch}-256", d, f32, tmp)
        for arch in ARCHS:
            ex = json.load(open(os.path.join(SRC, "tests", "data", "pack", arch, "expected.json")))
            f32 = os.path.join(tmp, f"{arch}-F32.gguf")
            rc, err = pack(arch, f32, "F32")
            check(rc == 0, f"{arch}: pack F32 failed: {err}")
            if rc:
                continue
            llm = llama_cpp.Llama(model_path=f32, n_ctx=64, logits_all=True, verbose=False, n_threads=2)
            llm.eval(ex["tokens"])
            got = np.array(llm.scores[:len(ex["tokens"])], dtype=np.float64)
            want = np.array(ex["logits"], dtype=np.float64)
            d = float(np.abs(got - want).max())
            print(f"{arch:6s} llama.cpp on the F32 pack: max|dlogit| vs transformers {d:.5f} (tolerance {TOL})")
            check(got.shape == want.shape and d <= TOL, f"{arch}: llama.cpp logits differ by {d}")
            for case in ex["tokenize"]:
                ids = llm.tokenize(case["text"].encode(), add_bos=True, special=False)
                check(ids == case["ids"], f"{arch}: llama.cpp tokenizes {case['text']!r} as {ids}, HF {case['ids']}")
            del llm
            compare_quantized(arch, os.path.join(SRC, "tests", "data", "pack", arch), f32, tmp)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
