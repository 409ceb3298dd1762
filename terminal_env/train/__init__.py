"""The reference trainer: actor SFT with the critic frozen, critic recalibration with the actor
frozen, and PPO on both over multi-turn episodes. Readable top to bottom, one file per step:

* :mod:`~terminal_env.train.losses`: the arithmetic (GAE over action tokens, PPO's losses, KL,
  entropy, explained variance) as small pure functions with doctests;
* :mod:`~terminal_env.train.models`: the critic (a value head on the actor's body) and
  checkpoints of an actor and its critic that never lose their pairing (:class:`Pair`);
* :mod:`~terminal_env.train.data`: token-exact trajectories to episodes, chat records to
  supervised samples, and padding;
* :mod:`~terminal_env.train.sft`, :mod:`~terminal_env.train.critic`, :mod:`~terminal_env.train.ppo`:
  the three steps.

torch, transformers and safetensors are the optional extra ``[train]``.
"""
