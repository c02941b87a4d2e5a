"""The HTTP client against a real local chat-completions server."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memsite.features.llm import OpenAICompatible
from memsite.foundation.errors import ConfigError, LLMError

KEY = "sk-test-0123456789abcdef"


def chat(content: str) -> tuple[int, dict[str, str], bytes]:
    """A 200 chat-completions answer holding ``content``."""
    body = {"id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


def status(code: int, body: Any = None, **headers: str) -> tuple[int, dict[str, str], bytes]:
    return code, {k.replace("_", "-"): v for k, v in headers.items()}, json.dumps(body).encode()


class Endpoint:
    """A chat-completions server on 127.0.0.1 answering from a script, one reply per request.

    A reply is ``(status, headers, body)`` or a number of seconds to stall for
    before answering with the next reply; the last reply repeats.
    """

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                reply = endpoint.replies.pop(0) if len(endpoint.replies) > 1 else endpoint.replies[0]
                if isinstance(reply, (int, float)):
                    time.sleep(reply)
                    return
                code, headers, payload = reply
                try:
                    self.send_response(code)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up already
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> None:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def client(self, **options: Any) -> OpenAICompatible:
        return OpenAICompatible(self.base_url, "test-model", **{"timeout": 2.0, "backoff": 0.01, **options})


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint(chat("hello"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The client's waits between attempts, recorded instead of slept."""
    waits: list[float] = []
    monkeypatch.setattr("memsite.features.llm.time.sleep", waits.append)
    return waits


def test_a_prompt_is_posted_as_a_chat_message_and_the_answer_returned(endpoint: Endpoint) -> None:
    assert endpoint.client()("What is 2+2?") == "hello"
    (request,) = endpoint.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["json"] == {"model": "test-model", "temperature": 0,
                               "messages": [{"role": "user", "content": "What is 2+2?"}]}
    assert "Authorization" not in request["headers"]


def test_a_key_is_sent_as_a_bearer_token_and_a_system_message_goes_first(endpoint: Endpoint) -> None:
    endpoint.client(api_key=KEY, system="Answer in JSON.")("hi")
    (request,) = endpoint.requests
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    assert request["json"]["messages"] == [{"role": "system", "content": "Answer in JSON."},
                                           {"role": "user", "content": "hi"}]


def test_a_server_error_is_retried_with_growing_backoff(endpoint: Endpoint, sleeps: list[float]) -> None:
    endpoint.replies = [status(500), status(503), chat("recovered")]
    assert endpoint.client(backoff=0.5)("hi") == "recovered"
    assert len(endpoint.requests) == 3
    assert sleeps == [0.5, 1.0]


@pytest.mark.parametrize("retry_after, waited", [("0", 0.0), ("3600", 30.0)])
def test_a_429_waits_as_long_as_retry_after_asks_up_to_a_cap(endpoint: Endpoint, sleeps: list[float],
                                                            retry_after: str, waited: float) -> None:
    endpoint.replies = [status(429, Retry_After=retry_after), chat("ok")]
    assert endpoint.client(backoff=5.0)("hi") == "ok"
    assert len(endpoint.requests) == 2 and sleeps == [waited]


def test_a_rejected_key_is_not_retried_and_never_shown(endpoint: Endpoint) -> None:
    endpoint.replies = [status(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})]
    client = endpoint.client(api_key=KEY)
    with pytest.raises(LLMError) as caught:
        client("hi")
    message = str(caught.value)
    assert len(endpoint.requests) == 1
    assert "HTTP 401" in message and "MEMSITE_LLM_API_KEY" in message and endpoint.base_url in message
    assert KEY not in message and "\n" not in message
    assert KEY not in repr(client) and repr(client) == f"OpenAICompatible(base_url={endpoint.base_url!r}, " \
                                                       "model='test-model')"


