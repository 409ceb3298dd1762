"""The five-stage loop (terminal_env/train/loop.py) and the stateful trainer under it: the config's
refusals, optimizer state round trips, and a short loop on the toy family in Docker that is killed
in the middle of an RSR stage and of an RPR stage, resumed, and ends with the manifests of a run
never stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_lm import make_model, make_tokenizer  # noqa: E402

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.models.hf_backend import HFChatTokenizer  # noqa: E402
from terminal_env.tasks.toy import write_toy_family  # noqa: E402
from terminal_env.train.data import sft_samples  # noqa: E402
from terminal_env.train.loop import KILL_ENV, Loop  # noqa: E402
from terminal_env.train.loop_config import load_config, parse_config  # noqa: E402
from terminal_env.train.models import Pair  # noqa: E402
from terminal_env.train.sft import SFT, SFTConfig  # noqa: E402
from terminal_env.train.trainer import lr_factor, rollout_seed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory):
    """Toy tasks in one folder per split, and a starting checkpoint of the tiny model."""
    root = tmp_path_factory.mktemp("loop")
    for p in write_toy_family(root / "family", n_train=2, n_validation=1, n_test=1, seed=5, kind="count-letters"):
        split = p.name.split("-")[-2]
        (root / "tasks" / split).mkdir(parents=True, exist_ok=True)
        p.rename(root / "tasks" / split / p.name)
    tokenizer = make_tokenizer()
    Pair.start(make_model(tokenizer, seed=0, context=4096), tokenizer).save(root / "base", stage="base")
    return root


def config_text(extra: str = "") -> str:
    return f"""name = "short"
start = "base"
{extra}
[tasks]
train = ["tasks/train"]
validation = ["tasks/validation"]
test = ["tasks/test"]

[play]
max_turns = 1
max_new_tokens = 8
concurrency = 1
command_timeout = 10

[validation]
k = 1
[evaluation]
k = 1

[[stages]]
kind = "rsr"
name = "rsr-1"
harnesses = ["generic"]
attempts = 1
self = false
roles = {{ collector = {{ spec = "typed-oracle" }} }}
sft = {{ epochs = 2, lr = 1e-3, batch_size = 1 }}

