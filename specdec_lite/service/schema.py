"""The HTTP API's request and response bodies, as pydantic models.

``POST /v1/completions`` takes the fields that clients of OpenAI-compatible servers send
(``prompt``, ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stream``; ``model`` and
``n=1`` are accepted so such clients work unchanged) plus this project's own: ``method``
(how tokens are drafted), ``k`` (draft length), ``policy`` (how the draft length is chosen
at each step, as in ``speculative_generate``: ``fixed``, ``heuristic``, ``confidence`` or
``auto``) and ``request_id`` (an idempotency key: a client
that retries with the same id gets the same generation, finished, even across a server
restart). Of OpenAI's other fields, ``stop`` (a string or up to four; the text ends before
the first one, with ``finish_reason`` "stop"), ``user`` (accepted, never logged),
``stream_options.include_usage`` and the defaults ``echo=false`` and ``logprobs=null`` are
taken; other values of ``echo`` and ``logprobs`` are a 422 naming them. Unknown fields are
refused, so a misspelt option is a 422 naming it rather than a silently ignored setting.
Types are strict: ``"32"``, ``true`` or ``32.0`` is not a ``max_tokens`` and ``"yes"`` is
not a ``stream`` (an integer is still a ``temperature``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

METHODS = ("plain", "draft", "ngram", "lookup", "eagle", "early-exit", "medusa")

# Largest prompt the API takes, in characters (the tokenizer is one token per character).
MAX_PROMPT_CHARS = 200
MAX_NEW_TOKENS = 200
DEFAULT_K = 4  # draft tokens per step when a request names no k


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    include_usage: bool = False


StopString = Annotated[str, Field(min_length=1, max_length=32)]


class CompletionRequest(BaseModel):
    """One completion request. Bounds here are the API's; the server also refuses a prompt
    plus ``max_tokens`` that would pass the model's context window."""

    model_config = ConfigDict(extra="forbid", strict=True)

    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    max_tokens: int = Field(default=32, ge=1, le=MAX_NEW_TOKENS)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    stream: bool = False
    method: Literal["plain", "draft", "ngram", "lookup", "eagle", "early-exit",
                    "medusa"] = "draft"
    k: int = Field(default=DEFAULT_K, ge=1, le=16)
    policy: Literal["fixed", "heuristic", "confidence", "specdec++", "auto"] = "fixed"
    request_id: str | None = Field(default=None, min_length=1, max_length=64,
                                   pattern=r"^[A-Za-z0-9_.-]+$")
    model: str | None = Field(default=None, max_length=64)
    n: Literal[1] = 1
    stop: StopString | Annotated[list[StopString], Field(min_length=1, max_length=4)] | None = None
    user: str | None = Field(default=None, max_length=256)
    echo: Literal[False] = False
    logprobs: None = None
    stream_options: StreamOptions | None = None

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class SpecStats(BaseModel):
    """The speculative statistics of one generation, with the book's names."""

    method: str
    k: int
    policy: str
    alpha: float  # accepted / checked draft tokens
    tau: float  # emitted tokens per target call
    n_target_calls: int
    n_draft_calls: int
    n_head_calls: int
    n_fallbacks: int


class Choice(BaseModel):
    index: int = 0
    text: str
    finish_reason: Literal["length", "stop", "error"]


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    spec: SpecStats
