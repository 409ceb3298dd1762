"""OpenAIBackend against a real HTTP server on the loopback (the package's ScriptedServer)."""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("openai")

from terminal_env.errors import ConfigError, InfraError
from terminal_env.models.base import (
    Completion,
    ContextOverflowError,
    ModelError,
    SamplingParams,
)
from terminal_env.models.openai_backend import OpenAIBackend, RateLimiter
from terminal_env.models.registry import make_backend
from terminal_env.models.scripted_server import (
    Disconnect,
    Fail,
    ScriptedServer,
    Stall,
)

USER = [{"role": "user", "content": "list the files"}]
TOOLS = [{
    "type": "function",
    "function": {
        "name": "run",
        "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID",
                "OPENAI_PROJECT_ID", "MY_KEY"):
        monkeypatch.delenv(var, raising=False)


def backend(server: ScriptedServer, **kw) -> OpenAIBackend:
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 10.0)
    return OpenAIBackend("test-model", base_url=server.base_url, **kw)


# -- answers ----------------------------------------------------------------------------------


def test_text_completion_and_request_fields():
    with ScriptedServer(["ls -la"]) as server:
        c = backend(server).complete(USER)
        assert isinstance(c, Completion)
        assert c.text == "ls -la"
        assert c.finish_reason == "stop"
        assert c.model == "test-model"
        assert c.tool_calls == [] and c.reasoning is None
        assert c.retries == 0 and c.latency > 0
        assert c.usage.prompt_tokens == 3 and c.usage.completion_tokens == 2
        (body,) = server.requests
    assert body["model"] == "test-model"
    assert body["messages"] == USER
    assert body["temperature"] == 0.6 and body["max_tokens"] == 8192
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    for absent in ("tools", "tool_choice", "logprobs", "seed", "stop", "top_p"):
        assert absent not in body


def test_sampling_params_are_sent():
    params = SamplingParams(temperature=0.0, top_p=0.9, max_new_tokens=64, seed=7,
                            stop=["</bash>"], thinking=True)
    with ScriptedServer(["ok"]) as server:
        backend(server, extra_body={"top_k": 20}).complete(USER, params=params)
        (body,) = server.requests
    assert body["temperature"] == 0.0 and body["top_p"] == 0.9 and body["max_tokens"] == 64
    assert body["seed"] == 7 and body["stop"] == ["</bash>"] and body["top_k"] == 20
    assert body["chat_template_kwargs"] == {"enable_thinking": True}


def test_thinking_flag_can_be_switched_off():
    with ScriptedServer(["ok"]) as server:
        backend(server, send_thinking_flag=False).complete(USER)
        assert "chat_template_kwargs" not in server.requests[0]


def test_server_rejecting_the_thinking_field_is_asked_again_without_it():
    bad = Fail(400, "Unrecognized request argument supplied: chat_template_kwargs")
    with ScriptedServer([bad, "first", "second"]) as server:
        b = backend(server)
        c = b.complete(USER)
        assert c.text == "first" and c.retries == 0
        assert b.complete(USER).text == "second"
        bodies = server.requests
    assert "chat_template_kwargs" in bodies[0]
    assert "chat_template_kwargs" not in bodies[1] and "chat_template_kwargs" not in bodies[2]


def test_tool_calls_round_trip():
    script = [
        {"content": None, "tool_calls": [{"name": "run", "arguments": {"cmd": "ls"}}]},
        "done",
    ]
    with ScriptedServer(script) as server:
        b = backend(server)
        c = b.complete(USER, tools=TOOLS)
        assert c.finish_reason == "tool_calls" and c.text == ""
        (call,) = c.tool_calls
        assert call.name == "run" and json.loads(call.arguments) == {"cmd": "ls"} and call.id
        messages = USER + [c.assistant_message(),
                           {"role": "tool", "tool_call_id": call.id, "content": "a.txt"}]
        assert b.complete(messages, tools=TOOLS).text == "done"
        first, second = server.requests
    assert first["tools"] == TOOLS and first["tool_choice"] == "auto"
    sent = second["messages"]
    assert sent[1]["tool_calls"][0]["function"] == {"name": "run", "arguments": call.arguments}
    assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "a.txt"}


def test_logprobs_are_parsed():
    with ScriptedServer(["echo hello world"]) as server:
        c = backend(server).complete(USER, params=SamplingParams(logprobs=True))
        assert server.requests[0]["logprobs"] is True
    assert c.logprobs is not None and len(c.logprobs) == 3
    assert all(isinstance(x, float) and x <= 0 for x in c.logprobs)
    assert c.token_ids is None  # tokens came back as text


def test_tokens_as_token_ids_fill_token_ids():
    with ScriptedServer(["echo hello world"]) as server:
        b = backend(server, extra_body={"return_tokens_as_token_ids": True})
        c = b.complete(USER, params=SamplingParams(logprobs=True))
    assert c.token_ids is not None and len(c.token_ids) == len(c.logprobs) == 3
    assert all(isinstance(t, int) for t in c.token_ids)


