"""Multi-turn conversations read from a small ShareGPT file with the prompt tests' word-level tokenizer (one token a
word, ``:`` its own token, ``<s>`` before a prompt read without a template), and synthetic ones, seeded.

With the template, a first turn of n words is ``<s> user : <n words> \\n assistant :``: n + 5 tokens (the newline is
no token); without it, ``<s> <n words>``: n + 1. A later turn is its n words alone, as is an answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_llm_prompts import TEMPLATE, save_tokenizer

from accelbench.errors import UsageError
from accelbench.serve.sources.base import Conversation, ConversationSet, Turn
from accelbench.serve.sources.conversations import read_conversations, synthetic_conversations
from accelbench.serve.sources.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_tokenizer(save_tokenizer(tmp_path_factory.mktemp("ckpt"), TEMPLATE))


def chat(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"conversations": [{"from": who, "value": text} for who, text in pairs]}


CHATS = [
    chat(  # a system turn first, three answered turns
        ("system", "be brief"),
        ("human", "what is two plus two"),
        ("gpt", "four"),
        ("human", "what is two plus four"),
        ("gpt", "the cat sat"),
        ("human", "hello"),
        ("gpt", "hello the cat sat on a mat"),
    ),
    chat(  # three answered turns, then a question left unanswered: the conversation ends before it
        ("human", "the dog ran"),
        ("gpt", "a cat sat on the mat"),
        ("human", "what sat"),
        ("gpt", "the cat"),
        ("human", "what ran"),
        ("gpt", "the dog"),
        ("human", "be brief"),
    ),
    chat(("system", "be brief"), ("human", "hello")),  # no answer at all: skipped
    {"id": 7},  # no conversations list: skipped
    chat(  # user/assistant roles, five turns, an empty answer in the middle
        ("user", "hello"),
        ("assistant", "hello"),
        ("user", "what is a cat"),
        ("assistant", "a cat is a cat"),
        ("user", "what is a dog"),
        ("assistant", "   "),
        ("user", "two plus two"),
        ("assistant", "four"),
        ("user", "what is four plus four"),
        ("assistant", "two plus two plus two plus two"),
    ),
    chat(("gpt", "hello"), ("gpt", "what")),  # no human turn: skipped
]


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def shape(conversations: ConversationSet) -> list[list[tuple[int, int]]]:
    return [[(len(t.user), t.answer_tokens) for t in c.turns] for c in conversations.conversations]


def test_turns_answers_and_summary(tmp_path: Path, tokenizer: Any) -> None:
    path = write(tmp_path / "sharegpt.json", CHATS)
    got = read_conversations(path, tokenizer, output_tokens=9)
    assert shape(got) == [
        [(5 + 5, 1), (5, 3), (1, 7)],
        [(3 + 5, 6), (2, 2), (2, 2)],
        [(1 + 5, 1), (4, 5), (4, 9), (3, 1), (5, 7)],  # the empty answer generates output_tokens
    ]
    first = got.conversations[0].turns
    assert tokenizer.convert_ids_to_tokens(first[0].user) == "<s> user : what is two plus two assistant :".split()
    assert first[1] == Turn(tokenizer("what is two plus four", add_special_tokens=False)["input_ids"], 3, "the cat sat")
    assert [t.reference for t in got.conversations[2].turns][2:4] == [None, "four"]
    for conversation in got.conversations:  # an answer generates its reference's token count
        for turn in conversation.turns:
            if turn.reference is not None:
                assert turn.answer_tokens == len(tokenizer(turn.reference, add_special_tokens=False)["input_ids"])
    assert got.turns == 11
    summary = got.summary
    assert summary["format"] == "sharegpt" and summary["container"] == "json" and summary["chat_template"] is True
    assert summary["file"] == str(path) and len(summary["sha256"]) == 64
    assert summary["read"] == 6 and summary["conversations"] == 3 and summary["turns"] == 11
    assert summary["skipped"] == {
        "no gpt answer after the first human turn": 1,
        "no conversations list": 1,
        "no human turn": 1,
    }
    assert summary["turns_per_conversation"] == {"mean": 3.67, "min": 3, "max": 5}
    assert summary["answer_tokens"] == {"mean": round(44 / 11, 2), "min": 1, "max": 9}
    assert summary["user_tokens_per_turn"]["mean"] == round(50 / 11, 2)
    assert summary["first_turn_user_tokens"] == {"mean": 8.0, "min": 6, "max": 10}
    assert summary["with_reference"] == 10
    assert summary["settings"] == {
        "output_tokens_default": 9,
        "max_output_tokens": None,
        "max_turns": None,
        "limit": None,
    }


def test_caps_template_and_jsonl(tmp_path: Path, tokenizer: Any) -> None:
    path = tmp_path / "sharegpt.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in CHATS) + "\n")
    got = read_conversations(
        path, tokenizer, output_tokens=9, max_output_tokens=4, max_turns=2, chat_template=False, limit=2
    )
    assert shape(got) == [[(5 + 1, 1), (5, 3)], [(3 + 1, 4), (2, 2)]]  # no template: <s> and the words
    assert got.summary["container"] == "jsonl" and got.summary["chat_template"] is False
    assert got.summary["read"] == 2 and got.summary["skipped"] == {}
    one = write(tmp_path / "one.json", CHATS[0])  # a file of one conversation, not a list
    assert shape(read_conversations(one, tokenizer, output_tokens=9, max_turns=1)) == [[(10, 1)]]


def test_synthetic_conversations() -> None:
    made = synthetic_conversations(count=4, turns=3, user_tokens=12, answer_tokens=7, vocab=500, seed=2)
    assert made == synthetic_conversations(4, 3, 12, 7, 500, 2)  # the same every run
    assert made != synthetic_conversations(4, 3, 12, 7, 500, 3)
    assert shape(made) == [[(12, 7)] * 3] * 4
    tokens = [t for c in made.conversations for turn in c.turns for t in turn.user]
    assert all(1 <= t < 500 for t in tokens) and len(set(tokens)) > 40
    assert all(isinstance(c, Conversation) and c.turns[0].reference is None for c in made.conversations)
    summary = made.summary
    assert summary["file"] == "synthetic" and summary["format"] == "synthetic" and summary["sha256"] is None
    assert summary["conversations"] == 4 and summary["turns"] == 12
    assert summary["settings"] == {
        "count": 4,
        "turns": 3,
        "user_tokens": 12,
        "answer_tokens": 7,
        "vocab": 500,
        "seed": 2,
    }


# --- bad input: one line each ---------------------------------------------------------------------------------------


def message(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(UsageError) as info:
        call(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text
    return text


def test_bad_files(tmp_path: Path, tokenizer: Any) -> None:
    read = read_conversations
    missing = tmp_path / "nope.json"
    assert message(read, missing, tokenizer, output_tokens=8) == (
        f"conversation file {missing} does not exist: give a ShareGPT JSON or JSONL file"
    )
    broken = tmp_path / "broken.json"
    broken.write_text('[{"conversations": [}]')
    assert message(read, broken, tokenizer, output_tokens=8).startswith(
        f"conversation file {broken} is not JSON: line 1: "
    )
    lines = tmp_path / "broken.jsonl"
    lines.write_text(json.dumps(CHATS[0]) + "\n{oops\n")
    assert message(read, lines, tokenizer, output_tokens=8).startswith(
        f"conversation file {lines} is not JSONL: line 2 is not JSON ("
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert message(read, empty, tokenizer, output_tokens=8) == (
        f"conversation file {empty} is empty: give a ShareGPT JSON list, or one conversation a line"
    )
    prompts = write(tmp_path / "prompts.json", [{"prompt": "hello", "output": "hello"}, {"id": 2}])
    assert message(read, prompts, tokenizer, output_tokens=8) == (
        f"conversation file {prompts} has no 'conversations' list in any of its 2 records: give ShareGPT records; "
        "its keys: id, output, prompt"
    )
    unanswered = write(tmp_path / "unanswered.json", CHATS[2:4] + CHATS[5:] + [chat(("human", " "), ("gpt", "hi"))])
    assert message(read, unanswered, tokenizer, output_tokens=8) == (
        f"conversation file {unanswered} has no conversation with a human turn answered by a gpt turn (4 read: "
        "1 no gpt answer after the first human turn, 1 no conversations list, 1 no human turn, 1 empty prompt)"
    )
    good = write(tmp_path / "good.json", CHATS)
    assert message(read, good, tokenizer, output_tokens=0) == "output tokens must be at least 1, not 0"
    assert message(read, good, tokenizer, output_tokens=8, max_turns=0) == (
        "the most turns of a conversation must be at least 1, not 0"
    )
    assert message(read, good, tokenizer, output_tokens=8, limit=0) == (
        "the number of conversations must be at least 1, not 0"
    )


def test_bad_synthetic() -> None:
    make = synthetic_conversations
    assert message(make, 0, 3, 10, 5, 100) == "the number of conversations must be at least 1, not 0"
    assert message(make, 2, 0, 10, 5, 100) == "the turns of a conversation must be at least 1, not 0"
    assert message(make, 2, 3, 0, 5, 100) == "the user tokens of a turn must be at least 1, not 0"
    assert message(make, 2, 3, 10, 0, 100) == "the answer tokens of a turn must be at least 1, not 0"
    assert message(make, 2, 3, 10, 5, 1).startswith(
        "the vocabulary (token ids 1..vocab-1 are drawn) must be at least 2"
    )
