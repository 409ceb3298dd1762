"""Continuous batching in the local backend's sampler (terminal_env/models/hf_sampling.py), on the
tiny in-process model: a request joins a running batch and leaves it as soon as it ends; a
seeded request's tokens do not depend on who else is in the batch; weights change only with
nothing running; and the copying cache of older transformers gives the same tokens."""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_lm import make_model, make_tokenizer  # noqa: E402 - after the importorskips

from terminal_env.models import hf_cache  # noqa: E402
from terminal_env.models.hf_sampling import BatchSampler, SampleRequest  # noqa: E402

LONG = "the long request: " + "list the files and count them, " * 6
SHORT = "hi"


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return make_model(tokenizer, context=2048)


@pytest.fixture
def sampler(model, tokenizer):
    # no end-of-sequence token: every request runs to its max_new, so step counts are exact
    s = BatchSampler(torch, model, eos_token_ids=[], text=tokenizer.decode, name="tiny",
                     max_batch=4)
    s.weights_version = "old"
    yield s
    s.close()


def ask(tokenizer, text: str, *, seed: int, max_new: int) -> SampleRequest:
    return SampleRequest(prompt=tokenizer.encode(text), temperature=1.0, top_p=1.0, seed=seed,
                         max_new=max_new, stops=[])


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def same(a, b) -> None:
    assert a.token_ids == b.token_ids
    assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def sample_together(sampler, tokenizer, prompts: list[tuple[str, int, int]]) -> list:
    """Send every (text, seed, max_new) at once, with nothing remembered; their answers."""
    sampler.forget()
    requests = [ask(tokenizer, text, seed=seed, max_new=n) for text, seed, n in prompts]
    for r in requests:
        sampler._submit(r)
    return [r.future.result(timeout=60) for r in requests]


def join_one_by_one_as_alone(sampler, tokenizer, prompts: list[tuple[str, int, int]]) -> None:
    """Each (text, seed, max_new) sampled alone, then all again joining one by one while the
    others run: every request gets the tokens it got alone."""
    alone = [sampler.sample(ask(tokenizer, text, seed=seed, max_new=n)) for text, seed, n in prompts]
    sampler.forget()
    requests = []
    for i, (text, seed, n) in enumerate(prompts):  # joining one by one, while the others run
        requests.append(ask(tokenizer, text, seed=seed, max_new=n))
        sampler._submit(requests[-1])
        wait_for(lambda: sampler.stats["steps"] >= 5 * (i + 1))
    for r, expected in zip(requests, alone):
        same(r.future.result(timeout=60), expected)


def test_a_request_joins_the_running_batch_and_leaves_it_when_it_ends(sampler, tokenizer):
    alone_long = sampler.sample(ask(tokenizer, LONG, seed=1, max_new=300))
    alone_short = sampler.sample(ask(tokenizer, SHORT, seed=2, max_new=10))
    sampler.forget()
    start = sampler.stats["steps"]
    order: list[str] = []
    long = ask(tokenizer, LONG, seed=1, max_new=300)
    long.future.add_done_callback(lambda _: order.append("long"))
    sampler._submit(long)
    wait_for(lambda: sampler.stats["steps"] - start >= 20)  # the long request is running
    short = ask(tokenizer, SHORT, seed=2, max_new=10)
    short.future.add_done_callback(lambda _: order.append("short"))
    sampler._submit(short)
    same(short.future.result(timeout=60), alone_short)
    same(long.future.result(timeout=60), alone_long)
    assert order == ["short", "long"]  # it came back without waiting for the long one to end
    assert sampler.stats["steps"] - start == 300  # its 10 steps were the long request's steps
    assert sampler.stats["row_steps"] - sampler.stats["steps"] == 10


def test_a_seeded_request_gets_the_same_tokens_whoever_joins_or_leaves(sampler, tokenizer):
    join_one_by_one_as_alone(sampler, tokenizer,
                             [(LONG, 1, 120), (SHORT, 2, 30), ("a middle one " * 5, 3, 60), (LONG + "more", 4, 80)])


def test_weights_change_only_with_nothing_running(sampler, tokenizer):
    order: list[str] = []
    running = ask(tokenizer, LONG, seed=1, max_new=300)
    running.future.add_done_callback(lambda _: order.append("running"))
    sampler._submit(running)
    wait_for(lambda: sampler.stats["steps"] >= 5)

    def swap() -> None:
        with sampler.exclusive():
            order.append("swap")
            sampler.weights_version = "new"

    swapper = threading.Thread(target=swap)
    swapper.start()
    wait_for(lambda: sampler._exclusive == 1)
    late = ask(tokenizer, SHORT, seed=2, max_new=5)
    late.future.add_done_callback(lambda _: order.append("late"))
    sampler._submit(late)
    swapper.join(timeout=60)
    assert late.future.result(timeout=60).weights == "new"
    assert running.future.result(timeout=60).weights == "old"
    assert order == ["running", "swap", "late"]  # not admitted during the swap, and after it


