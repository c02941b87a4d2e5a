"""A client for any OpenAI-compatible chat-completions endpoint, stdlib only.

An instance is a plain ``llm(prompt) -> str`` callable, which is all the
extractor needs; ``from_env`` builds one from ``MEMSITE_LLM_*`` variables so a
hook can switch extraction on without code.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..foundation.errors import ConfigError, LLMError

MAX_RETRY_AFTER = 30.0
"""Longest wait a server's ``Retry-After`` header can ask for, in seconds."""


class _Transient(Exception):
    """A failure worth another attempt: connection, timeout, 408/429/5xx."""

    def __init__(self, cause: str, fix: str, wait: float | None = None) -> None:
        super().__init__(cause)
        self.cause, self.fix, self.wait = cause, fix, wait


class OpenAICompatible:
    """``llm(prompt) -> str`` over HTTP: POSTs to ``<base_url>/chat/completions``.

    Args:
        base_url: the API root, e.g. ``http://localhost:11434/v1``.
        model: the model name the endpoint expects.
        api_key: sent as ``Authorization: Bearer`` when given; never shown.
        timeout: seconds to wait for one answer.
        retries: further attempts after a transient failure (0 for none).
        backoff: first wait between attempts in seconds; doubles each time.
        system: an optional system message sent before the prompt.

    Raises:
        ConfigError: ``base_url`` is not an http(s) URL, or timeout/retries are out of range.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 60.0,
                 retries: int = 2, backoff: float = 0.5, system: str | None = None) -> None:
        _check_url(base_url, "base_url")
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ConfigError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        if not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"retries: expected a whole number >= 0, got {retries!r}")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self._api_key = api_key or None
        self.timeout, self.retries, self.backoff, self.system = float(timeout), retries, backoff, system

    def __repr__(self) -> str:
        return f"OpenAICompatible(base_url={self.base_url!r}, model={self.model!r})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> OpenAICompatible | None:
        """The client ``MEMSITE_LLM_*`` describes, or None when it is not configured.

        ``MEMSITE_LLM_BASE_URL`` and ``MEMSITE_LLM_MODEL`` are required;
        ``MEMSITE_LLM_API_KEY`` and ``MEMSITE_LLM_TIMEOUT`` (seconds) are optional.

        Returns:
            A client, or None when the base URL or the model is not set.

        Raises:
            ConfigError: a variable holds something it cannot mean.
        """
        base_url = environ.get("MEMSITE_LLM_BASE_URL", "").strip()
        model = environ.get("MEMSITE_LLM_MODEL", "").strip()
        if not base_url or not model:
            return None
        _check_url(base_url, "MEMSITE_LLM_BASE_URL")
        raw = environ.get("MEMSITE_LLM_TIMEOUT", "").strip()
        timeout = 60.0
        if raw:
            try:
                timeout = float(raw)
            except ValueError:
                timeout = math.nan
            if not (math.isfinite(timeout) and timeout > 0):
                raise ConfigError(f"MEMSITE_LLM_TIMEOUT: expected a number of seconds > 0, got {raw!r}")
        return cls(base_url, model, environ.get("MEMSITE_LLM_API_KEY", "").strip() or None, timeout=timeout)

    def __call__(self, prompt: str) -> str:
        """Send ``prompt`` as one user message and return the model's answer.

        Raises:
            LLMError: the endpoint failed after every attempt, refused the
                request (other 4xx), or answered without ``choices[0].message.content``.
        """
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": prompt})
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0}).encode("utf-8")
        attempt = 0
        while True:
            try:
                return _content(self._post(body), self.url)
            except _Transient as exc:
                if attempt >= self.retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise LLMError(self._redact(f"{self.url}: {exc.cause}{tries}; {exc.fix}")) from None
                time.sleep(exc.wait if exc.wait is not None else self.backoff * 2**attempt)
                attempt += 1

    def _post(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            cause = f"HTTP {exc.code}{_detail(exc)}"
            if exc.code in (408, 429) or exc.code >= 500:
                fix = "the endpoint is rate limiting; try again later" if exc.code == 429 else \
                    "the server failed or is overloaded; check its logs"
                raise _Transient(cause, fix, _retry_after(exc.headers.get("Retry-After"))) from None
            raise LLMError(self._redact(f"{self.url}: {cause}; {_fix(exc.code)}")) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError and TimeoutError are OSErrors
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise _Transient(f"no answer within {self.timeout:g} s",
                                 "raise MEMSITE_LLM_TIMEOUT or check that the server is not overloaded") from None
            raise _Transient(f"cannot connect ({reason or type(exc).__name__})",
                             "check MEMSITE_LLM_BASE_URL and that the server is running") from None

    def _redact(self, message: str) -> str:
        message = " ".join(message.split())
        return message.replace(self._api_key, "***") if self._api_key else message


def _check_url(url: Any, what: str) -> None:
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
    except ValueError:  # e.g. an unclosed IPv6 bracket
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what}: expected an http(s) URL with a host such as http://localhost:11434/v1, "
                          f"got {url!r}")


def _fix(status: int) -> str:
    if status in (401, 403):
        return "check MEMSITE_LLM_API_KEY"
    if status == 404:
        return "check MEMSITE_LLM_BASE_URL (the API root, usually ending in /v1) and MEMSITE_LLM_MODEL"
    return "check MEMSITE_LLM_MODEL and the server's logs"


def _detail(exc: urllib.error.HTTPError) -> str:
    """The server's own error message, if it gave one, kept short."""
    try:
        data = json.loads(exc.read() or b"null")
    except (ValueError, OSError):
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f" ({str(message)[:200]})" if isinstance(message, str) and message.strip() else ""


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return min(seconds, MAX_RETRY_AFTER) if math.isfinite(seconds) and seconds >= 0 else None


def _content(raw: bytes, url: str) -> str:
    """``choices[0].message.content`` of an answer, or an LLMError naming what is missing."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise LLMError(f"{url}: answered with a body that is not JSON ({raw[:60]!r}); check that "
                       "MEMSITE_LLM_BASE_URL points at an OpenAI-compatible API") from None
    choices = data.get("choices") if isinstance(data, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        missing = "choices" if first is None else "choices[0].message" if message is None else \
            "choices[0].message.content"
        raise LLMError(f"{url}: the answer has no text at '{missing}'; check that MEMSITE_LLM_BASE_URL points at "
                       "an OpenAI-compatible chat-completions API and MEMSITE_LLM_MODEL is a chat model")
    return content
