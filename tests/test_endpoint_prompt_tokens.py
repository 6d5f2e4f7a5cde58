"""Random prompts sent as text hold the tokens the run records: the server counts what the run says it sent.

The endpoint engine sends each prompt as its decoded text and the server tokenizes it again, so a drawn special
token (dropped from the text) or drawn tokens whose text reads back otherwise (a byte-level BPE's merges) would
have the server read other lengths than the record's. Against the stub server, which counts prompt tokens with the
served tokenizer, and a byte-level BPE trained here.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import writer_misfits

pytest.importorskip("aiohttp")
pytest.importorskip("transformers")

from accelbench.serve.limits import draw_prompts  # noqa: E402
from accelbench.serve.sources.prefix import Salt  # noqa: E402
from accelbench.serve.sources.random_tokens import RandomSource, WrittenSalt  # noqa: E402
from accelbench.serve.sources.tokenizer import Writable  # noqa: E402
from accelbench.serve.specs import LLMServeParams  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from llm_server import make_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("prompt-tokens-ckpt"))


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE of 2,000 tokens (two of them special), trained on Python modules' source: drawn tokens'
    text reads back as other tokens, as Llama-3's and GPT-2's do."""
    import asyncio
    import json
    import logging

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [inspect.getsource(m) for m in (asyncio, json, logging, inspect)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    folder = tmp_path_factory.mktemp("bpe")
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>").save_pretrained(str(folder))
    return folder


def params(tokenizer: Path, **kw: Any) -> LLMServeParams:
    base = dict(model="llama3.1-8b", scale="tiny", engine="endpoint", url="http://127.0.0.1:1/v1",
                tokenizer=str(tokenizer), input_tokens=64, output_tokens=4)  # fmt: skip
    return LLMServeParams.of(**(base | kw))


def test_the_server_counts_the_prompt_tokens_the_record_says_were_sent(checkpoint: Path, tmp_path: Path) -> None:
    """The tiny word-level tokenizer's <s> and </s> are ids 1 and 2 of 303, which a prompt's text cannot carry: the
    stub, counting with the served tokenizer, reads exactly the 128 tokens a request was drawn with."""
    from accelbench.serve.engines.endpoint.stub import MODEL, Behaviour, serving
    from accelbench.suite.suites import make_entry
    from accelbench.suite.worker import run_inline

    values = dict(model="llama3.1-8b", scale="tiny", engine="endpoint", tokenizer=str(checkpoint), served_model=MODEL,
                  scenario="offline", input_tokens=128, input_jitter=1.0, output_tokens=4, duration=0.5)  # fmt: skip
    with serving(Behaviour(tokenizer=str(checkpoint))) as url:
        (record,) = run_inline(make_entry("infer/llm", values | {"url": url}), tmp_path)
    assert record.status == "ok", record.error
    details = record.details
    sent = details["input_tokens"] / details["requests"]
    assert sent == 128 and details["client"]["server_prompt_tokens_mean"] == sent, details["client"]
    assert not any(c.kind == "server-lengths" for c in record.concerns), record.warnings
    assert details["engine"]["engine"] == "endpoint" and writer_misfits(record) == []  # as EndpointFacts says


def test_random_prompts_hold_only_ordinary_tokens_and_read_back_as_drawn(checkpoint: Path, bpe: Path) -> None:
    """Each prompt is the ids its own text reads back as, at the drawn length, with no special token; a shared
    prefix stays shared; the salt writes ordinary tokens and keeps requests distinct."""
    from transformers import AutoTokenizer

    for folder in (checkpoint, bpe):
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        special = set(tok.all_special_ids)
        p = params(folder, input_jitter=0.5, prefix_tokens=16)
        work = RandomSource(p.source_opts).work(p, len(tok), 64, (64, 4))
        assert [len(w) for w in work.prompts] == [len(d) for d in draw_prompts(64, 64, 0.5, 2)]
        for prompt in work.prompts:
            assert not special & set(prompt), prompt
            assert tok.encode(tok.decode(prompt), add_special_tokens=False) == prompt
        texts = {tok.decode(w[:12]) for w in work.prompts}  # the prefix's first tokens: one text for all
        assert len(texts) == 1, texts
        assert isinstance(work.salt, WrittenSalt)
        salted = [work.salt(i % 64, work.prompts[i % 64]) for i in range(300)]
        assert not special & {t for s in salted for t in s}
        assert len({tuple(s) for s in salted}) == 300
        assert [len(s) for s in salted[:64]] == [len(w) for w in work.prompts]


def test_drawn_ids_stand_for_the_ordinary_tokens_one_to_one(checkpoint: Path) -> None:
    """The word-level tokenizer's ordinary tokens are ids 3..302: the 300 drawn ids 1..300 are written as them, each
    its own, so a uniform draw stays uniform and a salt's count stays distinct."""
    from transformers import AutoTokenizer

    ids = Writable(AutoTokenizer.from_pretrained(str(checkpoint), local_files_only=True), 303)
    assert ids.vocab == 301 and ids.written(range(1, 301)) == list(range(3, 303))
    assert Writable(ids.tokenizer, 100).ids == list(range(3, 100))  # none past the run's vocabulary
    salt, plain = WrittenSalt([0], ids, offset=5000), Salt([0], ids.vocab, offset=5000)
    for _ in range(3):  # the same count as the plain salt's, written
        assert salt(0, [7, 7, 7]) == ids.written(plain(0, [1, 1, 1])[:2]) + [7]


def test_without_a_tokenizer_ids_are_drawn_as_a_model_reads_them(tmp_path: Path) -> None:
    """A run that names no tokenizer (random weights built here) draws ids 1..vocab-1, as that model reads them."""
    p = LLMServeParams.of(model="llama3.1-8b", scale="tiny", input_tokens=64, output_tokens=4)
    work = RandomSource(p.source_opts).work(p, 500, 64, (64, 4))
    assert work.prompts == draw_prompts(64, 64, 1.0, 500) and type(work.salt) is Salt  # every one 64 long


def _served_against_the_stub(checkpoint: Path, tmp_path: Path, **values: Any) -> Any:
    """A run of the endpoint engine against the stub, which counts each prompt with the served tokenizer and
    answers with one of its words (an answer in a conversation's history is then ordinary tokens too)."""
    from llm_server import WORDS

    from accelbench.serve.engines.endpoint.stub import MODEL, Behaviour, serving
    from accelbench.suite.suites import make_entry
    from accelbench.suite.worker import run_inline

    base = dict(model="llama3.1-8b", scale="tiny", engine="endpoint", tokenizer=str(checkpoint), served_model=MODEL,
                scenario="server", output_tokens=4)  # fmt: skip
    with serving(Behaviour(tokenizer=str(checkpoint), word=WORDS[7])) as url:
        (record,) = run_inline(make_entry("infer/llm", base | values | {"url": url}), tmp_path)
    assert record.status == "ok", record.error
    return record


def test_a_traces_and_conversations_prompts_are_counted_by_the_server_as_the_record_says(
    checkpoint: Path, tmp_path: Path
) -> None:
    """A trace's synthesized prompts and synthetic conversations' turns are drawn among the tokenizer's ordinary
    tokens, so the stub reads each request at the length the record says was sent: ids drawn among 1..302 would
    hold the word-level tokenizer's <s> and </s> (ids 1 and 2), which leave the text (the stub read 63.5 tokens a
    trace's request where the record said 64, and 97.2 a conversation's turn where it said 98)."""
    import json

    rows = [{"timestamp": i * 0.02, "input_tokens": 48 + (i % 3) * 16, "output_tokens": 4} for i in range(24)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for values in ({"trace": str(trace)}, {"source": "conversations", "turns": 2, "input_tokens": 64}):
        record = _served_against_the_stub(checkpoint, tmp_path, **values)
        details = record.details
        sent = details["input_tokens"] / details["requests"]
        assert details["client"]["server_prompt_tokens_mean"] == pytest.approx(sent), (values, details["client"])
        assert not any(c.kind == "server-lengths" for c in record.concerns), record.warnings
        assert "ordinary tokens of the tokenizer" in details["prompts"]["method"]


def test_a_traces_shared_blocks_and_a_files_shared_prefix_are_written_in_ordinary_tokens(
    checkpoint: Path, bpe: Path, tmp_path: Path
) -> None:
    """A trace's rows that share a hash id still share that block's tokens (the word-level tokenizer's whole; a
    byte-level BPE's but for a block's last tokens, where the text after it differs), every prompt holds no special
    token and reads back as itself; a prompt file's shared prefix is ordinary tokens the text holds, one for all."""
    import json

    from llm_server import WORDS
    from transformers import AutoTokenizer

    from accelbench.serve.sources.prompts import FileSource
    from accelbench.serve.sources.traces import TraceSource

    rows = [{"timestamp": i, "input_length": 600, "output_length": 4, "hash_ids": [1, 2 + i]} for i in range(6)]
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"prompt": " ".join(WORDS[i : i + 5])}) + "\n" for i in range(5)))
    for folder in (checkpoint, bpe):
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        special = set(tok.all_special_ids)
        p = params(folder, trace=str(trace), scenario="server")
        work = TraceSource(p.source_opts).work(p, len(tok), 6, (64, 4))
        assert [len(w) for w in work.prompts] == [600] * 6
        for prompt in work.prompts:
            assert not special & set(prompt), prompt
            assert tok.encode(tok.decode(prompt), add_special_tokens=False) == prompt
        shared = 512 if folder == checkpoint else 480  # Mooncake's blocks are 512 tokens: the first is every row's
        assert len({tuple(w[:shared]) for w in work.prompts}) == 1 and len({tuple(w) for w in work.prompts}) == 6
        f = params(folder, prompts=str(qa), prefix_tokens=12, chat_template="off")
        made = FileSource(f.source_opts).work(f, len(tok), 5, (64, 4))
        head = int(made.prompts[0][0] == tok.bos_token_id)  # after the BOS where the tokenizer writes one
        heads = {tuple(w[head : head + 12]) for w in made.prompts}
        assert len(heads) == 1 and not special & set(next(iter(heads)))
        assert tok.encode(tok.decode(list(next(iter(heads)))), add_special_tokens=False) == list(next(iter(heads)))
        assert made.summary is not None and "ordinary tokens" in made.summary["prefix"]["method"]
