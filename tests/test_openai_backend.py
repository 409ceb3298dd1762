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
    ModelConfigError,
    ModelError,
    SamplingParams,
)
from terminal_env.models.openai_backend import OpenAIBackend, RateLimiter
from terminal_env.models.registry import make_backend
from terminal_env.models.scripted_server import (
    EOT_ID,
    EOT_TEXT,
    Disconnect,
    Fail,
    ScriptedServer,
    Stall,
    render_chat,
)
from terminal_env.protocols import ChatTokenizer, TokenBackend

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


# -- token trajectories (vLLM's return_token_ids) --------------------------------------------------


class ByteTokenizer:
    """A ChatTokenizer by hand, matching the ScriptedServer's fake one: one id per UTF-8 byte, the
    special token <|eot|> as EOT_ID, the server's chat rendering."""

    eos_token_ids = [EOT_ID]

    def chat_text(self, messages, tools=None, *, add_generation_prompt, thinking=False):
        text = render_chat(messages)
        return text if add_generation_prompt else text.removesuffix("<|assistant|>")

    def encode(self, text):
        out = []
        for k, part in enumerate(text.split(EOT_TEXT)):
            out += ([EOT_ID] if k else []) + list(part.encode())
        return out

    def decode(self, ids):
        parts, run = [], bytearray()
        for i in ids:
            if i == EOT_ID:
                parts += [run.decode("utf-8", "replace"), EOT_TEXT]
                run = bytearray()
            else:
                run.append(i)
        return "".join(parts) + run.decode("utf-8", "replace")


TOK = ByteTokenizer()


def token_backend(server: ScriptedServer, **kw) -> OpenAIBackend:
    return backend(server, token_ids=True, chat_tokenizer=TOK, **kw)


def test_chat_asks_for_token_ids_and_returns_them_aligned():
    with ScriptedServer(["ls -la", "plain"], token_ids=True) as server:
        b = backend(server, token_ids=True, weights_version="step-3")
        c = b.complete(USER)
        plain = backend(server).complete(USER)  # not asked: no ids, as before
        asked, not_asked = server.requests
    assert asked["return_token_ids"] is True and asked["logprobs"] is True
    assert "return_token_ids" not in not_asked and "logprobs" not in not_asked
    assert c.text == "ls -la" and c.weights == "step-3"
    assert c.prompt_token_ids == TOK.encode(render_chat(USER)) and EOT_ID in c.prompt_token_ids
    assert c.token_ids == list(b"ls -la") + [EOT_ID]
    assert len(c.logprobs) == len(c.token_ids)
    assert all(isinstance(x, float) and x <= 0 for x in c.logprobs) and c.logprobs[1] == pytest.approx(-0.15)
    assert c.sampling_logprobs is None  # vLLM gives the raw log-probs only
    assert plain.text == "plain" and plain.token_ids is None and plain.prompt_token_ids is None


def test_chat_token_ids_cover_reasoning_and_tool_calls():
    item = {"content": "looking", "reasoning_content": "plan",
            "tool_calls": [{"name": "run", "arguments": {"cmd": "ls"}}]}
    with ScriptedServer([item], token_ids=True) as server:
        c = backend(server, token_ids=True).complete(USER, tools=TOOLS)
    assert c.text == "looking" and c.reasoning == "plan" and c.tool_calls[0].name == "run"
    raw = TOK.decode(c.token_ids)
    assert raw.startswith("<think>\nplan\n</think>") and '<tool_call>\n{"name": "run"' in raw
    assert c.token_ids[-1] == EOT_ID and len(c.logprobs) == len(c.token_ids)


def test_chat_without_token_ids_is_a_config_error_raised_once():
    with ScriptedServer(["ok", "never", "never"], token_ids=False) as server:
        b = backend(server, token_ids=True, max_retries=2)
        with pytest.raises(ModelConfigError) as info:
            b.complete(USER)
        assert len(server.requests) == 1  # not retried: retrying cannot fix the server
    msg = str(info.value)
    assert "test-model" in msg and server.base_url in msg
    assert "token_ids" in msg and "prompt_token_ids" in msg
    assert "return_token_ids" in msg and "vLLM >= 0.10.2" in msg and "token_ids=False" in msg
    assert isinstance(info.value, ConfigError)


def _chat_answer(token_ids, logprobs, prompt_ids=(1, 2)):
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "prompt_token_ids": list(prompt_ids),
            "choices": [{"index": 0, "finish_reason": "stop", "token_ids": token_ids,
                         "message": {"role": "assistant", "content": "hi"},
                         "logprobs": {"content": [{"token": "h", "logprob": x, "bytes": [104],
                                                   "top_logprobs": []} for x in logprobs]}}]}


