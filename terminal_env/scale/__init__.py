"""Many episodes at once: warm pools of ready sandboxes (``warm``), the asyncio rollout pool for
trainers (``rollout``), and rollout workers on a Ray cluster (``cluster`` on the driver,
``worker`` on each host). Every episode is played by :func:`terminal_env.trial.play_trial`.

Nothing is imported here, so that the environment can use ``scale.warm`` without loading the
layers above it; import from the modules.
"""
