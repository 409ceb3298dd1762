"""The tests' helpers around the tiny in-process model (terminal_env.train.tiny), for the tests of
the local backend, of token-exact rollouts and of the trainer. Import it after ``pytest.importorskip("transformers")``."""

from __future__ import annotations

import pytest
import torch

from terminal_env.train.tiny import CORPUS, TEMPLATE, make_model, make_tokenizer  # noqa: F401 (re-exported)


def rescore(model, ids: list[int], temperature: float = 1.0) -> torch.Tensor:
    """log p(ids[i] | ids[:i]) for every i >= 1 (index i-1 of the result), logits / temperature."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    logp = (logits / temperature).log_softmax(-1)
    return logp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def state(module) -> dict:
    """A copy of ``module``'s weights (to compare with after training)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.fixture(scope="module")
def tokenizer():
    """The tiny tokenizer, as a fixture (test modules import it with the model helpers)."""
    return make_tokenizer()


@pytest.fixture
def pair(tokenizer):
    """A fresh actor/critic pair of the tiny model (1,024-token context)."""
    from terminal_env.train.models import Pair

    return Pair.start(make_model(tokenizer, context=1024), tokenizer)
