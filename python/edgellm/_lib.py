"""_lib.py — the ctypes mirror of include/edgellm.h.

Contract: loads libedgellm once (EDGELLM_LIBRARY = a path, else
libedgellm.so.0 / libedgellm.so through the dynamic loader) and declares
every function's argument and result types and the structs with the
header's exact layout (tests/test_edgellm.py compares the sizes with a C
compiler's). Nothing here raises for library errors; edgellm/__init__.py
turns el_error into exceptions. The library must be ABI EL_ABI_VERSION 0.
"""
import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int, c_int32,
                    c_size_t, c_uint64, c_void_p)

ABI_VERSION = 0


class el_error(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * 384)]


LOG_CB = CFUNCTYPE(None, c_int, c_char_p, c_void_p)


class el_model_params(Structure):
    _fields_ = [("n_threads", c_int), ("vocab_only", c_bool), ("log_cb", LOG_CB), ("log_user", c_void_p),
                ("load", c_int), ("backend", c_void_p), ("reserved", c_void_p * 4)]


class el_session_params(Structure):
    _fields_ = [("n_ctx", c_int), ("n_batch", c_int), ("swa_full", c_int), ("n_draft_max", c_int),
                ("type_k", c_int), ("type_v", c_int), ("lora_rank", c_int),
                ("reserved", c_void_p * (6 - 16 // ctypes.sizeof(c_void_p)))]


class el_sampling(Structure):
    _fields_ = [("temp", c_float), ("top_k", c_int), ("top_p", c_float), ("min_p", c_float),
                ("repeat_penalty", c_float), ("freq_penalty", c_float), ("presence_penalty", c_float),
                ("penalty_last_n", c_int), ("seed", c_uint64), ("n_logit_bias", c_int),
                ("logit_bias_id", POINTER(c_int32)), ("logit_bias", POINTER(c_float))]


class el_spec_params(Structure):
    _fields_ = [("mode", c_int), ("n_draft_max", c_int), ("n_draft_min", c_int), ("ngram_min", c_int),
                ("ngram_max", c_int), ("fixed", c_int), ("prediction", POINTER(c_int32)), ("n_prediction", c_int),
                ("draft", c_void_p), ("reserved", c_int * (4 if ctypes.sizeof(c_void_p) == 8 else 5))]


class el_generate_params(Structure):
    _fields_ = [("max_tokens", c_int), ("ignore_eos", c_bool), ("stop", POINTER(c_char_p)),
                ("n_top_logprobs", c_int), ("sampling", el_sampling), ("spec", POINTER(el_spec_params)),
                ("grammar", c_char_p), ("grammar_triggers", POINTER(c_char_p)), ("grammar_flags", c_int),
                ("reserved", c_void_p * 4)]


class el_generate_stats(Structure):
    _fields_ = [("n_prompt", c_int), ("n_generated", c_int), ("prefill_ms", c_double), ("decode_ms", c_double),
                ("ttft_ms", c_double), ("finish", c_int), ("n_drafted", c_int), ("n_accepted", c_int),
                ("n_spec_rounds", c_int), ("n_plain_steps", c_int), ("spec_cost_ppm", c_int),
                ("spec_last_gamma", c_int), ("reserved", c_int * 2)]


class el_token_info(Structure):
    _fields_ = [("id", c_int32), ("piece", POINTER(c_char)), ("piece_len", c_int), ("logprob", c_float),
                ("n_top", c_int), ("top_id", POINTER(c_int32)), ("top_logprob", POINTER(c_float))]


class el_chat_message(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


TOKEN_CB = CFUNCTYPE(c_bool, POINTER(el_token_info), c_void_p)

TOK_ADD_SPECIAL = 1
TOK_PARSE_SPECIAL = 2
FINISH = {0: "eos", 1: "stop", 2: "length", 3: "cancelled", 4: "failed"}
DONE_FAILED = 4


def _load():
    path = os.environ.get("EDGELLM_LIBRARY")
    candidates = [path] if path else ["libedgellm.so.%d" % ABI_VERSION, ctypes.util.find_library("edgellm")]
    errors = []
    for c in candidates:
        if not c:
            continue
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("cannot load libedgellm (set EDGELLM_LIBRARY to the path of libedgellm.so, or install the "
                      "library where the dynamic loader finds it): " + "; ".join(errors or ["not found"]))


lib = _load()
_M, _S = c_void_p, c_void_p
_sigs = {
    "el_version": (c_char_p, []),
    "el_status_name": (c_char_p, [c_int]),
    "el_model_default_params": (el_model_params, []),
    "el_model_load": (_M, [c_char_p, POINTER(el_model_params), POINTER(el_error)]),
    "el_model_free": (None, [_M]),
    "el_model_arch": (c_char_p, [_M]),
    "el_model_n_vocab": (c_int, [_M]),
    "el_model_n_ctx_train": (c_int, [_M]),
    "el_model_chat_template": (c_char_p, [_M]),
    "el_model_meta_str": (c_char_p, [_M, c_char_p]),
    "el_session_bytes": (c_size_t, [_M, c_int, c_int]),
    "el_session_bytes_for": (c_size_t, [_M, POINTER(el_session_params)]),
    "el_cache_type_parse": (c_int, [c_char_p]),
    "el_cache_type_name": (c_char_p, [c_int]),
    "el_tokenize": (c_int, [_M, c_char_p, c_size_t, POINTER(c_int32), c_int, c_int]),
    "el_token_to_piece": (c_int, [_M, c_int32, POINTER(c_char), c_int, c_bool]),
    "el_token_bos": (c_int32, [_M]),
    "el_token_eos": (c_int32, [_M]),
    "el_token_is_eog": (c_bool, [_M, c_int32]),
    "el_session_default_params": (el_session_params, []),
    "el_session_new": (_S, [_M, POINTER(el_session_params), POINTER(el_error)]),
    "el_session_free": (None, [_S]),
    "el_session_reset": (None, [_S]),
    "el_session_n_ctx": (c_int, [_S]),
    "el_session_n_past": (c_int, [_S]),
    "el_session_truncate": (c_int, [_S, c_int, POINTER(el_error)]),
    "el_sampling_default": (el_sampling, []),
    "el_generate": (c_int, [_S, POINTER(c_int32), c_int, POINTER(el_generate_params), TOKEN_CB, c_void_p,
                            POINTER(el_generate_stats), POINTER(el_error)]),
    "el_session_cancel": (None, [_S]),
    "el_chat_template_name": (c_char_p, [_M]),
    "el_chat_format": (c_int, [_M, c_char_p, POINTER(el_chat_message), c_int, c_bool, POINTER(c_char), c_size_t,
                               POINTER(el_error)]),
    "el_chat_tokenize_messages": (c_int, [_M, c_char_p, POINTER(el_chat_message), c_int, c_bool, POINTER(c_int32),
                                          c_int, POINTER(el_error)]),
    "el_session_chat": (c_int, [_S, c_char_p, POINTER(el_chat_message), c_int, POINTER(el_generate_params), TOKEN_CB,
                                c_void_p, POINTER(el_generate_stats), POINTER(el_error)]),
}
for _name, (_res, _args) in _sigs.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
