"""A real OpenAI-compatible server for the endpoint engine's tests: ``transformers serve`` on 127.0.0.1, serving a
tiny random-weight Llama and a word-level tokenizer built here, offline.

The model's config names no end-of-sequence token, so a server that does not take ``ignore_eos`` (transformers
serve ignores it) still generates every token asked for: the lengths the tests count are the asked ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

#: words of the tokenizer: 300 made-up ones, so random prompts decode to words and back to as many tokens
WORDS = [a + b + c for a in "bdklmst" for b in "aeiou" for c in ("", "n", "r", "l", "s", "m", "x", "z", "p")][:300]


def make_checkpoint(folder: Path) -> Path:
    """A save_pretrained folder: a 2-layer Llama (64 wide, heads of 32) and its word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(str(folder))
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=None,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = None
    model.save_pretrained(str(folder))
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving_command() -> list[str] | None:
    """How to start ``transformers serve`` here, or None where its extra (fastapi, uvicorn) is missing."""
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("fastapi", "uvicorn", "transformers")):
        return None
    exe = shutil.which("transformers") or str(Path(sys.executable).with_name("transformers"))
    return [exe, "serve"] if Path(exe).exists() else None


@contextlib.contextmanager
def started(
    command: list[str],
    ready: str,
    log: Path,
    env: dict[str, str] | None = None,
    cpus: set[int] | None = None,
    timeout: float = 180.0,
) -> Iterator[subprocess.Popen]:
    """``command`` running (on ``cpus``, its output in ``log``) once ``ready`` answers 200, until the block ends."""
    pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=pin)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with urllib.request.urlopen(ready, timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{command[0]} did not start: {log.read_text()[-2000:]}")
                time.sleep(0.5)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def transformers_serve(folder: Path, cache: Path, cpus: set[int] | None = None) -> Iterator[str]:
    """``transformers serve FOLDER`` on a free port, until the block ends; yields its API base (…/v1).

    Its KV cache is 256 pages of 32 tokens (left to itself it sized the cache to 14 GiB of a 23 GiB machine and
    was killed for memory beside other work), and torch runs one thread (an OpenMP team of two on 2 cores, shared
    with LoadGen and the client, stalled whenever anything else ran: 20x slower runs seen)."""
    command = serving_command()
    assert command is not None, "transformers serve is not installed: pip install 'transformers[serving]'"
    port = free_port()
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(cache),
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    args = [
        str(folder),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--continuous-batching",
        "--device",
        "cpu",
        "--cb-num-blocks",
        "256",
        "--cb-block-size",
        "32",
    ]
    base = f"http://127.0.0.1:{port}"
    with started([*command, *args], f"{base}/health", cache / "serve.log", env, cpus):
        yield f"{base}/v1"
