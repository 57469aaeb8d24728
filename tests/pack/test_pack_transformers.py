#!/usr/bin/env python3
"""transformers, live, against the committed pack expectations and edgellm.

Where torch and transformers can be imported (or EL_TORCH_PYTHON names a
Python that has them; else exit 77 = skipped):
1. each fixture in tests/data/pack/ is loaded by transformers from its
   directory (offline) and run on expected.json's tokens: the logits must be
   the committed ones (max |d| <= 2e-3: they are stored with 5 significant
   digits, i.e. up to 5e-4 off for logits near 10; float32 on CPU otherwise), and the tokenizer (tokenizers) must give the
   committed ids — the committed expectations are what transformers computes;
2. `edgellm pack --type F32` then `edgellm run --json --top-logprobs 5
   --temp 0 -n 6` on a text prompt: every generated token must be
   transformers' greedy choice on the same prompt (or within 0.02 nats of it
   where transformers' own top two are that close), and its log-probability
   within 0.05 of transformers'.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import transformers
    from tokenizers import Tokenizer
except Exception as e:  # noqa: BLE001
    alt = os.environ.get("EL_TORCH_PYTHON")
    if alt and not os.environ.get("EL_TORCH_PYTHON_TRIED"):
        os.environ["EL_TORCH_PYTHON_TRIED"] = "1"
        os.execv(alt, [alt] + sys.argv)
    print(f"SKIPPED: needs torch, transformers and tokenizers ({e})")
    sys.exit(77)

SRC = os.environ.get("EL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("EL_CLI_PATH", os.path.join(SRC, "build", "edgellm"))
ARCHS = ["llama", "qwen2", "qwen3", "gemma3", "llama3"]
PROMPT = "The quick brown fox"
N_GEN = 6

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", msg)


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ARCHS:
            d = os.path.join(SRC, "tests", "data", "pack", arch)
            ex = json.load(open(os.path.join(d, "expected.json")))
            model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, local_files_only=True).eval()
            with torch.no_grad():
                lg = model(torch.tensor([ex["tokens"]])).logits[0].double()
            diff = float((lg - torch.tensor(ex["logits"], dtype=torch.float64)).abs().max())
            print(f"{arch:6s} transformers {transformers.__version__} vs committed logits: max|d| {diff:.2e}")
            check(diff <= 2e-3, f"{arch}: live transformers logits differ from expected.json by {diff}")
            tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
            for case in ex["tokenize"]:
                ids = tk.encode(case["text"], add_special_tokens=False).ids
                want = case["ids"][1:] if ex["bos"] is not None else case["ids"]
                check(ids == want, f"{arch}: tokenizers gives {ids} for {case['text']!r}, committed {want}")

            out = os.path.join(tmp, f"{arch}.gguf")
            r = subprocess.run([CLI, "pack", d, "-o", out, "--type", "F32", "-q"], capture_output=True, text=True)
            check(r.returncode == 0, f"{arch}: pack: {r.stderr}")
            if r.returncode:
                continue
            r = subprocess.run([CLI, "run", "-m", out, "-p", PROMPT, "--json", "--top-logprobs", "5", "--temp", "0",
                                "-n", str(N_GEN), "--ignore-eos", "-t", "2"], capture_output=True, text=True, errors="replace")
            check(r.returncode == 0, f"{arch}: run: {r.stderr[-500:]}")
            steps = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{\"id\"")]
            prompt = tk.encode(PROMPT, add_special_tokens=False).ids
            if ex["bos"] is not None:
                prompt = [ex["bos"]] + prompt
            seq = list(prompt)
            worst = 0.0
            with torch.no_grad():
                for i, st in enumerate(steps):
                    lp = torch.log_softmax(model(torch.tensor([seq])).logits[0, -1].double(), -1)
                    top2 = torch.topk(lp, 2)
                    greedy = int(top2.indices[0])
                    margin = float(top2.values[0] - top2.values[1])
                    ok = st["id"] == greedy or float(lp[greedy] - lp[st["id"]]) <= 0.02
                    check(ok, f"{arch} step {i}: edgellm chose {st['id']}, transformers {greedy} (margin {margin:.3f})")
                    d_lp = abs(float(lp[st["id"]]) - st["logprob"])
                    worst = max(worst, d_lp)
                    check(d_lp <= 0.05, f"{arch} step {i}: logprob {st['logprob']:.4f} vs {float(lp[st['id']]):.4f}")
                    seq.append(st["id"])
            check(len(steps) == N_GEN, f"{arch}: {len(steps)} tokens generated")
            print(f"{arch:6s} edgellm run on the pack: {len(steps)} greedy tokens as transformers, max|dlogprob| {worst:.4f}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
