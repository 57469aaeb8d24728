"""edgellm — Python binding of the edgellm on-device LLM runtime (libedgellm, via ctypes).

Contract:
  * ``Model(path)`` loads a GGUF model; ``model.session(n_ctx=...)`` makes a
    ``Session`` (its own KV cache, sized once). ``session.generate(prompt)``
    and ``session.chat(messages)`` return a ``Generation``: an iterator of
    ``Token`` (id, text, bytes, logprob) streamed as the model produces them.
    ``gen.close()``, ``gen.cancel()`` or ``session.cancel()`` (any thread)
    cancel the generation at the next decode step (after a ``break``, the
    session's next generate/chat/reset/close does); ``gen.finish`` then says how it ended ("eos", "stop",
    "length", "cancelled").
  * Greedy decoding (``temperature=0``) gives the same tokens as
    ``edgellm run --temp 0`` for the same prompt.
  * Every library error is an ``EdgeLLMError`` carrying the library's status
    name and message. A Python exception raised by a callback you give (the
    log callback) is caught where C called it and re-raised from the call
    that triggered it, after the library call returned; the library's state
    stays consistent.
  * A session keeps its model alive: ``model.close()`` while sessions are open
    frees the model only when the last of them closes. A closed model or
    session raises ``EdgeLLMError`` instead of touching freed memory. One
    generation at a time per session: starting another (generate/chat),
    reset() or closing the session cancels an unfinished one first (its iterator then
    ends, ``finish == "cancelled"``). ``with session.generate(...) as gen:``
    closes it on leaving the block.
  * ``verify(model, manifest=None, pub=..., store=...)`` checks a signed
    package before loading it (libedgellm-package, loaded on first use;
    ``PackageLibraryNotFound`` if it is not installed) and raises the
    ``PackageError`` subclass of the failed check (``HashError``,
    ``KeyCheckError``, ``ExpiredError``, ...: ``.check`` is the CLI's name);
    ``store_active(store)`` resolves a store's verified active model. See
    ``edgellm/package.py``.
"""
from __future__ import annotations

import codecs
import ctypes
import queue
import threading
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

from . import _lib
from ._lib import lib

from .package import (DeviceError, ExpiredError, HashError, IOCheckError, KeyCheckError, ManifestError,
                      PackageError, PackageInfo, PackageLibraryNotFound, RuntimeVersionError, SignatureError,
                      SizeError, SmokeError, SpaceError, StoreError, UsageError, VersionError, store_active, verify)

__all__ = ["EdgeLLMError", "Model", "Session", "Generation", "Token", "version", "__version__",
           "verify", "store_active", "PackageInfo", "PackageError", "PackageLibraryNotFound", "IOCheckError",
           "ManifestError", "KeyCheckError", "SignatureError", "ExpiredError", "VersionError", "RuntimeVersionError",
           "DeviceError", "SizeError", "HashError", "SmokeError", "SpaceError", "StoreError", "UsageError"]


def version() -> str:
    """The loaded library's version (el_version(); what ``edgellm --version`` prints)."""
    return lib.el_version().decode()


__version__ = "0.1.0"


class EdgeLLMError(Exception):
    """An error reported by libedgellm: ``status`` is its name ("io", "context", ...), ``code`` its number."""

    def __init__(self, message: str, status: str = "invalid_arg", code: int = 12):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


def _raise(err: _lib.el_error) -> None:
    msg = err.msg.decode("utf-8", "replace")
    raise EdgeLLMError(msg, lib.el_status_name(err.code).decode(), int(err.code))


@dataclass(frozen=True)
class Token:
    """One streamed token. ``id`` is -1 for the last piece of held-back text
    (an incomplete character or a possible stop-string prefix, released at the
    end). ``text`` is the UTF-8 decoding of the stream so far, cut at this
    token; ``bytes`` the token's exact bytes."""
    id: int
    text: str
    bytes: bytes
    logprob: float


