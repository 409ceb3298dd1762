"""Adapters into the trainers researchers already use.

Each adapter lives in its own module and imports its library only when used, so this package
imports nothing beyond the environment:

- :mod:`terminal_env.integrations.trl`: an environment class for TRL's
  ``GRPOTrainer(environment_factory=...)`` and the dataset rows it reads (extra ``[trl]``);
- :mod:`terminal_env.integrations.skyrl`: a SkyRL-Gym ``BaseTextEnv`` over one task per episode,
  registered as ``terminal-env`` (extra ``[skyrl]``);
- :mod:`terminal_env.integrations.openenv`: tasks served over OpenEnv's protocol, and its client
  (extra ``[openenv]``);
- :mod:`terminal_env.integrations.gateway`: an OpenAI-compatible server in front of any backend
  that records the exact tokens of every call, for agents the project did not write;
- :mod:`terminal_env.integrations.miniswe`: mini-swe-agent's environment over a task's sandbox
  (extra ``[miniswe]``).

What they share is :mod:`terminal_env.integrations.episode`: one task, one sandbox, tool calls
turned into the environment's actions, the protected verifier run once, and an infrastructure
failure told apart from the agent's failure. See ``docs/rl-integration.md``.
"""
