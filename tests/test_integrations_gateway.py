"""The OpenAI-compatible gateway (terminal_env.integrations.gateway): a real HTTP server on
loopback, asked by the openai client; every call recorded with the tokens the model saw and made,
and the recorded log-probs reproduced by re-scoring the recorded tokens."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
openai = pytest.importorskip("openai")

from tiny_lm import make_model, make_tokenizer, rescore  # noqa: E402

from terminal_env.integrations.gateway import Gateway  # noqa: E402
from terminal_env.models.hf_backend import TransformersBackend  # noqa: E402
from terminal_env.models.simple import ScriptedBackend  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    tok = make_tokenizer()
    return make_model(tok, context=1024), tok


def _post(url: str, body: object) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + "/chat/completions", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_every_call_is_recorded_token_exact(tiny, tmp_path):
    model, tok = tiny
    backend = TransformersBackend(model, tok, name="tiny")
    with Gateway(backend, record=tmp_path / "calls.jsonl") as gw:
        assert gw.url.startswith("http://127.0.0.1:")
        client = openai.OpenAI(base_url=gw.url, api_key="unused")
        assert [m.id for m in client.models.list()] == ["tiny"]
        messages = [{"role": "system", "content": "You run shell commands."},
                    {"role": "user", "content": "list the files"}]
        got = []
        for temperature, seed in ((1.0, 1), (0.7, 2)):
            reply = client.chat.completions.create(model="tiny", messages=messages, temperature=temperature,
                                                   max_tokens=24, seed=seed)
            got.append(reply.choices[0].message.content)
            messages = [*messages, {"role": "assistant", "content": got[-1]},
                        {"role": "user", "content": "and now the hidden ones"}]
    calls = gw.calls
    assert len(calls) == 2 and all(c.exact for c in calls)
    assert [c.index for c in calls] == [0, 1]
    on_disk = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c["completion_token_ids"] for c in on_disk] == [c.completion_token_ids for c in calls]
    for call, text, temperature in zip(calls, got, (1.0, 0.7)):
        # what the agent received is what the recorded ids decode to
        assert call.text == text == tok.decode(call.completion_token_ids, skip_special_tokens=True)
        # the prompt ids are the tokens of the messages the agent sent, through the chat template
        # (thinking off, the sampling default)
        assert call.prompt_token_ids == tok.apply_chat_template(
            call.messages, add_generation_prompt=True, tokenize=True, return_dict=False, enable_thinking=False)
        # re-scoring the recorded tokens reproduces the recorded sampling log-probs
        ids = call.prompt_token_ids + call.completion_token_ids
        again = rescore(model, ids, temperature=temperature)[len(call.prompt_token_ids) - 1:]
        assert torch.allclose(again, torch.tensor(call.sampling_logprobs), atol=1e-4)
        assert call.params["temperature"] == temperature
    # the agent re-sent its conversation as text: whether the model saw the tokens it sampled is stated
    assert calls[0].extends_previous is None and isinstance(calls[1].extends_previous, bool)


def test_a_streamed_call_delivers_the_recorded_completion(tiny):
    """Agents that stream (the verifiers package's interception server does) get the same
    completion as server-sent events, and the call is recorded as exactly as any other."""
    model, tok = tiny
    with Gateway(TransformersBackend(model, tok, name="tiny")) as gw:
        client = openai.OpenAI(base_url=gw.url, api_key="unused")
        stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "go"}],
                                                max_tokens=16, seed=3, stream=True,
                                                stream_options={"include_usage": True})
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = [c.usage for c in chunks if c.usage is not None]
    [call] = gw.calls
    assert call.exact and text == call.text == tok.decode(call.completion_token_ids, skip_special_tokens=True)
    assert finish == [call.finish_reason if call.finish_reason in ("stop", "length") else "stop"]
    assert len(usage) == 1 and usage[0].completion_tokens == len(call.completion_token_ids)
    assert usage[0].prompt_tokens == len(call.prompt_token_ids)


def test_bad_requests_are_named_and_nothing_is_recorded(tiny):
    model, tok = tiny
    with Gateway(TransformersBackend(model, tok, name="tiny")) as gw:
        msgs = [{"role": "user", "content": "hi"}]
        for body, words in [
            ({"model": "tiny", "messages": msgs, "n": 2}, "one choice per request"),
            ({"model": "tiny", "messages": []}, "non-empty list"),
            ({"model": "tiny", "messages": msgs, "temperature": -1}, "temperature"),
            ({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "only text"),
            (b"{not json", "not JSON"),
        ]:
            status, payload = _post(gw.url, body)
            assert status == 400 and words in payload["error"]["message"], (body, payload)
        status, payload = _post(gw.url, {"model": "tiny", "messages": [{"role": "user", "content": "x" * 5000}],
                                          "max_tokens": 4})
        assert status == 400 and payload["error"]["type"] == "context_length_exceeded"
        assert gw.calls == []


def test_a_backend_without_token_ids_is_labelled_or_refused():
    script = ScriptedBackend(["```bash\nls\n```"] * 2)
    with Gateway(script) as gw:
        status, payload = _post(gw.url, {"model": "x", "messages": [{"role": "user", "content": "go"}]})
        assert status == 200 and payload["choices"][0]["message"]["content"] == "```bash\nls\n```"
        assert gw.calls[0].exact is False and "prompt's token ids" in gw.calls[0].not_exact
    with Gateway(script, require_tokens=True) as gw:
        status, payload = _post(gw.url, {"model": "x", "messages": [{"role": "user", "content": "go"}]})
        assert status == 502 and "requires exact tokens" in payload["error"]["message"]
        assert gw.calls == []


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_the_gateway_runs_as_its_own_process_for_agents_elsewhere(tmp_path, stop):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["```bash\nls\n```"]))
    # started as a script's background job would be (`gateway ... &`): SIGINT inherited as ignored,
    # where Python makes no KeyboardInterrupt of it (this hung the gateway in a fresh clone's run)
    def background() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    # port 0: the gateway takes a free port and says which (no race with another process for it)
    proc = subprocess.Popen([sys.executable, "-m", "terminal_env.integrations.gateway", "--model",
                             f"scripted:{script}", "--port", "0", "--record", str(tmp_path / "calls.jsonl")],
                            stderr=subprocess.PIPE, text=True, preexec_fn=background)
    try:
        said = []  # what it printed before its address (a dependency's warning must not hide it)
        while not (found := re.search(r"http://127\.0\.0\.1:(\d+)/v1", said[-1] if said else "")):
            line = proc.stderr.readline()
            assert line, f"the gateway exited ({proc.poll()}) without saying where it listens: {said}"
            said.append(line)
        url = found.group(0)
        status, payload = _post(url, {"model": "m", "messages": [{"role": "user", "content": "go"}]})
        assert status == 200 and payload["choices"][0]["message"]["content"] == "```bash\nls\n```"
        proc.send_signal(getattr(signal, stop))
        assert proc.wait(timeout=30) == 0  # stopped cleanly, whichever signal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 1 and calls[0]["exact"] is False and calls[0]["messages"][0]["content"] == "go"