Message = Dict[str, str]
LogCallback = Callable[[int, str], None]


class Model:
    """A loaded GGUF model (weights mapped read-only; shared by its sessions)."""

    def __init__(self, path: str, *, n_threads: int = 0, vocab_only: bool = False,
                 log: Optional[LogCallback] = None):
        self._ptr: Optional[int] = None
        self._closed = False
        self._sessions = 0
        self._lock = threading.Lock()
        self._log = log
        self._log_exc: Optional[BaseException] = None
        p = lib.el_model_default_params()
        p.n_threads = n_threads
        p.vocab_only = vocab_only
        if log is not None:
            self._log_cb = _lib.LOG_CB(self._on_log)  # kept alive as long as the model
            p.log_cb = self._log_cb
        err = _lib.el_error()
        ptr = lib.el_model_load(str(path).encode(), ctypes.byref(p), ctypes.byref(err))
        exc, self._log_exc = self._log_exc, None
        if not ptr:
            _raise(err)
        self._ptr = ptr
        if exc is not None:
            raise exc

    def _on_log(self, level: int, msg: bytes, user: int) -> None:
        try:
            self._log(int(level), msg.decode("utf-8", "replace"))
        except BaseException as e:  # never unwind through C: re-raised after the library call
            if self._log_exc is None:
                self._log_exc = e

    def _handle(self, for_session: bool = False) -> int:
        # a closed model stays usable by its open sessions (for_session) until they close
        if self._ptr is None or (self._closed and not for_session):
            raise EdgeLLMError("the model is closed")
        return self._ptr

    # ---- lifetime ----
    def close(self) -> None:
        """Frees the model now, or when its last open session closes."""
        with self._lock:
            self._closed = True
            if self._sessions == 0 and self._ptr is not None:
                lib.el_model_free(self._ptr)
                self._ptr = None

    def _retain(self) -> None:
        with self._lock:
            self._sessions += 1

    def _release(self) -> None:
        with self._lock:
            self._sessions -= 1
            if self._closed and self._sessions == 0 and self._ptr is not None:
                lib.el_model_free(self._ptr)
                self._ptr = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # ---- facts ----
    @property
    def arch(self) -> str:
        return lib.el_model_arch(self._handle()).decode()

    @property
    def n_vocab(self) -> int:
        return lib.el_model_n_vocab(self._handle())

    @property
    def n_ctx_train(self) -> int:
        return lib.el_model_n_ctx_train(self._handle())

    @property
    def chat_template(self) -> Optional[str]:
        """The family name chat() uses by default ("gemma", "chatml", ...), or None."""
        r = lib.el_chat_template_name(self._handle())
        return r.decode() if r else None

    def meta(self, key: str) -> Optional[str]:
        r = lib.el_model_meta_str(self._handle(), key.encode())
        return r.decode("utf-8", "replace") if r else None

    @property
    def bos(self) -> int:
        return lib.el_token_bos(self._handle())

    @property
    def eos(self) -> int:
        return lib.el_token_eos(self._handle())

    # ---- tokens ----
    def tokenize(self, text: str, *, add_special: bool = True, parse_special: bool = True,
                 _for_session: bool = False) -> List[int]:
        """Token ids of text (BOS added as the vocab says; control-token text parsed), as `edgellm run` does."""
        h = self._handle(_for_session)
        data = text.encode("utf-8")
        flags = (_lib.TOK_ADD_SPECIAL if add_special else 0) | (_lib.TOK_PARSE_SPECIAL if parse_special else 0)
        cap = len(data) + 16
        for _ in range(2):
            buf = (ctypes.c_int32 * cap)()
            n = lib.el_tokenize(h, data, len(data), buf, cap, flags)
            if n < 0:
                raise EdgeLLMError("the tokenizer refused the text", "bad_value", 6)
            if n <= cap:
                return list(buf[:n])
            cap = n
        raise EdgeLLMError("tokenizer result size changed", "internal", 16)

    def token_bytes(self, token: int, *, special: bool = False) -> bytes:
        h = self._handle()
        buf = ctypes.create_string_buffer(64)
        n = lib.el_token_to_piece(h, token, buf, 64, special)
        if n > 64:
            buf = ctypes.create_string_buffer(n)
            n = lib.el_token_to_piece(h, token, buf, n, special)
        if n < 0:
            raise EdgeLLMError(f"token {token} is not in the vocabulary")
        return buf.raw[:n]

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        return b"".join(self.token_bytes(t, special=special) for t in tokens).decode("utf-8", "replace")

    # ---- chat ----
    def format_chat(self, messages: Sequence[Message], *, template: Optional[str] = None,
                    add_generation_prompt: bool = True) -> str:
        """The chat rendered with the model's template (or `template`: gemma, llama3, chatml, llama2, mistral, phi3)."""
        h = self._handle()
        arr, _keep = _messages(messages)
        err = _lib.el_error()
        tname = template.encode() if template else None
        n = lib.el_chat_format(h, tname, arr, len(messages), add_generation_prompt, None, 0, ctypes.byref(err))
        if n < 0:
            _raise(err)
        buf = ctypes.create_string_buffer(n + 1)
        lib.el_chat_format(h, tname, arr, len(messages), add_generation_prompt, buf, n + 1, ctypes.byref(err))
        return buf.raw[:n].decode("utf-8", "replace")

    def tokenize_chat(self, messages: Sequence[Message], *, template: Optional[str] = None,
                      add_generation_prompt: bool = True) -> List[int]:
        """Tokens of the rendered chat: the template's markers are special tokens, message text is plain."""
        h = self._handle()
        arr, _keep = _messages(messages)
        err = _lib.el_error()
        tname = template.encode() if template else None
        n = lib.el_chat_tokenize_messages(h, tname, arr, len(messages), add_generation_prompt, None, 0,
                                          ctypes.byref(err))
        if n < 0:
            _raise(err)
        buf = (ctypes.c_int32 * max(n, 1))()
        lib.el_chat_tokenize_messages(h, tname, arr, len(messages), add_generation_prompt, buf, n, ctypes.byref(err))
        return list(buf[:n])

    def session(self, n_ctx: int = 0, n_batch: int = 0, cache_type_k: str = "f16",
                cache_type_v: str = "f16") -> "Session":
        return Session(self, n_ctx=n_ctx, n_batch=n_batch, cache_type_k=cache_type_k, cache_type_v=cache_type_v)