def test_the_copying_cache_of_older_transformers_gives_the_same_tokens(sampler, tokenizer, monkeypatch):
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert hf_cache.growing_layer() is not None  # the in-place path is the one in use here
    def run() -> list:
        return sample_together(sampler, tokenizer, [(LONG, 1, 40), (SHORT, 2, 25), ("a middle one " * 5, 3, 60)])

    in_place = run()
    monkeypatch.setattr(hf_cache, "growing_layer", lambda: None)
    for a, b in zip(run(), in_place):
        same(a, b)


def test_a_ready_mask_gives_the_tokens_of_the_padding_mask(sampler, tokenizer, monkeypatch):
    """Where the model takes the attention mask ready (SDPA, transformers 5.x), a step passes it
    so, instead of a padding mask the model rebuilds each step: the same tokens either way, for
    rows of different lengths (left padding) joining and leaving."""
    def run() -> list:
        return sample_together(sampler, tokenizer, [(LONG, 1, 40), (SHORT, 2, 25), ("a middle one " * 5, 3, 60)])

    if int(transformers.__version__.split(".")[0]) >= 5:
        assert sampler._ready_masks()  # the ready mask is the path in use here
    ready = run()
    monkeypatch.setattr(BatchSampler, "_ready_masks", lambda self: False)
    for a, b in zip(run(), ready):
        same(a, b)


def test_a_group_sent_at_once_runs_its_shared_prompt_once(sampler, tokenizer):
    """Episodes of one task start together (a group of a policy-gradient update): the first
    prompt's keys and values are remembered when it is admitted, so the others run only their
    own tokens."""
    sampler.forget()
    prompts = [tokenizer.encode(LONG + tail) for tail in ("", "", "", " and more")]
    before = dict(sampler.stats)
    requests = [SampleRequest(prompt=p, temperature=1.0, top_p=1.0, seed=i, max_new=3, stops=[])
                for i, p in enumerate(prompts)]
    for r in requests:
        sampler._submit(r)
    for r in requests:
        assert len(r.future.result(timeout=60).token_ids) == 3
    shared = len(prompts[0]) - 1
    assert sampler.stats["prefill_tokens"] - before["prefill_tokens"] == shared + (len(prompts[3]) - 1 - shared)
    assert sampler.stats["reused_tokens"] - before["reused_tokens"] == 3 * shared


