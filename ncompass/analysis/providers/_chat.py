"""A client for any OpenAI-compatible chat completions endpoint, configured by environment."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ncompass import environment_variables
from ncompass.analysis.providers._http import (
    HttpFailure,
    describe_error,
    error_detail,
    request_json,
)

LLM_URL_ENV = environment_variables.NCOMPASS_LLM_URL
LLM_MODEL_ENV = environment_variables.NCOMPASS_LLM_MODEL
LLM_API_KEY_ENV = environment_variables.NCOMPASS_LLM_API_KEY
LLM_TIMEOUT_ENV = environment_variables.NCOMPASS_LLM_TIMEOUT_S
DEFAULT_TIMEOUT_S = 60.0

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


class InvalidAnswer(Exception):
    """The model answered, but not with what was asked (no JSON object, wrong shape)."""


@dataclass(frozen=True)
class LLMSettings:
    """Where the chat endpoint is and which model to ask.

    Attributes:
        base_url: Base URL of the OpenAI-compatible API (``.../v1``); requests go to
            ``{base_url}/chat/completions``.
        model: The model name the endpoint serves.
        api_key: Sent as a bearer token when given.
        timeout_s: Longest wait for the connection and for the answer.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMSettings | None:
        """The settings from ``NCOMPASS_LLM_*``; None when ``NCOMPASS_LLM_URL`` is unset.

        Raises:
            ValueError: The URL is set but the model is not, or the timeout is not a number.
        """
        env = os.environ if environ is None else environ
        url = env.get(LLM_URL_ENV, "").strip()
        if not url:
            return None
        model = env.get(LLM_MODEL_ENV, "").strip()
        if not model:
            raise ValueError(
                f"{LLM_URL_ENV} is set but {LLM_MODEL_ENV} is not: set it to the name of a model "
                "the endpoint serves"
            )
        timeout = env.get(LLM_TIMEOUT_ENV, "").strip()
        try:
            timeout_s = float(timeout) if timeout else DEFAULT_TIMEOUT_S
        except ValueError:
            raise ValueError(f"{LLM_TIMEOUT_ENV}={timeout!r} is not a number of seconds") from None
        if timeout_s <= 0:
            raise ValueError(f"{LLM_TIMEOUT_ENV} must be positive, got {timeout_s:g}")
        return cls(url.rstrip("/"), model, env.get(LLM_API_KEY_ENV) or None, timeout_s)


class ChatClient:
    """Asks the model for a JSON object.

    Args:
        settings: The endpoint and model.
    """

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.url = f"{settings.base_url}/chat/completions"

    def ask_json(self, system: str, user: str) -> dict[str, Any]:
        """One deterministic (temperature 0) completion, decoded as a JSON object.

        Raises:
            HttpFailure: The endpoint is down, slow, or answers with an error.
            InvalidAnswer: The answer holds no JSON object.
        """
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        answer = self._post(body)
        if answer.status == 400 and "response_format" in error_detail(answer.body):
            # Some OpenAI-compatible servers have no JSON mode; the prompt asks for JSON anyway.
            del body["response_format"]
            answer = self._post(body)
        if answer.status != 200:
            raise HttpFailure(
                self.url,
                describe_error(answer.status, error_detail(answer.body)),
                status=answer.status,
            )
        try:
            content = answer.body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise InvalidAnswer(
                "the answer is not a chat completion (no choices[0].message.content)"
            ) from None
        if not isinstance(content, str):
            raise InvalidAnswer("the completion has no text content")
        return parse_json_object(content)

    def _post(self, body: dict[str, Any]) -> Any:
        key = self.settings.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return request_json(
            "POST", self.url, json_body=body, headers=headers, timeout_s=self.settings.timeout_s
        )


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (bare, or in a fenced code block).

    Raises:
        InvalidAnswer: There is none.
    """
    fenced = _FENCE.match(text)
    candidate = fenced.group(1) if fenced else text.strip()
    try:
        value = orjson.loads(candidate)
    except orjson.JSONDecodeError:
        start, end = candidate.find("{"), candidate.rfind("}")
        try:
            value = orjson.loads(candidate[start : end + 1]) if 0 <= start < end else None
        except orjson.JSONDecodeError:
            value = None
        if value is None:
            raise InvalidAnswer(f"the answer is not JSON: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise InvalidAnswer(f"the answer is JSON but not an object: {text[:80]!r}")
    return value


__all__ = [
    "LLM_API_KEY_ENV",
    "LLM_MODEL_ENV",
    "LLM_TIMEOUT_ENV",
    "LLM_URL_ENV",
    "ChatClient",
    "InvalidAnswer",
    "LLMSettings",
    "parse_json_object",
]
