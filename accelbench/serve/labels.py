"""What a serving record's label says against what ran: its ``input_tokens``/``output_tokens`` and its engine are
the run's identity, as asked, so where the requests sent, the server's own count of them, or the engine's compiled
path differ, the record carries a concern saying so (and the figures stay those of what ran)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.results.details import EngineFacts
    from accelbench.results.record import Result
    from accelbench.serve.specs import LLMServeParams
    from accelbench.serve.sut import TokenSUT


#: standard errors of the drawn prompts' mean a run's sent mean may stray from its expected mean by chance
SENT_MEAN_ERRORS = 3.0
#: tokens a sent mean may miss what was asked by where every request asked the same (a record rounds a mean)
ROUNDING_TOKENS = 0.5


def jittered_prompts(length: int, jitter: float) -> tuple[int, float, float]:
    """The random source's prompt lengths for ``--input-tokens length --input-jitter jitter``: the shortest,
    the expected mean and one draw's standard deviation. :func:`accelbench.serve.limits.draw_prompts`
    draws each length uniformly from the integers ``round(length * jitter)..length``, so the mean a user asked
    for is their midpoint (115 for 128 at 0.8), not ``length``, and n equally likely values spread by
    sqrt((n^2 - 1) / 12)."""
    low = max(1, int(round(length * jitter)))
    n = length - low + 1
    return low, (low + length) / 2, math.sqrt((n * n - 1) / 12)


def sent_tolerance(sd: float, library: int, requests: int) -> float:
    """How far a run's mean prompt may stray from the jitter's expected mean by chance: LoadGen draws its
    ``requests`` (with repeats) from a library of ``library`` prompts that were themselves drawn, so the sent mean's
    variance is sd^2 (1/library + 1/requests); :data:`SENT_MEAN_ERRORS` standard errors of it, and never under a
    rounding's :data:`ROUNDING_TOKENS` (no jitter: every prompt is the asked length, exactly)."""
    error = sd * math.sqrt(1 / max(library, 1) + 1 / max(requests, 1))
    return max(SENT_MEAN_ERRORS * error, ROUNDING_TOKENS)


def flag_lengths(result: Result, params: LLMServeParams, sut: "TokenSUT", engine: EngineFacts) -> None:
    """A concern where what was sent is not what the record's label says (its ``input_tokens``/``output_tokens``,
    the run's identity, stay as asked): the mean prompt off the jitter's expected mean by more than chance
    (:func:`sent_tolerance`), or the answers short of the asked tokens where the end of sequence was not ignored
    (``--allow-eos``, or a server that refuses ``ignore_eos``: it stops where the model says so). Only the random
    source's prompt lengths are judged: a file's or a data set's record states its prompts' own mean already."""
    from accelbench.loadgen.params import QSL_SAMPLES
    from accelbench.serve.sources.random_tokens import RandomOptions

    if not sut.samples:
        return
    asked_in, asked_out = int(result.params["input_tokens"]), int(result.params["output_tokens"])
    mean_in, mean_out = sut.input_tokens / sut.samples, sut.tokens / sut.samples
    server_took = bool(engine.get("ignore_eos_sent", True))
    ignore_eos = not params.allow_eos and server_took
    said: list[str] = []
    data: dict[str, Any] = {"asked_in": asked_in, "asked_out": asked_out, "mean_in": mean_in, "mean_out": mean_out}
    options = params.source_opts
    if isinstance(options, RandomOptions):
        low, expected, sd = jittered_prompts(asked_in, options.input_jitter)
        tolerance = sent_tolerance(sd, QSL_SAMPLES.get(params.profile, sut.samples), sut.samples)
        data |= {"expected_in": expected, "tolerance_in": tolerance}
        if abs(mean_in - expected) > tolerance:
            drawn = f", drawn {low}..{asked_in}" if low < asked_in else ""
            said.append(f"prompts of {mean_in:.1f} tokens on average ({expected:g} expected{drawn})")
    if not ignore_eos and mean_out < asked_out - ROUNDING_TOKENS:
        why = "--allow-eos" if params.allow_eos else "the server refused ignore_eos"
        said.append(f"answers of {mean_out:.1f} tokens on average: the end of sequence was not ignored ({why})")
    if sut.one_token:  # no time per output token: LoadGen logs an error for each and a TPOT without them
        data["one_token"] = sut.one_token
        said.append(
            f"{sut.one_token} of {sut.samples} answered in one token, with no time per output token (the requests "
            "file's rows of one output token)"
        )
    if said:
        text = f"lengths differ: asked {asked_in}/{asked_out} tokens, sent " + "; ".join(said)
        result.concern("lengths-differ", text, **data, ignore_eos=ignore_eos)


#: how far the server's mean prompt may be from the one sent before the record says so: a token, or 1% of it
SERVER_LENGTH_SLACK = (1.0, 0.01)


def flag_server_lengths(result: Result, client: dict[str, Any]) -> None:
    """A concern where the server read other prompts than the run sent: a remote engine sends text, which the
    server tokenizes again, and adds what its chat template or BOS token adds; the figures are of the server's
    prompts, the record's lengths of the sent ones. Both means are of the same requests (the answered ones the
    server counted: the client keeps both) and are kept in the concern's data."""
    server, sent = client.get("server_prompt_tokens_mean"), client.get("sent_prompt_tokens_mean")
    if not isinstance(server, (int, float)) or not isinstance(sent, (int, float)):
        return
    if abs(server - sent) > max(SERVER_LENGTH_SLACK[0], SERVER_LENGTH_SLACK[1] * sent):
        result.concern(
            "server-lengths",
            f"the server read prompts of {server:.1f} tokens on average, {sent:.1f} sent: it tokenizes the text "
            "again (a chat template, a BOS token, or a tokenizer other than --tokenizer's)",
            sent_in=sent,
            server_in=float(server),
        )


def flag_compile_fallback(result: Result, engine: EngineFacts) -> None:
    """A compiled engine whose later batches ran eager (Dynamo's recompile limit) is labelled compiled all the same:
    the concern says which of its figures are not the compiled engine's."""
    if engine.get("compile_held") is False:
        result.concern("compile-fallback", f"compile fell back to eager: {engine.get('compile_fallback', '')}")