def test_token_ids_and_logprobs_that_do_not_align_are_retried():
    bad = Fail(200, body=_chat_answer([104, 105, EOT_ID], [-0.1, -0.2]))
    with ScriptedServer([bad, "ok"], token_ids=True) as server:
        c = backend(server, token_ids=True).complete(USER)
        assert len(server.requests) == 2
    assert c.text == "ok" and c.retries == 1 and len(c.token_ids) == len(c.logprobs) == 3
    with (ScriptedServer([bad] * 2, token_ids=True) as server,
          pytest.raises(ModelError, match="3 token ids but 2 log-probs")):
        backend(server, token_ids=True, max_retries=1).complete(USER)


def test_complete_tokens_sends_exactly_the_ids_and_returns_them_aligned():
    # a later turn: the prompt holds the end-of-turn ids of the earlier messages
    history = USER + [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "a.txt"}]
    ids = TOK.encode(TOK.chat_text(history, add_generation_prompt=True))
    assert ids.count(EOT_ID) == 3
    params = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=50, seed=3, stop=["</x>"],
                            thinking=True)
    with ScriptedServer(["héllo -la"], token_ids=True) as server:
        b = token_backend(server, weights_version="w1", extra_body={"top_k": 20})
        c = b.complete_tokens(ids, params=params)
        (rec,) = server.log
    body = rec.body
    assert rec.path == "/v1/completions"
    assert body["prompt"] == ids and body["model"] == "test-model"
    assert body["return_token_ids"] is True and body["logprobs"] == 1 and body["top_k"] == 20
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (1.0, 0.9, 50)
    assert body["seed"] == 3 and body["stop"] == ["</x>"]
    for absent in ("messages", "chat_template_kwargs", "tools"):
        assert absent not in body
    assert c.text == "héllo -la" and c.finish_reason == "stop" and c.tool_calls == []
    assert c.token_ids == list("héllo -la".encode()) + [EOT_ID]
    assert TOK.decode(c.token_ids) == c.text + EOT_TEXT  # the text leaves the special token out
    assert len(c.logprobs) == len(c.token_ids) and all(x <= 0 for x in c.logprobs)
    assert c.prompt_token_ids == ids and c.weights == "w1" and c.sampling_logprobs is None
    assert c.usage.completion_tokens == len(c.token_ids) and c.retries == 0


def test_complete_tokens_parses_tool_call_blocks_only_when_tools_are_given():
    item = {"content": "looking", "reasoning_content": "plan",
            "tool_calls": [{"name": "run", "arguments": {"cmd": "ls"}}]}
    with ScriptedServer([item, item], token_ids=True) as server:
        b = token_backend(server)
        c = b.complete_tokens([1, 2, 3], tools=TOOLS)
        raw = b.complete_tokens([1, 2, 3])
    assert c.finish_reason == "tool_calls" and c.text == "looking" and c.reasoning == "plan"
    (call,) = c.tool_calls
    assert call.name == "run" and json.loads(call.arguments) == {"cmd": "ls"}
    assert "<tool_call>" in TOK.decode(c.token_ids)  # the ids are of everything generated
    assert raw.tool_calls == [] and "<tool_call>" in raw.text and raw.finish_reason == "stop"
    assert raw.token_ids == c.token_ids


def test_complete_tokens_retries_through_failures_then_succeeds():
    with ScriptedServer([Fail(503, "overloaded"), Disconnect(), Stall(30), "ok"], token_ids=True) as server:
        c = token_backend(server, timeout=0.5).complete_tokens([5, 6, 7])
        assert len(server.requests) == 4
        assert {r.path for r in server.log} == {"/v1/completions"}
        assert all(body["prompt"] == [5, 6, 7] for body in server.requests)
    assert c.text == "ok" and c.retries == 3 and c.token_ids == list(b"ok") + [EOT_ID]
    with (ScriptedServer([Fail(503, "overloaded")] * 2, token_ids=True) as server,
          pytest.raises(ModelError, match=r"2 attempt.*HTTP 503: overloaded")):
        token_backend(server, max_retries=1).complete_tokens([5])


def test_complete_tokens_without_ids_is_a_config_error_raised_once():
    with ScriptedServer(["ok", "never"], token_ids=False) as server:
        with pytest.raises(ModelConfigError, match=r"without token_ids.*vLLM >= 0\.10\.2.*token_ids=False"):
            token_backend(server, max_retries=3).complete_tokens([1, 2])
        assert len(server.requests) == 1


def test_complete_tokens_refuses_a_server_that_read_other_prompt_ids():
    answer = {"id": "x", "object": "text_completion", "created": 0, "model": "m",
              "choices": [{"index": 0, "text": "hi", "finish_reason": "stop", "token_ids": [104, 105],
                           "prompt_token_ids": [0, 1, 2], "logprobs": {"token_logprobs": [-0.1, -0.2]}}]}
    with ScriptedServer([Fail(200, body=answer), "never"], token_ids=True) as server:
        with pytest.raises(ModelConfigError, match="other prompt ids"):
            token_backend(server).complete_tokens([1, 2])
        assert len(server.requests) == 1


