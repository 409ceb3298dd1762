"""Model backends: OpenAI-compatible servers, local transformers models, scripted and simple policies."""