def _messages(messages: Sequence[Message]):
    keep = []
    arr = (_lib.el_chat_message * max(len(messages), 1))()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise EdgeLLMError(f"message {i} is not a dict with 'role' and 'content'")
        role, content = str(m["role"]).encode(), str(m.get("content", "")).encode()
        keep += [role, content]
        arr[i].role, arr[i].content = role, content
    return arr, keep


class Session:
    """A conversation state on a model: its own KV cache of n_ctx tokens, allocated once."""

    def __init__(self, model: Model, n_ctx: int = 0, n_batch: int = 0, cache_type_k: str = "f16",
                 cache_type_v: str = "f16"):
        """cache_type_k / cache_type_v: the KV cache types, llama.cpp's names: f16, bf16, q8_0, q4_0."""
        self._ptr: Optional[int] = None
        self._model = model  # keeps the model alive while this session exists
        p = lib.el_session_default_params()
        p.n_ctx, p.n_batch = n_ctx, n_batch
        for field, name in (("type_k", cache_type_k), ("type_v", cache_type_v)):
            t = lib.el_cache_type_parse(str(name).encode())
            if t < 0:
                raise EdgeLLMError(f"cache type {name!r} is not one of f16, bf16, q8_0, q4_0")
            setattr(p, field, t)
        err = _lib.el_error()
        ptr = lib.el_session_new(model._handle(), ctypes.byref(p), ctypes.byref(err))
        if not ptr:
            _raise(err)
        model._retain()
        self._ptr = ptr
        self._active: Optional[Generation] = None

    def _handle(self) -> int:
        if self._ptr is None:
            raise EdgeLLMError("the session is closed")
        return self._ptr

    @property
    def model(self) -> Model:
        return self._model

    @property
    def n_ctx(self) -> int:
        return lib.el_session_n_ctx(self._handle())

    @property
    def n_past(self) -> int:
        """Tokens in the KV cache (the history the next generate() continues)."""
        return lib.el_session_n_past(self._handle())

    def reset(self) -> None:
        """Forget the history (an unfinished generation is cancelled first)."""
        h = self._handle()
        self._end_active()
        lib.el_session_reset(h)

    def _end_active(self) -> None:
        if self._active is not None and threading.current_thread() is self._active._thread:
            raise EdgeLLMError("session is busy (called from inside its own generation)")
        if self._active is not None:
            self._active.close()  # cancels it if unfinished, waits for its worker
            self._active = None

    def cancel(self) -> None:
        """Cancel the running generation (any thread); it ends at the next decode step."""
        if self._ptr is not None:
            lib.el_session_cancel(self._ptr)

    def close(self) -> None:
        if self._ptr is None:
            return
        self._end_active()
        lib.el_session_free(self._ptr)
        self._ptr = None
        self._model._release()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def generate(self, prompt: Union[str, Sequence[int]], *, max_tokens: int = 128, temperature: Optional[float] = None,
                 top_k: Optional[int] = None, top_p: Optional[float] = None, min_p: Optional[float] = None,
                 repeat_penalty: Optional[float] = None, seed: Optional[int] = None,
                 stop: Optional[Sequence[str]] = None, ignore_eos: bool = False,
                 top_logprobs: int = 0) -> "Generation":
        """Continue the session's history with prompt (text: tokenized as model.tokenize does, with BOS only
        when the session is empty; or token ids) and stream the reply. Unset sampling options take
        llama.cpp's defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05); temperature=0 is greedy."""
        h = self._handle()
        self._end_active()
        if isinstance(prompt, str):
            ids = self._model.tokenize(prompt, add_special=self.n_past == 0, _for_session=True)
        else:
            ids = [int(t) for t in prompt]
        gp = _gen_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop, ignore_eos,
                         top_logprobs)
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)

        def call(cb, stats, err):
            return lib.el_generate(h, arr, len(ids), ctypes.byref(gp[0]), cb, None, stats, err)
        return self._start(call, gp)

    def chat(self, messages: Sequence[Message], *, template: Optional[str] = None, max_tokens: int = 128,
             temperature: Optional[float] = None, top_k: Optional[int] = None, top_p: Optional[float] = None,
             min_p: Optional[float] = None, repeat_penalty: Optional[float] = None, seed: Optional[int] = None,
             stop: Optional[Sequence[str]] = None) -> "Generation":
        """One chat turn: the session's history becomes the conversation (messages: dicts with "role" and
        "content"), and the assistant's reply streams until the model ends its turn."""
        h = self._handle()
        self._end_active()
        arr, keep = _messages(messages)
        gp = _gen_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop, False, 0)
        tname = template.encode() if template else None
        n = len(messages)

        def call(cb, stats, err):
            return lib.el_session_chat(h, tname, arr, n, ctypes.byref(gp[0]), cb, None, stats, err)
        return self._start(call, (gp, arr, keep))

    def _start(self, call, keep) -> "Generation":
        g = Generation(self, call, keep)
        self._active = g
        return g