def test_weights_version_is_carried_on_every_completion():
    with ScriptedServer(["a", "b", "c"], token_ids=True) as server:
        b = token_backend(server, weights_version="v7")
        assert b.complete(USER).weights == "v7"
        b.weights_version = "v8"  # the caller swapped the served weights
        assert b.complete_tokens([1]).weights == "v8"
        assert backend(server).complete(USER).weights is None


def test_only_a_backend_with_a_chat_tokenizer_is_token_level():
    with ScriptedServer(["never"], token_ids=True) as server:
        for b in (backend(server), backend(server, token_ids=True)):
            assert getattr(b, "chat_tokenizer", None) is None
            with pytest.raises(ConfigError, match="not token-level.*chat_tokenizer"):
                b.complete_tokens([1, 2])
        assert server.requests == []
        b = token_backend(server)
        assert isinstance(b, TokenBackend) and isinstance(b.chat_tokenizer, ChatTokenizer)
        assert b.chat_tokenizer is TOK and b.weights_version is None
        with pytest.raises(ConfigError, match="token_ids=True"):
            backend(server, chat_tokenizer=TOK)
        with pytest.raises(ConfigError, match="ChatTokenizer"):
            backend(server, token_ids=True, chat_tokenizer=object())


def test_registry_passes_the_token_options():
    with ScriptedServer(["ok"], token_ids=True) as server:
        b = make_backend("openai:m", base_url=server.base_url, token_ids=True, chat_tokenizer=TOK,
                         weights_version="w", backoff=0.01)
        c = b.complete_tokens([9, 9])
    assert c.token_ids == list(b"ok") + [EOT_ID] and c.weights == "w" and c.prompt_token_ids == [9, 9]


def test_scripted_server_completions_route():
    def post(server, body):
        req = urllib.request.Request(server.base_url + "/completions", method="POST",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    with ScriptedServer(["one two", "three"]) as server:  # no token ids: answers without them
        answer = post(server, {"model": "x", "prompt": "hi there", "logprobs": 1, "return_token_ids": True})
        (choice,) = answer["choices"]
        assert answer["object"] == "text_completion" and choice["text"] == "one two"
        assert "token_ids" not in choice and "prompt_token_ids" not in choice
        assert choice["logprobs"]["tokens"] == ["one", " two"]
        with pytest.raises(urllib.error.HTTPError) as info:
            post(server, {"model": "x", "prompt": [[1, 2], [3]]})
        assert info.value.code == 400 and "prompt" in json.load(info.value)["error"]["message"]
    with ScriptedServer([{"content": "x", "finish_reason": "length"}], token_ids=True) as server:
        (choice,) = post(server, {"model": "x", "prompt": [7, 8], "logprobs": 1,
                                  "return_token_ids": True})["choices"]
    assert choice["token_ids"] == [ord("x")] and choice["prompt_token_ids"] == [7, 8]  # no EOT: cut off
    assert choice["logprobs"]["tokens"] == ["x"] and choice["finish_reason"] == "length"


@pytest.mark.docker
def test_a_vllm_like_server_plays_a_token_exact_episode(base_image):
    """The agent loop with complete_tokens against the loopback server: every prompt sent is the
    episode's sequence so far, and the episode stays one segment."""
    from terminal_env import TaskSpec, TerminalEnv
    from terminal_env.agent import run_agent
    from terminal_env.harness import get_harness

    replies = ["```bash\necho one\n```", "<think>so</think>```bash\necho two\n```", "```bash\n#!submit\n```"]
    env = TerminalEnv(TaskSpec(name="tok", instruction="say two things", image=base_image), max_steps=10)
    try:
        with ScriptedServer(replies, token_ids=True) as server:
            traj = run_agent(env, get_harness("generic"), token_backend(server), max_turns=5, seed=2)
            sent = [r["prompt"] for r in server.requests]
    finally:
        env.close()
    assert traj.termination == "submitted" and traj.tokens.num_segments == 1
    (segment,) = traj.tokens.segments
    assert len(segment.turns) == len(sent) == 3
    for span, prompt, turn in zip(segment.turns, sent, traj.turns):
        assert segment.token_ids[:span.start] == prompt  # exactly the sequence so far, as ids
        assert segment.token_ids[span.start:span.end] == turn.completion.token_ids
    assert "<think>so</think>" in TOK.decode(segment.token_ids)  # kept, though the text dropped it
    last = segment.turns[2]  # its new prompt tokens: the close of turn 1, the observation, the prompt
    assert TOK.decode(segment.token_ids[last.prompt_start:last.start]) == "\n<|user|>two<|eot|>\n<|assistant|>"


def test_the_scripted_server_keeps_a_bounded_log():
    with ScriptedServer([f"reply {i}" for i in range(5)], keep=3) as server:
        b = backend(server)
        texts = [b.complete([{"role": "user", "content": f"q{i}"}]).text for i in range(5)]
        kept = [r["messages"][-1]["content"] for r in server.requests]
    assert texts == [f"reply {i}" for i in range(5)]
    assert kept == ["q2", "q3", "q4"]  # the last three, not every request of a long run