def test_a_server_that_never_answers_times_out_after_every_attempt(endpoint: Endpoint) -> None:
    endpoint.replies = [1.0]
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"no answer within 0.2 s after 2 attempts; raise MEMSITE_LLM_TIMEOUT"):
        endpoint.client(timeout=0.2, retries=1)("hi")
    assert len(endpoint.requests) == 2
    assert time.monotonic() - started < 1.0  # gave up by its own timeout, not the server's stall


def test_an_unreachable_server_names_the_base_url_variable(sleeps: list[float]) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(LLMError, match=r"cannot connect .* after 3 attempts; check MEMSITE_LLM_BASE_URL"):
        OpenAICompatible(f"http://127.0.0.1:{port}/v1", "m", backoff=0.01)("hi")
    assert len(sleeps) == 2


@pytest.mark.parametrize("reply, missing", [
    ((200, {}, b"<html>Welcome to nginx</html>"), "not JSON"),
    (status(200, {"object": "list", "data": []}), "'choices'"),
    (status(200, {"choices": [{"message": {"role": "assistant", "content": None}}]}), "'choices[0].message.content'"),
])
def test_an_answer_of_the_wrong_shape_names_what_is_missing(endpoint: Endpoint, reply: Any, missing: str) -> None:
    endpoint.replies = [reply]
    with pytest.raises(LLMError, match=re.escape(missing)):
        endpoint.client()("hi")
    assert len(endpoint.requests) == 1


@pytest.fixture
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("MEMSITE_LLM_BASE_URL", "MEMSITE_LLM_MODEL", "MEMSITE_LLM_API_KEY", "MEMSITE_LLM_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_from_env_builds_a_working_client(endpoint: Endpoint, no_llm_env: pytest.MonkeyPatch) -> None:
    no_llm_env.setenv("MEMSITE_LLM_BASE_URL", endpoint.base_url + "/")
    no_llm_env.setenv("MEMSITE_LLM_MODEL", "llama3")
    no_llm_env.setenv("MEMSITE_LLM_API_KEY", KEY)
    no_llm_env.setenv("MEMSITE_LLM_TIMEOUT", "7.5")
    client = OpenAICompatible.from_env()
    assert client is not None and client.timeout == 7.5
    assert client("hi") == "hello"
    assert endpoint.requests[0]["path"] == "/v1/chat/completions"
    assert endpoint.requests[0]["json"]["model"] == "llama3"
    assert endpoint.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("variables", [{}, {"MEMSITE_LLM_BASE_URL": "http://localhost:11434/v1"},
                                       {"MEMSITE_LLM_MODEL": "llama3"}])
def test_from_env_is_none_until_both_url_and_model_are_set(no_llm_env: pytest.MonkeyPatch,
                                                           variables: dict[str, str]) -> None:
    for name, value in variables.items():
        no_llm_env.setenv(name, value)
    assert OpenAICompatible.from_env() is None


@pytest.mark.parametrize("name, value", [
    ("MEMSITE_LLM_BASE_URL", "localhost:11434/v1"),
    ("MEMSITE_LLM_BASE_URL", "ftp://example.com/v1"),
    ("MEMSITE_LLM_BASE_URL", "http:///v1"),
    ("MEMSITE_LLM_BASE_URL", "http://[::1/v1"),
    ("MEMSITE_LLM_TIMEOUT", "soon"),
    ("MEMSITE_LLM_TIMEOUT", "0"),
    ("MEMSITE_LLM_TIMEOUT", "inf"),
])
def test_from_env_refuses_a_value_it_cannot_mean(no_llm_env: pytest.MonkeyPatch, name: str, value: str) -> None:
    no_llm_env.setenv("MEMSITE_LLM_BASE_URL", "http://localhost:11434/v1")
    no_llm_env.setenv("MEMSITE_LLM_MODEL", "llama3")
    no_llm_env.setenv(name, value)
    with pytest.raises(ConfigError, match=f"^{name}: expected .*got {re.escape(repr(value))}"):
        OpenAICompatible.from_env()
