"""Multi-turn conversations: each turn's new user tokens and how many tokens its answer takes, to replay a chat.

A chat service sends each turn with the conversation before it, so a turn's prompt is mostly tokens the server has
seen, and it grows turn by turn: single prompts show neither. These are the turns, not the requests: the driver
sends turn k as the history so far (with the server's answers) and turn k's user tokens. :func:`read_conversations`
reads a ShareGPT file (``docs/infer.md``, "The request files, field by field"); :func:`synthetic_conversations`
draws seeded ones alike in shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from accelbench.errors import UsageError
from accelbench.params import opt, positive
from accelbench.results.details import Prompts
from accelbench.serve.sources.base import (
    Conversation,
    ConversationSet,
    RunSettings,
    Source,
    Turn,
    Work,
    asked_lengths,
    library_size,
)
from accelbench.serve.sources.prompts import (
    EMPTY_PROMPT,
    GPT_ROLES,
    HUMAN_ROLES,
    NO_ANSWER,
    NO_HUMAN,
    NO_TURNS,
    Skips,
    TemplateOptions,
    _prompt_ids,
    _stats,
    _text,
    check_broken,
    json_records,
    tell_skipped,
    template_choice,
)
from accelbench.serve.sources.tokenizer import Writable, load_tokenizer, writable

#: the roles of a turn before the conversation's first question, left out
SYSTEM_ROLES = ("system",)


class ConversationSettings(TypedDict, total=False):
    """How the conversations were read (a file's: the output tokens of an empty answer, the cap on answers, the
    turns kept of each, the conversations read at most) or made (synthetic ones: how many, their turns, each
    turn's user and answer tokens, the vocabulary and seed drawn from)."""

    output_tokens_default: int
    max_output_tokens: int | None
    max_turns: int | None
    limit: int | None
    count: int
    turns: int
    user_tokens: int
    answer_tokens: int
    vocab: int
    seed: int


class ConversationPrompts(Prompts, total=False):
    """``details.prompts`` of the conversations source: a file's container, chat template, records read and
    those skipped or cut short at a broken turn (how many for each reason, and where the first is), or how
    synthetic ones were drawn (``method``); then the conversations and turns served, their lengths (``{"mean",
    "min", "max"}``: turns a conversation, user tokens a turn and a first turn's, answer tokens), the turns with a
    reference answer, and the settings they were read or made with."""

    container: str
    chat_template: bool
    read: int
    skipped: dict[str, int]
    skipped_first: dict[str, str]
    cut_short: dict[str, int]
    cut_short_first: dict[str, str]
    method: str
    conversations: int
    turns: int
    turns_per_conversation: dict[str, float]
    user_tokens_per_turn: dict[str, float]
    first_turn_user_tokens: dict[str, float]
    answer_tokens: dict[str, float]
    with_reference: int
    settings: ConversationSettings


def read_conversations(
    path: str | Path,
    tokenizer: Any,
    *,
    output_tokens: int,
    max_output_tokens: int | None = None,
    max_turns: int | None = None,
    chat_template: bool | None = None,
    limit: int | None = None,
) -> ConversationSet:
    """The file's usable conversations, in file order, tokenized by ``tokenizer``.

    ``output_tokens``: generated for a turn whose answer tokenizes to nothing; any answer is capped at
    ``max_output_tokens``. ``max_turns``: the first K turns of each conversation. ``chat_template``: None applies the
    tokenizer's template when it has one. ``limit``: stop after this many usable conversations. Conversations skipped
    and those cut short are counted with where the first of each is, for :func:`.prompts.check_broken`."""
    _check_reading(output_tokens, max_output_tokens, max_turns, limit)
    use_template = template_choice(tokenizer, chat_template, "conversations")
    file = Path(path).expanduser()
    container, records, digest, places = _conversation_records(file)
    conversations: list[Conversation] = []
    skips, cut = Skips(), Skips()
    read = 0
    for record, place in zip(records, places, strict=True):
        if limit is not None and len(conversations) >= limit:
            break
        read += 1
        pairs = _pairs(record)
        if isinstance(pairs, str):
            skips.add(pairs, place)
            continue
        if _cut_at_empty_question(record, len(pairs)):
            cut.add(EMPTY_PROMPT, place)
        if max_turns is not None:
            pairs = pairs[:max_turns]
        conversations.append(Conversation(_turns(pairs, tokenizer, use_template, output_tokens, max_output_tokens)))
    if not conversations:
        why = ", ".join(f"{n} {reason}" for reason, n in skips.counts.most_common()) or "none usable"
        raise UsageError(
            f"conversation file {file} has no conversation with a human turn answered by a gpt turn "
            f"({read} read: {why})"
        )
    settings: ConversationSettings = {
        "output_tokens_default": output_tokens,
        "max_output_tokens": max_output_tokens,
        "max_turns": max_turns,
        "limit": limit,
    }
    summary: ConversationPrompts = {
        "file": str(file),
        "sha256": digest,
        "format": "sharegpt",
        "container": container,
        "chat_template": use_template,
        "read": read,
        "skipped": dict(skips.counts.most_common()),
        "skipped_first": dict(skips.first),
        "cut_short": dict(cut.counts),
        "cut_short_first": dict(cut.first),
        **_summary(conversations, settings),
    }
    return ConversationSet(conversations, summary)


def _check_reading(output_tokens: int, max_output_tokens: int | None, max_turns: int | None, limit: int | None) -> None:
    """A UsageError for a count :func:`read_conversations` cannot read with (each at least 1)."""
    for name, value in (("output tokens", output_tokens), ("the most output tokens", max_output_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be at least 1, not {value}")
    if max_turns is not None and max_turns < 1:
        raise UsageError(f"the most turns of a conversation must be at least 1, not {max_turns}")
    if limit is not None and limit < 1:
        raise UsageError(f"the number of conversations must be at least 1, not {limit}")


def _conversation_records(file: Path) -> tuple[str, list[Any], str, list[str]]:
    """The file's container, records, SHA-256 and each record's place; a UsageError where it holds none, or none
    with a ``conversations`` list (naming the keys it has)."""
    container, records, digest, places = json_records(
        file, "auto", "conversation file", "give a ShareGPT JSON or JSONL file"
    )
    if not records:
        raise UsageError(f"conversation file {file} is empty: give a ShareGPT JSON list, or one conversation a line")
    if not any(isinstance(r, dict) and isinstance(r.get("conversations"), list) for r in records):
        keys = sorted({str(k) for r in records[:100] if isinstance(r, dict) for k in r})
        found = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "") if keys else "none"
        raise UsageError(
            f"conversation file {file} has no 'conversations' list in any of its {len(records)} records: "
            f"give ShareGPT records; its keys: {found}"
        )
    return container, records, digest, places


def _turns(
    pairs: list[tuple[str, str | None]],
    tokenizer: Any,
    use_template: bool,
    output_tokens: int,
    max_output_tokens: int | None,
) -> list[Turn]:
    """A conversation's (question, answer) pairs as turns: the first through the chat template where it is used,
    later ones without special tokens (they continue a history that began with them), each generating its answer's
    tokens (``output_tokens`` for an empty answer), capped at ``max_output_tokens``."""
    turns = []
    for k, (question, answer) in enumerate(pairs):
        if k == 0:
            user = _prompt_ids(tokenizer, question, use_template)
        else:
            user = list(tokenizer(question, add_special_tokens=False)["input_ids"])
        answer_ids = len(tokenizer(answer, add_special_tokens=False)["input_ids"]) if answer else 0
        out = answer_ids or output_tokens
        cap = max_output_tokens
        turns.append(Turn(user, min(out, cap) if cap else out, answer if answer_ids else None))
    return turns


def synthetic_conversations(
    count: int,
    turns: int,
    user_tokens: int,
    answer_tokens: int,
    vocab: int,
    seed: int = 0,
    ids: Writable | None = None,
) -> ConversationSet:
    """``count`` conversations of ``turns`` turns, each turn ``user_tokens`` random ids (1..vocab-1, seeded: the same
    every run) answered by ``answer_tokens`` tokens. ``ids``: the run's tokenizer's ordinary tokens, which a turn's
    text holds (:class:`~.tokenizer.Writable`): each turn is drawn among them and settled to the ids its own text
    reads back as, so a server sent the text counts the tokens the record says (a drawn special token would leave
    the text)."""
    import numpy as np

    for name, value, least in (
        ("the number of conversations", count, 1),
        ("the turns of a conversation", turns, 1),
        ("the user tokens of a turn", user_tokens, 1),
        ("the answer tokens of a turn", answer_tokens, 1),
        ("the vocabulary (token ids 1..vocab-1 are drawn)", vocab, 2),
    ):
        if value < least:
            raise UsageError(f"{name} must be at least {least}, not {value}")
    rng = np.random.default_rng(seed)
    drawn = ids.vocab if ids is not None else vocab
    users = [[rng.integers(1, drawn, size=user_tokens).tolist() for _ in range(turns)] for _ in range(count)]
    method = f"random token ids 1..{vocab - 1} (seed {seed})"
    if ids is not None:
        settle = np.random.default_rng(seed + 1)
        users = [[ids.settled(ids.written(u), settle) for u in talk] for talk in users]
        method = f"random ordinary tokens of the tokenizer (seed {seed}), each turn's text read back as its ids"
    conversations = [Conversation([Turn(u, answer_tokens, None) for u in talk]) for talk in users]
    settings: ConversationSettings = {
        "count": count,
        "turns": turns,
        "user_tokens": user_tokens,
        "answer_tokens": answer_tokens,
        "vocab": vocab,
        "seed": seed,
    }
    summary: ConversationPrompts = {
        "file": "synthetic",
        "sha256": None,
        "format": "synthetic",
        "method": method,
        **_summary(conversations, settings),
    }
    return ConversationSet(conversations, summary)


def _pairs(record: Any) -> list[tuple[str, str | None]] | str:
    """A conversation's (question, answer) pairs, the answer None where its text is empty; or why none is usable."""
    turns = record.get("conversations") if isinstance(record, dict) else None
    if not isinstance(turns, list):
        return NO_TURNS
    roles = [t.get("from") if isinstance(t, dict) else None for t in turns]
    first = next((i for i, r in enumerate(roles) if r in HUMAN_ROLES), None)
    if first is None:
        return NO_HUMAN
    pairs: list[tuple[str, str | None]] = []
    for i in range(first, len(turns) - 1, 2):
        if roles[i] not in HUMAN_ROLES or roles[i + 1] not in GPT_ROLES:
            break
        question = _text(turns[i].get("value"))
        if question is None:
            break
        pairs.append((question, _text(turns[i + 1].get("value"))))
    if pairs:
        return pairs
    if _text(turns[first].get("value")) is None:
        return EMPTY_PROMPT
    return NO_ANSWER


def _cut_at_empty_question(record: dict[str, Any], kept: int) -> bool:
    """Whether the conversation ended after ``kept`` answered turns at a human turn without text: a broken row
    whose later turns are lost, where one ending at an unanswered question or a turn out of order is ShareGPT as
    published (:func:`_pairs`)."""
    turns = record["conversations"]
    roles = [t.get("from") if isinstance(t, dict) else None for t in turns]
    first = next(i for i, r in enumerate(roles) if r in HUMAN_ROLES)
    at = first + 2 * kept  # the turn the conversation ended at; turns followed it
    return at + 1 < len(turns) and roles[at] in HUMAN_ROLES and _text(turns[at].get("value")) is None


def _summary(conversations: list[Conversation], settings: ConversationSettings) -> ConversationPrompts:
    turns = [t for c in conversations for t in c.turns]
    return {
        "conversations": len(conversations),
        "turns": len(turns),
        "turns_per_conversation": _stats([len(c.turns) for c in conversations]),
        "user_tokens_per_turn": _stats([len(t.user) for t in turns]),
        "first_turn_user_tokens": _stats([len(c.turns[0].user) for c in conversations]),
        "answer_tokens": _stats([t.answer_tokens for t in turns]),
        "with_reference": sum(t.reference is not None for t in turns),
        "settings": settings,
    }


@dataclass(frozen=True)
class ConversationOptions(TemplateOptions):
    conversations: str = opt(
        "",
        "a ShareGPT file whose whole conversations are served turn by turn, each turn after the previous answer "
        "with its history (empty with --source conversations: synthetic ones of --turns turns)",
        sweep=False,
        metavar="FILE",
    )
    turns: int = opt(4, "turns of each synthetic conversation, the most kept of each of a file's", sweep=False)
    think_ms: float = opt(0.0, "a user's think time between an answer and the next turn", sweep=False)

    def check(self) -> None:
        super().check()
        positive("--turns", self.turns)
        if self.think_ms < 0:
            raise UsageError(f"--think-ms must not be negative, got {self.think_ms:g}")


class ConversationSource(Source):
    name = "conversations"
    about = "--conversations, or synthetic"
    Options = ConversationOptions
    replayed = True

    @classmethod
    def check_run(cls, params: RunSettings, options: ConversationOptions) -> None:
        if options.conversations:
            file = Path(options.conversations).expanduser()
            if not file.is_file():
                raise UsageError(f"conversation file {options.conversations} does not exist: give a ShareGPT file")
            if not params.tokenizer_dir:
                raise UsageError("--conversations needs --checkpoint DIR: its tokenizer turns the turns into tokens")
            # read as the run will: a bad file is one line before anything loads
            work = cls(options).work(params, 0, library_size(params), asked_lengths(params))
            tell_skipped(work.summary or {}, "conversations")

    def work(self, params: RunSettings, vocab: int, total: int, lengths: tuple[int, int]) -> Work:
        o: ConversationOptions = self.options
        tokenizer = None
        if o.conversations:
            tokenizer = load_tokenizer(params.tokenizer_dir)
            read = read_conversations(
                Path(o.conversations).expanduser(), tokenizer, output_tokens=lengths[1],
                max_output_tokens=params.output_tokens, max_turns=o.turns, chat_template=o.template, limit=total,
            )  # fmt: skip
            check_broken(read.summary, "conversations", "conversation file")
        else:  # in the tokenizer's ordinary tokens where the run names one
            ids = writable(params, vocab) if vocab else None
            read = synthetic_conversations(total, o.turns, lengths[0], lengths[1], max(vocab, 2), ids=ids)
        summary: Prompts = {"source": self.name, **read.summary, "think_ms": o.think_ms}
        return Work.talks(read.conversations, summary, tokenizer)

    @classmethod
    def describe_words(cls, settings: dict[str, Any]) -> list[str]:
        name = Path(str(settings.get("conversations") or "")).name
        return [f"conversations {name}" if name else f"conversations of {settings.get('turns', 4)} turns"]