[[stages]]
kind = "rpr"
name = "rpr-1"
critic = {{ attempts = 2, epochs = 1 }}
ppo = {{ iterations = 2, tasks_per_iteration = 2, attempts = 2, validate_every = 1, epochs = 1, batch_size = 2, actor_lr = 1e-3, fallback_estimator = "grpo" }}
"""


# -- the config ----------------------------------------------------------------------------------
def test_the_config_refuses_selection_on_test_and_names_the_key(tmp_path):
    base = {"start": "x", "tasks": {"train": ["a"], "validation": ["b"], "test": ["c"]}}
    with pytest.raises(ConfigError, match="select_on = 'test'.*validation split only"):
        parse_config({**base, "select_on": "test"})
    with pytest.raises(ConfigError, match=r"stages\.0\.rsr\.sft\.epochs"):
        parse_config({**base, "stages": [{"kind": "rsr", "name": "r", "sft": {"epochs": 0}}]})
    with pytest.raises(ConfigError, match=r"stages\.0\.rpr\.ppo\.learning_rate: Extra inputs"):
        parse_config({**base, "stages": [{"kind": "rpr", "name": "r", "ppo": {"learning_rate": 1}}]})
    with pytest.raises(ConfigError, match=r"stages\[0\]\.ppo.*estimator"):
        parse_config({**base, "stages": [{"kind": "rpr", "name": "r", "ppo": {"estimator": "magic"}}]})
    with pytest.raises(ConfigError, match="own name"):
        parse_config({**base, "stages": [{"kind": "rsr", "name": "a"}, {"kind": "rpr", "name": "a"}]})
    with pytest.raises(ConfigError, match=r"generator: .*needs url .*and model"):
        parse_config({**base, "generator": {"kind": "vllm"}})
    with pytest.raises(ConfigError, match=r"generator: .*not an http\(s\) address"):
        parse_config({**base, "generator": {"kind": "vllm", "url": "127.0.0.1:8000", "model": "m"}})
    with pytest.raises(ConfigError, match=r"generator\.transport"):
        parse_config({**base, "generator": {"kind": "vllm", "url": "http://h/v1", "model": "m", "transport": "tcp"}})
    bad = tmp_path / "bad.toml"
    bad.write_text("start = \n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_config(bad)


def test_the_default_stages_are_the_recipe_with_rpr2_at_a_fifth_of_rpr1s_rate():
    config = parse_config({"start": "x", "tasks": {"train": ["a"], "validation": ["b"], "test": ["c"]}})
    assert [(s.kind, s.name) for s in config.stages] == [("rsr", "rsr-1"), ("rpr", "rpr-1"), ("rsr", "rsr-2"),
                                                          ("rpr", "rpr-2")]
    assert config.stages[3].ppo.actor_lr == pytest.approx(config.stages[1].ppo.actor_lr / 5)
    assert (config.evaluation.k, config.evaluation.temperature) == (3, 0.6)
    assert all(len(s.harnesses) >= 2 for s in config.stages if s.kind == "rsr")


def test_a_loop_refuses_wrong_splits_and_a_resume_with_a_changed_config(curriculum, tmp_path):
    config = load_config(_write(curriculum, "a.toml", config_text()))
    wrong = load_config(_write(curriculum, "b.toml", config_text().replace(
        'validation = ["tasks/validation"]', 'validation = ["tasks/test"]')))
    with pytest.raises(ConfigError, match="tasks.validation: these tasks are not in the validation split"):
        Loop(wrong, tmp_path / "w")
    Loop(config, tmp_path / "run")  # writes config.json, plays nothing yet
    with pytest.raises(ConfigError, match="add --resume"):
        Loop(config, tmp_path / "run")
    changed = load_config(_write(curriculum, "c.toml", config_text().replace("max_turns = 1", "max_turns = 2")))
    with pytest.raises(ConfigError, match=r"another config \(changed: play.max_turns\)"):
        Loop(changed, tmp_path / "run", resume=True)


def _write(root: Path, name: str, text: str) -> Path:
    (root / name).write_text(text)
    return root / name


# -- the trainer's state -------------------------------------------------------------------------
def test_sft_resumed_from_its_saved_state_ends_as_an_uninterrupted_run(tmp_path):
    tokenizer = make_tokenizer()
    records = [{"messages": [{"role": "user", "content": f"count {w}"}, {"role": "assistant", "content": str(len(w))}]}
               for w in ("BCF", "GHJKL", "NP", "QSTVW")]
    samples = sft_samples(records, HFChatTokenizer(tokenizer, "actor"))

    def fresh() -> Pair:
        return Pair.start(make_model(tokenizer, seed=1), tokenizer)

    whole = fresh()
    trainer = SFT(whole, samples, SFTConfig(lr=1e-2, batch_size=2))
    trainer.epoch()
    trainer.epoch()
    half = fresh()
    first = SFT(half, samples, SFTConfig(lr=1e-2, batch_size=2))
    first.epoch()
    half.save(tmp_path / "e1", stage="sft")
    torch.save(first.state_dict(), tmp_path / "state.pt")
    resumed = Pair.load(tmp_path / "e1")
    second = SFT(resumed, samples, SFTConfig(lr=1e-2, batch_size=2))
    second.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=False))
    second.epoch()
    assert second.losses == trainer.losses
    for (name, a), b in zip(whole.actor.state_dict().items(), resumed.actor.state_dict().values()):
        assert torch.equal(a, b), name
    # without the optimizer's state (Adam's moments restart) the second epoch differs: the test can fail
    restarted = SFT(Pair.load(tmp_path / "e1"), samples, SFTConfig(lr=1e-2, batch_size=2))
    restarted.generator.set_state(first.generator.get_state())
    restarted.epoch()
    assert restarted.losses[-1] != trainer.losses[-1] or any(
        not torch.equal(a, b) for a, b in zip(whole.actor.state_dict().values(),
                                              restarted.pair.actor.state_dict().values()))


def test_schedules_and_rollout_seeds():
    assert [lr_factor("constant", s, 3) for s in range(3)] == [1.0, 1.0, 1.0]
    assert lr_factor("linear", 0, 4, warmup=2) == 0.5
    with pytest.raises(ConfigError, match="unknown learning-rate schedule 'step'"):
        lr_factor("step", 0, 3)
    seen = set()
    for seed in (0, 1):
        for iteration in range(3):
            first = rollout_seed(seed, iteration, 16)
            block = set(range(first, first + 16))
            assert not block & seen  # no two iterations (or seeds) share an episode seed
            seen |= block


# -- the loop, killed and resumed ----------------------------------------------------------------
def _loop(config: Path, out: Path, *, resume: bool = False, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    if kill_at:
        env[KILL_ENV] = kill_at
    cmd = [sys.executable, "-m", "terminal_env", "train", "loop", "--config", str(config), "--out", str(out)]
    return subprocess.run(cmd + (["--resume"] if resume else []), env=env, capture_output=True, text=True,
                          timeout=900, cwd=ROOT)


@pytest.mark.docker
def test_a_loop_killed_in_rsr_and_in_rpr_then_resumed_ends_with_the_manifests_of_an_unstopped_run(
        curriculum, tmp_path, base_image):
    config = _write(curriculum, "short.toml", config_text())
    whole = _loop(config, tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr[-3000:]
    # killed after the first SFT epoch of rsr-1 (the second not begun), then after PPO's second step
    # was saved but before the run recorded it (the resume point is step 1)
    killed = _loop(config, tmp_path / "killed", kill_at="rsr-1-epoch-1")
    assert killed.returncode == -9, killed.stderr[-3000:]
    stage = json.loads((tmp_path / "killed" / "loop.json").read_text())
    assert [s["name"] for s in stage["stages"]] == ["base"] and stage["status"] == "running"
    assert (tmp_path / "killed" / "01-rsr-1" / "sft" / "epoch-1" / "trainer_state.pt").is_file()
    assert not (tmp_path / "killed" / "01-rsr-1" / "sft" / "epoch-2").exists()
    again = _loop(config, tmp_path / "killed", resume=True, kill_at="rpr-1-step-2")
    assert again.returncode == -9, again.stderr[-3000:]
    assert json.loads((tmp_path / "killed" / "02-rpr-1" / "ppo" / "run.json").read_text())["step"] == 1
    done = _loop(config, tmp_path / "killed", resume=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming after step 1" in done.stderr  # from the saved step: its weights, optimizers and RNG

    a = json.loads((tmp_path / "whole" / "loop.json").read_text())
    b = json.loads((tmp_path / "killed" / "loop.json").read_text())
    assert a["status"] == b["status"] == "complete"
    assert a == b
    for name in ("01-rsr-1", "02-rpr-1"):
        assert (json.loads((tmp_path / "whole" / name / "stage.json").read_text())
                == json.loads((tmp_path / "killed" / name / "stage.json").read_text()))
    # the hand-off: each stage starts from the kept checkpoint of the one before
    stages = a["stages"]
    for before, after in zip(stages, stages[1:]):
        assert after["parent"]["id"] == before["kept"]["id"]
    rsr = stages[1]
    assert rsr["data"]["records"] >= 1 and [c["name"] for c in rsr["candidates"]] == ["start", "epoch-1", "epoch-2"]
    assert rsr["hyperparameters"]["critic"].startswith("frozen")
    rpr = stages[2]
    assert [c["name"] for c in rpr["candidates"]] == ["start", "step-1", "step-2"]
    assert sum(c["kept"] for c in rpr["candidates"]) == 1
    assert all(c["reason"] for c in rpr["candidates"])  # kept or abandoned, each says why
    assert a["final"]["split"] == "test" and set(a["final"]["scores"]) == {"base", "rsr-1", "rpr-1"}
    assert (tmp_path / "whole" / "report.html").read_text().count("<svg") >= 1
    metrics = (tmp_path / "whole" / "02-rpr-1" / "ppo" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in metrics] == [1, 2]


def test_the_shipped_recipe_config_parses_with_rpr2_at_a_fifth_of_rpr1s_rate():
    config = load_config(ROOT / "examples" / "loop" / "recipe.toml")
    rpr = [s for s in config.stages if s.kind == "rpr"]
    assert [s.name for s in config.stages] == ["rsr-1", "rpr-1", "rsr-2", "rpr-2"]
    assert rpr[1].ppo.actor_lr == pytest.approx(rpr[0].ppo.actor_lr / 5)
    assert (config.evaluation.k, config.evaluation.temperature, config.play.max_new_tokens,
            config.play.max_input_tokens) == (3, 0.6, 8192, 96_000)
    assert all(s.self_roles and len(s.harnesses) >= 2 for s in config.stages if s.kind == "rsr")


@pytest.mark.docker
def test_a_ppo_run_through_a_served_generator_pushes_each_step_and_validates(tmp_path, base_image):
    """PPORun with the vLLM path (the project's loopback server): each step's episodes are sampled
    by the version pushed after the step before, and a resumed run pushes its saved step first."""
    import copy

    from terminal_env.models.openai_backend import OpenAIBackend
    from terminal_env.train.loopback import LoopbackVLLM
    from terminal_env.train.ppo import PPOConfig
    from terminal_env.train.generators import ServedGenerator
    from terminal_env.train.trainer import PlaySettings, PPORun, RunSettings
    from terminal_env.train.weight_sync import VLLMWeightSync, pair_version
    from terminal_env.models.hf_backend import TransformersBackend

    tokenizer = make_tokenizer()
    pair = Pair.start(make_model(tokenizer, context=4096), tokenizer)
    pair.save(tmp_path / "start", stage="base")
    start = pair.meta["actor"]  # versions are named after the starting checkpoint: <id>@<step>
    tasks = write_toy_family(tmp_path / "toy", n_train=2, n_validation=1, seed=5, kind="count-letters")
    local = TransformersBackend(copy.deepcopy(pair.actor), tokenizer, name="served")
    server = LoopbackVLLM(local)
    client = OpenAIBackend("loopback", base_url=server.base_url, api_key="none", token_ids=True,
                           chat_tokenizer=HFChatTokenizer(tokenizer), backoff=0.05,
                           weights_version=pair_version(pair.meta["actor"], 0))
    settings = RunSettings(iterations=2, tasks_per_iteration=2, attempts=1, validate_every=2, validation_k=1,
                           play=PlaySettings(max_turns=1, max_new_tokens=8, concurrency=2, command_timeout=10))
    try:
        with VLLMWeightSync(server.base_url, transport="gloo", backends=[client], timeout=120) as sync:
            run = PPORun(tmp_path / "run", pair, PPOConfig(epochs=1, estimator="grpo"), settings,
                         train_tasks=tasks[:2], validation_tasks=tasks[2:], generator=ServedGenerator(client, sync),
                         force=True)
            summary = run.run()
            assert summary["steps"] == 2 and [v["step"] for v in summary["validation"]] == [0, 2]
            assert client.weights_version == pair_version(start, 2)  # pushed after the last step
            assert all(m["old_logprobs"] == "recompute" for m in summary["metrics"])  # served episodes
    finally:
        client.close(), server.close(), local.close()


@pytest.mark.docker
def test_a_loop_on_a_served_generator_pushes_each_checkpoint_before_it_plays(curriculum, tmp_path, base_image):
    """[generator] kind = "vllm" (the project's loopback server, gloo transport): validation, RSR's
    collector, the critic's rollouts, PPO's steps and the final evaluation all sample from the
    server, each after the weights that play were pushed into it."""
    import copy

    from terminal_env.models.hf_backend import TransformersBackend
    from terminal_env.train.loopback import LoopbackVLLM
    from terminal_env.train.weight_sync import pair_version

    base = Pair.load(curriculum / "base")
    local = TransformersBackend(copy.deepcopy(base.actor), base.tokenizer, name="served")
    # the served model starts with other weights: only a push makes it the checkpoint that plays
    torch.nn.init.normal_(local.model.get_input_embeddings().weight)
    server = LoopbackVLLM(local)
    text = config_text(f'[generator]\nkind = "vllm"\nurl = "{server.base_url}"\nmodel = "loopback"\n'
                       f'transport = "gloo"\ntimeout = 120\n')
    text = text.replace('roles = { collector = { spec = "typed-oracle" } }\n', "")  # the actor collects, served
    assert 'typed-oracle' not in text
    loop = Loop(load_config(_write(curriculum, "served.toml", text)), tmp_path / "served")
    try:
        manifest = loop.run()
    finally:
        server.close(), local.close()
    assert manifest["status"] == "complete" and set(manifest["final"]["scores"]) == {"base", "rsr-1", "rpr-1"}
    assert manifest["config"]["generator"]["kind"] == "vllm"
    completions = [body for route, body in server.calls if route == "/v1/completions"]
    assert len(completions) >= 2 + 2 + 4 + 4  # RSR's 2 tasks, validations, the critic's 4 and PPO's 2x2
    # the base actor was pushed before the first validation, and RSR's collector played it
    assert loop.seat.pushed[0] == pair_version(base.meta["actor"], 0)
    stages = manifest["stages"]
    assert stages[1]["hyperparameters"]["roles"]["collector"].startswith("openai:loopback")
    # PPO's episodes came from the server (their old log-probs recomputed by the trainer)
    metrics = [json.loads(x) for x in (tmp_path / "served" / "02-rpr-1" / "ppo" / "metrics.jsonl").read_text()
               .splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(m["old_logprobs"] == "recompute" for m in metrics)
    # what the server holds at the end: the last checkpoint the final evaluation played
    last = Pair.load(tmp_path / "served" / stages[-1]["kept"]["path"])
    held = local.model.state_dict()
    assert all(torch.equal(held[k], v) for k, v in last.actor.state_dict().items())


@pytest.mark.docker
def test_train_ppo_runs_iterations_with_validation_and_resumes_only_when_asked(curriculum, tmp_path, base_image,
                                                                              capsys):
    from terminal_env.cli import main

    args = ["train", "ppo", "--pair", str(curriculum / "base"), "--out", str(tmp_path / "run"),
            "--tasks", str(curriculum / "tasks" / "train"), "--validation", str(curriculum / "tasks" / "validation"),
            "--iterations", "2", "--validate-every", "1", "--tasks-per-iteration", "1", "--attempts", "2",
            "--max-turns", "1", "--max-new-tokens", "8", "--concurrency", "1", "--command-timeout", "10",
            "--validation-k", "1", "--estimator", "grpo", "--schedule", "linear", "--reward", "partial_progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ppo: 2 steps" in out and "step 0:" in out and "step 2:" in out
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert metrics[0]["actor_lr"] > metrics[1]["actor_lr"]  # the linear schedule decays
    assert {"policy_loss", "entropy", "actor_grad_norm", "response_length_mean", "seconds_rollout"} <= set(metrics[0])
    assert (tmp_path / "run" / "steps" / "step-0002" / "trainer_state.pt").is_file()
    # the same per-step scalars in TensorBoard (installed with the test extras)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tb"))
    events.Reload()
    assert {"policy_loss", "entropy", "actor_grad_norm", "actor_lr"} <= set(events.Tags()["scalars"])
    lr = events.Scalars("actor_lr")
    assert [e.step for e in lr] == [1, 2]
    assert [round(e.value, 9) for e in lr] == [round(m["actor_lr"], 9) for m in metrics]
    assert main(args) == 2  # the run exists: going on with it needs --resume
    assert "add --resume" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0  # nothing left to do: it ends where it was
    assert main(args[:8] + ["--trajectories", "x"] + args[8:]) == 2  # both sources: refused
    assert "either --trajectories" in capsys.readouterr().err
    assert main([a if a != str(curriculum / "tasks" / "validation") else str(curriculum / "tasks" / "test")
                 for a in args[:-2]] + ["--out", str(tmp_path / "other")]) == 2
    assert "not in the validation split" in capsys.readouterr().err


def test_an_rsr_stage_mixes_in_the_previous_rsr_stages_records_when_asked(tmp_path):
    write_toy_family(tmp_path / "tasks", n_train=2, n_validation=1, n_test=1, seed=0, kind="count-letters")
    config = parse_config({"start": str(tmp_path / "base"), "tasks": {
        split: [str(p) for p in sorted((tmp_path / "tasks").glob(f"*-{split}-*"))]
        for split in ("train", "validation", "test")},
        "stages": [{"kind": "rsr", "name": "rsr-1"}, {"kind": "rpr", "name": "rpr-1"},
                   {"kind": "rsr", "name": "rsr-2", "mix_previous": 2.0}]})
    loop = Loop(config, tmp_path / "loop")
    done = [{"kind": "rsr", "name": "rsr-1", "data": {"records": 3, "path": "01-rsr-1/rsr/dataset/train.jsonl"}},
            {"kind": "rpr", "name": "rpr-1"}]
    first = loop.rsr_config(1, config.stages[0], tmp_path / "base", [])
    second = loop.rsr_config(3, config.stages[2], tmp_path / "base", done)
    assert first.build.mix == {}  # nothing before it (and mix_previous = 0)
    assert second.build.mix == {str(tmp_path / "loop" / "01-rsr-1" / "rsr" / "dataset" / "train.jsonl"): 2.0}
    assert second.collector.spec == f"hf:{tmp_path / 'base' / 'actor'}" and second.round == "rsr-2"
    # a previous stage without records: nothing to mix
    empty = [{**done[0], "data": {"records": 0, "path": "x"}}, done[1]]
    assert loop.rsr_config(3, config.stages[2], tmp_path / "base", empty).build.mix == {}
    with pytest.raises(ConfigError, match=r"stages\.0\.rsr\.mix_previous"):
        parse_config({**config.model_dump(by_alias=True, mode="json"),
                      "stages": [{"kind": "rsr", "name": "r", "mix_previous": -1}]})
