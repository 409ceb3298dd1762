"""Model backends: OpenAI-compatible servers, local transformers models, and the agents that are not models (scripted, replay, oracle, nop, human)."""
