"""The prompts of the Qwen2.5-Coder 1.5B Instruct fidelity goldens (tests/data/qwen2.5-coder-1.5b-q4km-fidelity.json).

Shared by gen_gemma_goldens.py (--family qwen). 12-1,000 tokens each: code
completion, prose, Chinese, and chat turns rendered through the model's own
chat template (tokenizer.chat_template, by jinja2 with transformers' settings,
at golden time: the rendered text is what the goldens store), one of them
past llama.cpp's 512-token micro-batch and one near 1,000 tokens.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemma_prompts import CJK, CODE, LONG_EN, TABLE  # noqa: E402

LONG_CODE = '''"""A small job queue with retries, backoff and a dead-letter list."""
import heapq
import itertools
import json
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

log = logging.getLogger("jobs")


@dataclass(order=True)
class Job:
    due: float
    seq: int
    name: str = field(compare=False)
    payload: Dict[str, Any] = field(compare=False, default_factory=dict)
    attempts: int = field(compare=False, default=0)
    last_error: Optional[str] = field(compare=False, default=None)


class RetryPolicy:
    """Exponential backoff with full jitter, capped."""

    def __init__(self, base: float = 0.5, cap: float = 30.0, max_attempts: int = 5):
        if base <= 0 or cap < base:
            raise ValueError("need 0 < base <= cap")
        self.base, self.cap, self.max_attempts = base, cap, max_attempts

    def delay(self, attempts: int) -> float:
        return random.uniform(0, min(self.cap, self.base * (2 ** attempts)))

    def should_retry(self, attempts: int, error: Exception) -> bool:
        if isinstance(error, (ValueError, KeyError)):
            return False  # a bad payload will not get better
        return attempts < self.max_attempts


class Queue:
    def __init__(self, handlers: Dict[str, Callable[[Dict[str, Any]], Any]], policy: Optional[RetryPolicy] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.handlers = handlers
        self.policy = policy or RetryPolicy()
        self.clock = clock
        self.heap: List[Job] = []
        self.dead: List[Job] = []
        self.counter = itertools.count()
        self.stats = {"ok": 0, "retried": 0, "dead": 0}

    def submit(self, name: str, payload: Optional[Dict[str, Any]] = None, delay: float = 0.0) -> Job:
        if name not in self.handlers:
            raise KeyError(f"no handler for {name!r}")
        job = Job(self.clock() + delay, next(self.counter), name, payload or {})
        heapq.heappush(self.heap, job)
        return job

    def _run(self, job: Job) -> None:
        try:
            self.handlers[job.name](job.payload)
        except Exception as e:  # noqa: BLE001 - every failure is recorded
            job.attempts += 1
            job.last_error = f"{type(e).__name__}: {e}"
            if self.policy.should_retry(job.attempts, e):
                job.due = self.clock() + self.policy.delay(job.attempts)
                heapq.heappush(self.heap, job)
                self.stats["retried"] += 1
                log.warning("retrying %s (%d): %s", job.name, job.attempts, job.last_error)
            else:
                self.dead.append(job)
                self.stats["dead"] += 1
                log.error("dead: %s after %d attempts: %s", job.name, job.attempts, job.last_error)
        else:
            self.stats["ok"] += 1

    def run_due(self, limit: int = 100) -> int:
        """Runs the jobs that are due, at most `limit`; returns how many ran."""
        ran = 0
        now = self.clock()
        while self.heap and self.heap[0].due <= now and ran < limit:
            self._run(heapq.heappop(self.heap))
            ran += 1
        return ran

    def dump(self) -> str:
        return json.dumps({"pending": len(self.heap), "dead": [j.name for j in self.dead], **self.stats})
'''

SYSTEM = "You are a senior software engineer. Answer briefly and precisely."


def chat(*turns, system=None):
    """Messages for the template: turns alternate user/assistant, ending with a user turn."""
    msgs = [{"role": "system", "content": system}] if system else []
    for i, t in enumerate(turns):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": t})
    return msgs


# name, kind, and either "text" (used as is) or "messages" (rendered through the model's template)
PROMPTS = [
    {"name": "code", "kind": "completion", "text": CODE},
    {"name": "code-short", "kind": "completion", "text": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"},
    {"name": "chat-code", "kind": "chat",
     "messages": chat("Write a C function that reverses a string in place.")},
    {"name": "chat-system", "kind": "chat",
     "messages": chat("What is the difference between a process and a thread?", system=SYSTEM)},
    {"name": "chat-zh", "kind": "chat", "messages": chat("用 Python 写一个快速排序函数，并解释它的时间复杂度。")},
    {"name": "chat-turns", "kind": "chat",
     "messages": chat("I have a list of numbers in Python. How do I remove duplicates?",
                      "Use `list(dict.fromkeys(xs))` to keep the order, or `set(xs)` if order does not matter.",
                      "And if the elements are dictionaries, which are not hashable?")},
    {"name": "zh", "kind": "completion", "text": CJK},
    {"name": "table", "kind": "completion", "text": TABLE},
    {"name": "long-en", "kind": "completion", "text": LONG_EN},
    {"name": "chat-review", "kind": "chat",
     "messages": chat("Review this module. List the two most important problems, each in one sentence.\n\n```python\n"
                      + LONG_CODE + "```", system=SYSTEM)},
]


def render(template, messages):
    """The model's chat template rendered as transformers' apply_chat_template renders it."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token="", eos_token="<|im_end|>")