def _gen_params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, seed, stop, ignore_eos, top_logprobs):
    gp = _lib.el_generate_params()
    gp.max_tokens = int(max_tokens)
    gp.ignore_eos = bool(ignore_eos)
    gp.n_top_logprobs = int(top_logprobs)
    gp.sampling = lib.el_sampling_default()
    s = gp.sampling
    if temperature is not None:
        s.temp = float(temperature)
    if top_k is not None:
        s.top_k = int(top_k)
    if top_p is not None:
        s.top_p = float(top_p)
    if min_p is not None:
        s.min_p = float(min_p)
    if repeat_penalty is not None:
        s.repeat_penalty = float(repeat_penalty)
    if seed is not None:
        s.seed = int(seed)
    keep = [gp]
    if stop:
        enc = [x.encode("utf-8") for x in stop]
        arr = (ctypes.c_char_p * (len(enc) + 1))(*enc, None)
        gp.stop = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
        keep += [enc, arr]
    return keep


_END = object()


class Generation:
    """An iterator of Token. The library generates on a worker thread and hands
    tokens over one at a time (it waits for you: nothing piles up). close() or
    cancel() cancels it (so does the session's next generate/chat/reset/close
    after a loop left early); the worker ends at the next decode step and
    close() waits for it."""

    def __init__(self, session: Session, call, keep):
        self._session = session  # keeps session (and model) alive while streaming
        self._keep = keep
        self._q: "queue.Queue" = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._done = threading.Event()
        self._stats = _lib.el_generate_stats()
        self._err = _lib.el_error()
        self._fin: Optional[int] = None
        self._exc: Optional[BaseException] = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._cb = _lib.TOKEN_CB(self._on_token)
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _on_token(self, info, user) -> bool:
        try:
            if self._stop.is_set():
                return True  # close() has cancelled the session: it ends before the next token
            t = info.contents
            data = ctypes.string_at(t.piece, t.piece_len) if t.piece_len > 0 else b""
            item = (int(t.id), data, float(t.logprob))
            while not self._stop.is_set():
                try:
                    self._q.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return True
        except BaseException as e:  # never unwind through C
            self._exc = e
            return False

    def _run(self, call) -> None:
        try:
            self._fin = call(self._cb, ctypes.byref(self._stats), ctypes.byref(self._err))
        except BaseException as e:
            self._exc = e
        finally:
            self._done.set()
            while True:  # the end marker always arrives, even if the consumer went away
                try:
                    self._q.put(_END, timeout=0.05)
                    break
                except queue.Full:
                    if self._stop.is_set():
                        try:
                            self._q.get_nowait()
                        except queue.Empty:
                            pass

    def __iter__(self) -> Iterator[Token]:
        return self

    def __next__(self) -> Token:
        if self._stop.is_set() and self._done.is_set() and self._q.empty():
            raise StopIteration
        item = self._q.get()
        if item is _END:
            self._q.put_nowait(_END)  # later next() calls end too
            self._thread.join()
            self._check()
            raise StopIteration
        tid, data, lp = item
        text = self._decoder.decode(data, final=(tid < 0))
        return Token(tid, text, data, lp)

    def _check(self) -> None:
        if self._exc is not None:
            exc, self._exc = self._exc, None
            raise exc
        if self._fin == _lib.DONE_FAILED:
            _raise(self._err)

    def cancel(self) -> None:
        """Ask the library to stop at the next decode step; the remaining tokens still come out of the iterator."""
        self._session.cancel()

    def close(self) -> None:
        """Stop streaming: cancel, wait for the worker, drop what was not read."""
        if not self._done.is_set():
            self._stop.set()
            self._session.cancel()
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass
        self._thread.join()

    def __enter__(self) -> "Generation":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def text(self) -> str:
        """Runs to the end and returns the whole text."""
        return "".join(t.text for t in self)

    @property
    def finish(self) -> Optional[str]:
        """"eos", "stop", "length", "cancelled" or "failed" once the generation ended, else None."""
        return _lib.FINISH.get(self._fin) if self._done.is_set() and self._fin is not None else None

    @property
    def stats(self) -> dict:
        s = self._stats
        return {"n_prompt": s.n_prompt, "n_generated": s.n_generated, "prefill_ms": s.prefill_ms,
                "decode_ms": s.decode_ms, "ttft_ms": s.ttft_ms}
