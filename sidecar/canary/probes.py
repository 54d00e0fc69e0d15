"""The canary probe set: a versioned JSON file of fixed probes, shipped with a default
(`default_probes.json`) and replaceable through `VIGIL_CANARY_PROBES_PATH`.

Three kinds of probe:
- `chat`: messages through `/v1/chat/completions`, greedy, `max_tokens` tokens with logprobs;
- `tokens`: raw prompt token ids through `/v1/completions` (no chat template, no tokenizer);
- `perplexity`: a reference text through `/v1/completions` with `echo` + `logprobs`: the
  logprob of each of its tokens given the ones before, and its perplexity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_PROBES_PATH = Path(__file__).with_name("default_probes.json")
MAX_PROBE_FILE_BYTES = 4 * 1024 * 1024


class ProbeSetError(ValueError):
    """The probe file is missing, unreadable or invalid; the message says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class Message(_Strict):
    role: Literal["system", "user", "assistant"]
    content: Annotated[str, Field(min_length=1)]


Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")]


class Probe(_Strict):
    name: Name
    kind: Literal["chat", "tokens", "perplexity"]
    max_tokens: Annotated[int, Field(ge=1, le=256)] = 16
    messages: list[Message] | None = None
    prompt_token_ids: list[Annotated[int, Field(ge=0)]] | None = None
    text: str | None = None  # tokens: what the ids spell (for people); perplexity: the reference

    @model_validator(mode="after")
    def _fields_for_kind(self) -> Probe:
        need = {"chat": "messages", "tokens": "prompt_token_ids", "perplexity": "text"}[self.kind]
        if not getattr(self, need):
            raise ValueError(f"a {self.kind} probe needs a non-empty `{need}`")
        return self


class Calibration(_Strict):
    repeats: Annotated[int, Field(ge=1, le=20)] = 3  # runs alone and runs in a busy batch, each
    fillers: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    filler_copies: Annotated[int, Field(ge=0, le=64)] = 2  # each filler sent this many times


class ProbeSet(_Strict):
    version: Annotated[str, Field(min_length=1, max_length=64)]
    description: str = ""
    seed: int = 0
    calibration: Calibration = Calibration()
    probes: Annotated[list[Probe], Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _unique_names(self) -> ProbeSet:
        names = [p.name for p in self.probes]
        if len(set(names)) != len(names):
            raise ValueError("probe names must be unique")
        return self


def parse_probe_set(raw: bytes | str, source: str = "probe set") -> ProbeSet:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProbeSetError(f"{source}: not valid JSON ({exc})") from None
    try:
        return ProbeSet.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise ProbeSetError(f"{source}: {where}: {first['msg']}") from None


def load_probe_set(path: Path | str | None = None) -> ProbeSet:
    """The probe set at `path`, or the shipped default."""
    file = Path(path) if path is not None else DEFAULT_PROBES_PATH
    try:
        with file.open("rb") as fh:
            raw = fh.read(MAX_PROBE_FILE_BYTES + 1)
    except OSError as exc:
        raise ProbeSetError(f"canary probe file {file}: {exc.strerror or exc}") from None
    if len(raw) > MAX_PROBE_FILE_BYTES:
        raise ProbeSetError(f"canary probe file {file}: larger than {MAX_PROBE_FILE_BYTES} bytes")
    return parse_probe_set(raw, f"canary probe file {file}")