def test_reasoning_content_field_goes_to_reasoning():
    with ScriptedServer([{"content": "ls", "reasoning_content": "I should look around."}]) as s:
        c = backend(s).complete(USER)
    assert c.text == "ls" and c.reasoning == "I should look around."


def test_think_blocks_go_to_reasoning():
    with ScriptedServer(["<think>first look</think>ls -la", "plan it</think>\n\ncat a"]) as s:
        b = backend(s)
        c = b.complete(USER)
        assert (c.text, c.reasoning) == ("ls -la", "first look")
        c = b.complete(USER)  # the template opened <think>; only the closing tag comes back
        assert (c.text, c.reasoning) == ("cat a", "plan it")


# -- retries ----------------------------------------------------------------------------------


def test_server_error_then_success_is_retried_and_counted():
    with ScriptedServer([Fail(500), Fail(502, "bad gateway"), "ok"]) as server:
        c = backend(server).complete(USER)
        assert c.text == "ok" and c.retries == 2
        assert len(server.requests) == 3


def test_429_retry_after_is_honoured():
    with ScriptedServer([Fail(429, "slow down", headers={"Retry-After": "0.4"}), "ok"]) as server:
        t0 = time.monotonic()
        c = backend(server, backoff=0.001).complete(USER)
        elapsed = time.monotonic() - t0
        assert c.text == "ok" and c.retries == 1
        first, second = server.log
    assert second.time - first.time >= 0.35
    assert elapsed < 5


def test_retry_after_is_capped():
    with ScriptedServer([Fail(429, headers={"Retry-After": "3600"}), "ok"]) as server:
        t0 = time.monotonic()
        c = backend(server, max_retry_after=0.1).complete(USER)
    assert c.text == "ok" and time.monotonic() - t0 < 5


def test_stall_longer_than_timeout_then_success():
    with ScriptedServer([Stall(30), "ok"]) as server:
        t0 = time.monotonic()
        c = backend(server, timeout=0.5).complete(USER)
        assert c.text == "ok" and c.retries == 1
        assert time.monotonic() - t0 < 10
        assert len(server.requests) == 2


def test_server_stalling_forever_raises_model_error_in_bounded_time():
    t0 = time.monotonic()
    with ScriptedServer(lambda body: Stall(float("inf"))) as server:
        b = backend(server, timeout=0.5, max_retries=1)
        with pytest.raises(ModelError) as info:
            b.complete(USER)
        assert len(server.requests) == 2
    assert time.monotonic() - t0 < 10  # closing the server did not wait for the stalled handlers
    msg = str(info.value)
    assert server.base_url in msg and "test-model" in msg and "2 attempt" in msg
    assert "timeout" in msg
    assert isinstance(info.value, InfraError)


def test_disconnect_is_retried():
    with ScriptedServer([Disconnect(), "ok"]) as server:
        c = backend(server).complete(USER)
        assert c.text == "ok" and c.retries == 1
        assert len(server.requests) == 2


def test_malformed_answers_are_retried():
    with ScriptedServer([Fail(200, body=b"not json"), Fail(200, body={"choices": []}), "ok"]) as s:
        c = backend(s).complete(USER)
    assert c.text == "ok" and c.retries == 2


def test_retries_exhausted_names_the_last_error():
    with (ScriptedServer([Fail(503, "overloaded")] * 3) as server,
          pytest.raises(ModelError, match=r"3 attempt.*HTTP 503: overloaded")):
        backend(server, max_retries=2).complete(USER)


