#!/usr/bin/env python3
"""Builds the Hugging Face model fixtures of tests/test_pack.c, offline.

For each of llama, qwen2, qwen3, gemma3 and llama3 (a llama with Llama 3's
byte-level tokenizer, tied output and llama3 rope scaling) it writes tests/data/pack/<arch>/:
a random-weight model made by `transformers` from a tiny config
(config.json, model.safetensors — sharded with model.safetensors.index.json
for qwen3 — generation_config.json), a small tokenizer of the real format
trained here with `tokenizers` (tokenizer.json, tokenizer_config.json with a
chat template), and expected.json: the tokenizer's ids for a few strings and
transformers' float32 logits of the model at every position of a fixed token
sequence.

Tokenizers:
  llama   SentencePiece-style BPE with byte fallback (Llama 2 layout: <unk> <s> </s>,
          256 <0xXX> tokens, then pieces; "▁" prefix), merges listed the way
          transformers' SentencePiece converter lists them (every pair whose
          concatenation is a piece, in the piece's order)
  gemma3  the same style without the "▁" prefix and Gemma's special tokens
  qwen2/3 byte-level BPE with Qwen2's pre-tokenizer regex
  llama3  byte-level BPE with Llama 3's regex, BOS added by a TemplateProcessing post-processor

Weights are stored in BF16 (as released HF models usually are) and scaled up
from transformers' default init (std 0.02 gives almost flat logits) so that
logits differ by whole units. The reference logits come from the model run in
float32 on exactly those BF16 values.

Needs: torch, transformers, tokenizers, safetensors, numpy (PyPI). Not run by
`make test`: its outputs are committed. Usage:
    tests/tools/gen_pack_fixtures.py [--out tests/data/pack]
"""
import argparse
import json
import os
import shutil

import torch
import transformers as T
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

CORPUS = [
    "Once upon a time there was a little robot who lived in a small town.",
    "The quick brown fox jumps over the lazy dog, and the dog did not mind at all.",
    "Hello world! Hello there. How are you today? I am fine, thank you.",
    "In 2024 the numbers 123, 4567 and 89 were written on the board.",
    "She sells sea shells by the sea shore; the shells she sells are surely sea shells.",
    "def main():\n    print('hello')\n    return 0\n",
    "Machine learning models run on small devices when they are quantized well.",
] * 4

# The sequence every model is run on (ids < 256 exist in every fixture vocab).
SEQ_LEN = 10
TEST_STRINGS = ["Hello world", "The quick brown fox", " leading space", "numbers 12345 and 6", "new\nline\ttab",
                "caf\u00e9 \u00fcber \u2603"]

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
             r"|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
            r"|\s+(?!\S)|\s+")

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
GEMMA_TMPL = ("{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
              "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
              "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
LLAMA3_TMPL = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
               " + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA2_TMPL = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
               "{% else %}{{ ' ' + message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}")


def spm_tokenizer(specials, n_pieces, prefix):
    """SentencePiece-style BPE tokenizer.json: specials, 256 byte tokens, then pieces."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
    norm = [normalizers.Replace(" ", "\u2581")]
    if prefix:
        norm.insert(0, normalizers.Prepend("\u2581"))
    tok.normalizer = normalizers.Sequence(norm)
    trainer = trainers.BpeTrainer(vocab_size=n_pieces, special_tokens=[], show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    trained = json.loads(tok.to_str())["model"]["vocab"]
    pieces = [p for p, _ in sorted(trained.items(), key=lambda kv: kv[1])]
    # piece order = the order in which BPE learned them: single chars first, then merges
    vocab = {}
    for s in specials:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for p in pieces:
        if p not in vocab:
            vocab[p] = len(vocab)
    # merges as transformers' SentencePiece converter makes them: every split of a piece
    # into two pieces, ordered by the merged piece's id
    normal = {p for p in pieces}
    merges = []
    for p in pieces:
        for i in range(1, len(p)):
            a, b = p[:i], p[i:]
            if a in normal and b in normal:
                merges.append((vocab[p], vocab[a], vocab[b], a, b))
    merges.sort()
    unk = specials.index("<unk>") if "<unk>" in specials else None
    j = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for s in specials],
        "normalizer": json.loads(tok.to_str())["normalizer"],
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}] +
            ([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if prefix else [])},
        "model": {"type": "BPE", "dropout": None, "unk_token": specials[unk] if unk is not None else None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
                  "byte_fallback": True, "ignore_merges": False, "vocab": vocab,
                  "merges": [[a, b] for _, _, _, a, b in merges]},
    }
    return j


def bpe_tokenizer(specials, n_pieces, regex=QWEN2_RE):
    """Byte-level BPE tokenizer.json with Qwen2's (or Llama 3's) pre-tokenizer; specials appended after the pieces."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=n_pieces, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(specials)
    j = json.loads(tok.to_str())
    j["normalizer"] = {"type": "NFC"}
    return j