@pytest.mark.parametrize("kernel", ["cpu flash", "written out"])
def test_shared_prefix_attention_equals_attention_over_whole_rows(kernel, monkeypatch):
    """A prefix every row shares, attended once for all rows' queries and merged with each
    row's own part (left-padded, masked) by log-sum-exp, equals SDPA over the whole rows."""
    if hf_cache.growing_layer() is None:
        pytest.skip(f"transformers {transformers.__version__} (< 5): the sampler keeps no shared prefix")
    if kernel == "written out":
        monkeypatch.setattr(hf_cache, "CPU_KERNEL", "no_such_kernel")
    torch.manual_seed(0)
    rows, heads, kv_heads, dim, shared, own = 3, 4, 2, 8, 50, [7, 20, 13]
    prefix = [(torch.randn(kv_heads, shared, dim), torch.randn(kv_heads, shared, dim))]
    width = max(own)
    key, value = torch.randn(rows, kv_heads, width, dim), torch.randn(rows, kv_heads, width, dim)
    mask = torch.arange(width)[None, :] >= torch.tensor([width - n for n in own])[:, None]
    query = torch.randn(rows, heads, 1, dim)

    class Layer:
        layer_idx = 0
    out, _ = hf_cache.shared_prefix_attention(Layer(), query, key, value, mask[:, None, None, :],
                                              scaling=dim ** -0.5, shared_prefix=prefix)
    for i, n in enumerate(own):  # each row alone: its prefix and its own tokens, no padding
        k = torch.cat([prefix[0][0], key[i, :, width - n:]], 1).repeat_interleave(heads // kv_heads, 0)
        v = torch.cat([prefix[0][1], value[i, :, width - n:]], 1).repeat_interleave(heads // kv_heads, 0)
        expected = torch.nn.functional.scaled_dot_product_attention(query[i], k, v)  # [heads, 1, dim]
        assert torch.allclose(out[i, 0], expected[:, 0], atol=1e-5)


def test_rows_sharing_a_prompt_read_it_once_and_get_the_tokens_they_get_alone(sampler, tokenizer):
    """Rows that start with the same long prompt (one task's episodes) keep its keys and values
    once while they run together, joining and leaving at different steps, and sample exactly
    what each samples alone."""
    if hf_cache.growing_layer() is None:
        pytest.skip(f"transformers {transformers.__version__} (< 5): the sampler keeps no shared prefix")
    before = sampler.stats["shared_steps"]  # one row alone never shares
    join_one_by_one_as_alone(sampler, tokenizer,
                             [(LONG + "first", 1, 70), (LONG + "a second one", 2, 30), (LONG, 3, 50)])
    assert sampler.stats["shared_steps"] - before >= 40  # the steps with two rows or more


def test_a_batch_changes_without_losing_a_row():
    """The batch's layout (see hf_cache): rows join into free slots, a longer row moves the batch,
    a finished row's slot takes the last row, a step out of columns makes room; each row's keys
    and values stay what they were, and the freed columns are trimmed off."""
    def row(n: int, fill: float) -> list:
        return [(torch.full((2, n, 4), fill + layer), torch.full((2, n, 4), -fill - layer)) for layer in (0, 1)]

    def check(batch, expected: dict) -> None:
        lengths = [n for n, _ in expected.values()]
        for got, (n, fill) in zip([batch.row(i, n) for i, n in enumerate(lengths)], expected.values()):
            for layer, (k, v) in enumerate(got):
                assert k.shape[1] == n and bool((k == fill + layer).all()) and bool((v == -fill - layer).all())
        assert batch.span == max(lengths)

    batch = hf_cache.Batch.of([row(5, 1.0), row(3, 2.0)], [5, 3], room=2, slots=4)
    check(batch, {"a": (5, 1.0), "b": (3, 2.0)})
    width = batch.width
    batch.join([5, 3], [row(4, 3.0)], [4], room=2)  # fits: written into a free slot
    assert batch.width == width
    check(batch, {"a": (5, 1.0), "b": (3, 2.0), "c": (4, 3.0)})
    batch.join([5, 3, 4], [row(200, 4.0)], [200], room=2)  # longer than the batch: it moves
    assert batch.width >= 200
    check(batch, {"a": (5, 1.0), "b": (3, 2.0), "c": (4, 3.0), "d": (200, 4.0)})
    order = batch.remove([1, 3], [5, 3, 4, 200])
    assert order == [0, 2] and batch.n == 2
    check(batch, {"a": (5, 1.0), "c": (4, 3.0)})  # the long row's columns are trimmed off
    while batch.width + 1 <= batch.layers[0][0].shape[2]:  # use up the room after the end
        batch.width += 1  # (as steps would, their columns left unwritten here)
    used = [b[:2, :, batch.start:batch.width].clone() for layer in batch.layers for b in layer]
    batch.cache()  # out of columns: it makes room, and keeps every used column
    assert batch.layers[0][0].shape[2] > batch.width
    assert all(torch.equal(b[:2, :, batch.start:batch.width], u)
               for b, u in zip((b for layer in batch.layers for b in layer), used))


def test_a_shared_prefix_grows_and_shrinks_without_changing_a_row():
    """Rows keep their keys and values whole (``row()``: shared part and own part) while the
    batch takes more of their common start into its shared prefix, or gives some back to every
    row for a row that shares less; the attended columns follow."""
    def row(n: int, own: float) -> list:  # positions below 10 are common to every row
        k = torch.arange(n, dtype=torch.float32)[None, :, None].expand(2, n, 4).clone()
        k[:, 10:] += own
        return [(k + layer, -k - layer) for layer in (0, 1)]

    def check(batch, rows: list) -> None:
        lengths = [r[0][0].shape[1] for r in rows]
        for got, want in zip([batch.row(i, n) for i, n in enumerate(lengths)], rows):
            assert all(torch.equal(a, b) for (ka, va), (kb, vb) in zip(got, want) for a, b in ((ka, kb), (va, vb)))
        assert batch.span == max(lengths) - batch.shared

    rows = [row(30, 100.0), row(20, 200.0)]
    batch = hf_cache.Batch.of(rows, [30, 20], room=2, slots=3)
    assert batch.shared == 0 and batch.prefix is None
    batch.share(10, [30, 20])  # the common start is kept once from now on
    assert batch.shared == 10 and batch.prefix[0][0].shape[1] == 10
    check(batch, rows)
    rows.append(row(15, 300.0))
    batch.join([30, 20], [rows[-1]], [15], room=2)
    check(batch, rows)
    batch.share(4, [30, 20, 15])  # a row that shares only 4 tokens is coming: 6 go back
    assert batch.shared == 4 and batch.prefix[0][0].shape[1] == 4
    check(batch, rows)
    batch.share(0, [30, 20, 15])
    assert batch.prefix is None and batch.attention_kwargs() == {}
    check(batch, rows)


def test_a_failing_step_fails_its_rows_and_the_sampler_goes_on(sampler, tokenizer, monkeypatch):
    broken = ask(tokenizer, SHORT, seed=1, max_new=5)

    def fail(*args, **kwargs):
        raise RuntimeError("out of memory (injected)")

    with monkeypatch.context() as m:
        m.setattr(hf_cache.Batch, "of", fail)  # joining the batch fails
        sampler._submit(broken)
        with pytest.raises(RuntimeError, match="injected"):
            broken.future.result(timeout=60)
    assert len(sampler.sample(ask(tokenizer, SHORT, seed=1, max_new=5)).token_ids) == 5