def test_unreachable_server_is_a_model_error():
    with ScriptedServer([]) as server:
        url = server.base_url
    b = OpenAIBackend("m", base_url=url, max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(ModelError, match="connection error"):
        b.complete(USER)


# -- errors that are not retried ------------------------------------------------------------------


def test_401_is_a_config_error_and_not_retried(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-wrong")
    with ScriptedServer([Fail(401, "Incorrect API key provided"), "never"]) as server:
        with pytest.raises(ConfigError) as info:
            backend(server, api_key_env="MY_KEY").complete(USER)
        assert len(server.requests) == 1
    msg = str(info.value)
    assert "test-model" in msg and server.base_url in msg and "MY_KEY" in msg and "401" in msg


def test_404_is_a_config_error_naming_the_models_route():
    with ScriptedServer([Fail(404, "The model `x` does not exist.")]) as server:
        with pytest.raises(ConfigError, match="/models"):
            backend(server).complete(USER)
        assert len(server.requests) == 1


def test_other_400_is_a_config_error():
    with ScriptedServer([Fail(400, "temperature must be <= 2")]) as server:
        with pytest.raises(ConfigError, match="temperature must be"):
            backend(server).complete(USER)
        assert len(server.requests) == 1


@pytest.mark.parametrize("message", [
    ("This model's maximum context length is 32768 tokens. However, you requested 40000 tokens "
     "(31808 in the messages, 8192 in the completion)."),
    "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
    "the request exceeds the available context size, try increasing it",
])
def test_context_too_long_is_a_context_overflow(message):
    with ScriptedServer([Fail(400, message)]) as server:
        with pytest.raises(ContextOverflowError):
            backend(server).complete(USER)
        assert len(server.requests) == 1


# -- key, rate limit, threads ----------------------------------------------------------------------


def test_key_from_env_is_sent_but_never_shown(monkeypatch):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    script = ["ok", Fail(401, f"Incorrect API key provided: {secret}"),
                    Fail(500, f"internal error for {secret}")]
    with ScriptedServer(script) as server:
        b = backend(server, max_retries=0)
        assert b.complete(USER).text == "ok"
        with pytest.raises(ConfigError) as refused:
            b.complete(USER)
        with pytest.raises(ModelError) as failed:
            b.complete(USER)
        assert server.log[0].headers.get("authorization") == f"Bearer {secret}"
    for text in (str(refused.value), str(failed.value), repr(b)):
        assert secret not in text
    assert "OPENAI_API_KEY" in str(refused.value)


def test_explicit_key_wins_and_local_servers_get_a_placeholder(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with ScriptedServer(["a", "b"]) as server:
        backend(server, api_key="explicit").complete(USER)
        monkeypatch.delenv("OPENAI_API_KEY")
        backend(server).complete(USER)
        first, second = server.log
    assert first.headers["authorization"] == "Bearer explicit"
    assert second.headers["authorization"] == "Bearer EMPTY"


def test_rate_limiter_spaces_requests_across_threads():
    with ScriptedServer(lambda body: "ok") as server:
        b = backend(server, requests_per_minute=300)  # one every 0.2 s
        threads = [threading.Thread(target=b.complete, args=(USER,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        times = sorted(r.time for r in server.log)
    assert len(times) == 4
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.12, gaps  # 0.2 s nominal, generous margin


def test_rate_limiter_first_call_does_not_wait():
    limiter = RateLimiter(60)
    assert limiter.acquire() == 0.0
    with pytest.raises(ConfigError):
        RateLimiter(0)


def test_concurrent_threads_get_their_own_answers():
    def script(body):
        return "echo " + body["messages"][-1]["content"]

    results: dict[int, list[str]] = {}
    errors: list[Exception] = []
    with ScriptedServer(script) as server:
        b = backend(server)

        def worker(i: int) -> None:
            try:
                results[i] = [b.complete([{"role": "user", "content": f"t{i}-{k}"}]).text
                              for k in range(3)]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(server.requests) == 24
    assert not errors
    assert results == {i: [f"echo t{i}-{k}" for k in range(3)] for i in range(8)}


# -- the server itself and the registry -----------------------------------------------------------


def test_scripted_server_models_route_and_exhaustion():
    with ScriptedServer(["only"], model="tiny") as server:
        with urllib.request.urlopen(server.base_url + "/models", timeout=5) as r:
            assert json.load(r)["data"][0]["id"] == "tiny"
        req = urllib.request.Request(
            server.base_url + "/chat/completions", method="POST",
            data=json.dumps({"model": "tiny", "messages": USER}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            answer = json.load(r)
        assert answer["object"] == "chat.completion"
        assert answer["choices"][0]["message"]["content"] == "only"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == 500
        assert "exhausted" in json.load(info.value)["error"]["message"]


def test_scripted_server_per_conversation_scripts():
    script = {"task A": ["a1", "a2"], "task B": ["b1"]}
    with ScriptedServer(script) as server:
        b = backend(server, max_retries=0)
        a = [{"role": "user", "content": "task A"}]
        assert b.complete(a).text == "a1"
        assert b.complete([{"role": "user", "content": "task B"}]).text == "b1"
        assert b.complete(a + [{"role": "assistant", "content": "a1"}]).text == "a2"
        with pytest.raises(ModelError, match="exhausted"):
            b.complete(a)
    with ScriptedServer(["x", "y"], per_conversation=True) as server:
        b = backend(server)
        assert [b.complete([{"role": "user", "content": u}]).text for u in "ppq"] == ["x", "y", "x"]


def test_registry_builds_an_openai_backend(monkeypatch):
    with ScriptedServer(["via env", "via option"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        b = make_backend("openai:some/model:v1", backoff=0.01)
        assert isinstance(b, OpenAIBackend) and b.model == "some/model:v1"
        assert b.complete(USER).text == "via env"
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        b = make_backend("openai:m", base_url=server.base_url)
        assert b.complete(USER).text == "via option"
    with pytest.raises(ConfigError, match="known kinds: .*openai"):
        make_backend("nosuch:x")
    with pytest.raises(ConfigError, match="takes no option device"):
        make_backend("openai:m", device="cpu")
    with pytest.raises(ConfigError, match="KIND:NAME"):
        make_backend("just-a-name")