def write_json(path, obj, indent=1):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=indent)
        f.write("\n")


def build(arch, out):
    d = os.path.join(out, arch)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    torch.manual_seed({"llama": 1, "qwen2": 2, "qwen3": 3, "gemma3": 4, "llama3": 5}[arch])
    if arch == "llama":
        specials = ["<unk>", "<s>", "</s>"]
        tj = spm_tokenizer(specials, 100, prefix=True)
        n_vocab = len(tj["model"]["vocab"])
        cfg = T.LlamaConfig(vocab_size=n_vocab, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                            rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                            bos_token_id=1, eos_token_id=2)
        model_cls = T.LlamaForCausalLM
        tcfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
                "add_eos_token": False, "chat_template": LLAMA2_TMPL}
        gen = {"bos_token_id": 1, "eos_token_id": 2}
    elif arch == "gemma3":
        specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
        tj = spm_tokenizer(specials, 90, prefix=False)
        n_vocab = len(tj["model"]["vocab"])
        cfg = T.Gemma3TextConfig(vocab_size=n_vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                                 num_attention_heads=4, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                                 sliding_window=4, max_position_embeddings=256, rms_norm_eps=1e-6,
                                 pad_token_id=0, eos_token_id=1, bos_token_id=2)
        model_cls = T.Gemma3ForCausalLM
        tcfg = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
                "add_bos_token": True, "add_eos_token": False, "chat_template": GEMMA_TMPL}
        gen = {"bos_token_id": 2, "eos_token_id": [1, 5], "pad_token_id": 0}
    elif arch == "llama3":
        # Llama 3 style: byte-level BPE ("llama-bpe"), BOS from the post-processor, tied
        # output, llama3 rope scaling (rope_freqs), one layer
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
        tj = bpe_tokenizer(specials, 290, regex=LLAMA3_RE)
        n_vocab = len(tj["model"]["vocab"]) + len(specials)
        ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
        bos_id, eos_id, eot_id = ids["<|begin_of_text|>"], ids["<|end_of_text|>"], ids["<|eot_id|>"]
        tj["post_processor"] = {"type": "TemplateProcessing",
                                "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                           {"Sequence": {"id": "A", "type_id": 0}}],
                                "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}},
                                         {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                                         {"Sequence": {"id": "B", "type_id": 1}}],
                                "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [bos_id],
                                                                        "tokens": ["<|begin_of_text|>"]}}}
        cfg = T.LlamaConfig(vocab_size=n_vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=1,
                            num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=16384,
                            rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=bos_id, eos_token_id=eos_id,
                            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 8192})
        model_cls = T.LlamaForCausalLM
        tcfg = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": LLAMA3_TMPL}
        gen = {"bos_token_id": bos_id, "eos_token_id": [eos_id, eot_id]}
    else:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tj = bpe_tokenizer(specials, 300)
        n_tok = len(tj["model"]["vocab"]) + len(specials)
        n_vocab = n_tok + 5  # Qwen pads the embedding past the tokenizer's size
        eot = tj["model"]["vocab"].get("<|im_end|>") or [t["id"] for t in tj["added_tokens"] if t["content"] == "<|im_end|>"][0]
        common = dict(vocab_size=n_vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                      bos_token_id=n_tok - 3, eos_token_id=eot)
        if arch == "qwen2":
            cfg = T.Qwen2Config(**common)
            model_cls = T.Qwen2ForCausalLM
        else:
            common.update(num_attention_heads=2, num_key_value_heads=1)
            cfg = T.Qwen3Config(head_dim=32, **common)
            model_cls = T.Qwen3ForCausalLM
        tcfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "add_bos_token": False,
                "chat_template": CHATML}
        gen = {"bos_token_id": n_tok - 3, "eos_token_id": [eot, n_tok - 3]}
    cfg.architectures = [model_cls.__name__]
    cfg.dtype = "bfloat16"
    model = model_cls(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                if arch == "gemma3":  # stored as (w - 1)
                    p.copy_(torch.randn_like(p) * 0.3)
                else:
                    p.copy_(1.0 + torch.randn_like(p) * 0.3)
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.5)
            else:
                p.copy_(torch.randn_like(p) * (1.0 / p.shape[-1] ** 0.5) * (3.0 if "embed" in name else 1.5))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))

    # weights: BF16 safetensors, the way save_pretrained lays them out (tied output not stored)
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    if cfg.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    if arch == "qwen3":  # a sharded checkpoint
        names = sorted(sd)
        half = len(names) // 2
        parts = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
        wm = {}
        total = 0
        for fn, ns in parts.items():
            save_file({n: sd[n] for n in ns}, os.path.join(d, fn), metadata={"format": "pt"})
            for n in ns:
                wm[n] = fn
                total += sd[n].numel() * 2
        write_json(os.path.join(d, "model.safetensors.index.json"), {"metadata": {"total_size": total}, "weight_map": wm})
    else:
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    cj = cfg.to_dict()
    cj.pop("transformers_version", None)
    write_json(os.path.join(d, "config.json"), cj)
    write_json(os.path.join(d, "generation_config.json"), gen)
    write_json(os.path.join(d, "tokenizer.json"), tj)
    tcfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    tcfg["added_tokens_decoder"] = {str(t["id"]): {"content": t["content"], "special": t["special"]}
                                    for t in tj["added_tokens"]}
    write_json(os.path.join(d, "tokenizer_config.json"), tcfg)

    # expectations
    tk = Tokenizer.from_str(json.dumps(tj))
    tok_cases = []
    bos = None
    adds_bos = tcfg.get("add_bos_token", (tj.get("post_processor") or {}).get("type") == "TemplateProcessing")
    if adds_bos and tcfg.get("bos_token"):
        bos = tj["model"]["vocab"].get(tcfg["bos_token"])
        if bos is None:
            bos = [t["id"] for t in tj["added_tokens"] if t["content"] == tcfg["bos_token"]][0]
    for s in TEST_STRINGS:
        ids = tk.encode(s, add_special_tokens=False).ids
        tok_cases.append({"text": s, "ids": ([bos] if bos is not None else []) + ids})
    g = torch.Generator().manual_seed(7)
    seq = torch.randint(3, min(n_vocab, 250), (SEQ_LEN,), generator=g).tolist()
    if bos is not None:
        seq[0] = bos
    with torch.no_grad():
        logits = model(torch.tensor([seq])).logits[0].float()
    write_json(os.path.join(d, "expected.json"), {
        "arch": arch,
        "transformers": T.__version__,
        "torch": torch.__version__,
        "tokens": seq,
        "logits": [[float("%.5g" % v) for v in row] for row in logits.tolist()],
        "tokenize": tok_cases,
        "bos": bos,
        "eos": tk.token_to_id(tcfg["eos_token"]),  # tokenizer_config names EOS (as llama.cpp's converter reads it)
    }, indent=None)
    print(arch, "vocab", n_vocab, "params", sum(p.numel() for p in model.parameters()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "pack"))
    ap.add_argument("archs", nargs="*", default=["llama", "qwen2", "qwen3", "gemma3", "llama3"])
    a = ap.parse_args()
    for arch in a.archs:
        build(arch, a.out)


if __name__ == "__main__":
    main()
