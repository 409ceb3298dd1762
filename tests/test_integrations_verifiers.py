"""The ``verifiers`` package's evaluation command over terminal tasks
(terminal_env.integrations.verifiers): ``vf-eval terminal-env``, unmodified, from the virtual
environment of its own that ``scripts/setup.sh`` makes (``.venv-verifiers``: verifiers 0.4 pins
openai<3 and mcp 2.0, which this environment's extras cannot share).

Its model calls go through the project's token-recording gateway to the tiny in-process model of
this test; the episodes run in real Docker sandboxes and are scored by the protected verifier. The
package's harness program is started by uv, which fetches that program's few dependencies from the
package index once (then from its cache).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_lm import make_model, make_tokenizer  # noqa: E402

from terminal_env.integrations.episode import replay  # noqa: E402
from terminal_env.integrations.gateway import Gateway  # noqa: E402
from terminal_env.integrations.verifiers import REWARD_NAME, record_from_info  # noqa: E402
from terminal_env.models.hf_backend import TransformersBackend  # noqa: E402
from terminal_env.tasks.toy import write_toy_family  # noqa: E402
from terminal_env.train.tiny import teach  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("TERMINAL_ENV_VERIFIERS_VENV", ROOT / ".venv-verifiers"))
VF_EVAL = VENV / "bin" / "vf-eval"
if not VF_EVAL.exists():
    pytest.skip(f"the verifiers test needs {VF_EVAL}: bash scripts/setup.sh makes it", allow_module_level=True)

pytestmark = pytest.mark.docker
REWARD = "partial_progress"


def _eval(url: str, tasks: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``vf-eval terminal-env`` as a user types it, against the gateway at ``url``."""
    env = {**os.environ, "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)
    cmd = [str(VF_EVAL), "terminal-env", "--env.taskset.tasks", json.dumps([str(tasks)]),
           "--env.taskset.reward", REWARD, "--env.taskset.max-turns", "2", "-m", "tiny",
           "--client.base-url", url, "--sampling.max-tokens", "64", "--no-push", "--no-rich",
           "-o", str(out), *extra]
    return subprocess.run(cmd, cwd=out.parent, env=env, capture_output=True, text=True, timeout=900)


def _episodes(out: Path) -> list[dict]:
    [run] = [p for p in out.iterdir() if p.is_dir()]
    return [json.loads(line) for line in (run / "traces.jsonl").read_text().splitlines()]


def test_vf_eval_plays_terminal_tasks_scored_by_the_protected_verifier(tmp_path):
    tasks = write_toy_family(tmp_path / "toy", n_train=2, n_validation=0, seed=33)
    tok = make_tokenizer()
    model = make_model(tok, context=8192, hidden=64)
    backend = TransformersBackend(model, tok, name="tiny")
    with Gateway(backend) as gw:
        # A first evaluation records the opening prompt of the first task as the model sees it
        # through the package's chat program; the tiny model is then taught that task's command.
        first = _eval(gw.url, tmp_path / "toy", tmp_path / "first", "-n", "1", "-r", "1")
        assert first.returncode == 0, first.stderr[-3000:]
        opening = tok.decode(gw.calls[0].prompt_token_ids)
        assert "Write the number" in opening and "a bash shell is ready" in opening
        answer = (tasks[0] / "solution" / "solve.sh").read_text().splitlines()[-1]
        loss = teach(model, tok, [(opening, f"I write it.\n```bash\n{answer}\n```<|im_end|>")], steps=120)
        print(f"taught: loss {loss:.3f}")
        backend.load_weights(model.state_dict(), version="taught")
        gw.calls.clear()
        done = _eval(gw.url, tmp_path / "toy", tmp_path / "out", "-n", "2", "-r", "2", "-c", "2",
                     "--sampling.temperature", "0.5")
    assert done.returncode == 0, done.stderr[-3000:]
    episodes = _episodes(tmp_path / "out")
    assert len(episodes) == 4 and all(e["ok"] and not e["errors"] for e in episodes), episodes
    rewards, replies = [], []
    for episode in episodes:
        [trace] = episode["traces"]
        info = trace["info"][REWARD_NAME]
        reward = trace["rewards"][REWARD_NAME]["score"]
        rewards.append(reward)
        assert info["reward"] == reward and not info["masked"] and info["checks"]
        # the trainer was told the truth: the same actions in a fresh sandbox get the same reward
        assert replay(record_from_info(info), reward=REWARD) == pytest.approx(reward)
        assert trace["metrics"]["turns"] >= 1
        replies += [n["message"]["content"] for n in trace["nodes"] if n["message"]["role"] == "assistant"]
    print("rewards", rewards)
    # the taught task is solved at least once, and the rewards are not all alike
    assert max(rewards) == 1.0 and len(set(rewards)) > 1
    # every reply the package received came through the gateway, recorded token-exact
    assert sorted(replies) == sorted(c.text for c in gw.calls)
    assert gw.calls and all(c.exact for c in gw.calls)
    for call in gw.calls:
        assert tok.decode(call.completion_token_ids, skip_special_tokens=True) == call.text


def test_a_bad_taskset_setting_is_named(tmp_path):
    write_toy_family(tmp_path / "toy", n_train=1, n_validation=0, seed=34)
    (tmp_path / "out").mkdir()
    bad = _eval("http://127.0.0.1:9/v1", tmp_path / "toy", tmp_path / "out", "--env.taskset.reward", "nonsense")
    assert bad.returncode != 0
    said = bad.stdout + bad.stderr
    assert "reward" in said and "nonsense" in said and "Traceback" not in said, said[-2000:]
    missing = _eval("http://127.0.0.1:9/v1", tmp_path / "nowhere", tmp_path / "out")
    said = missing.stdout + missing.stderr
    assert missing.returncode != 0 and "nowhere" in said and "Traceback" not in said, said[-2000:]
