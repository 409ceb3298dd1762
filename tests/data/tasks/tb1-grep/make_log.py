"""Writes the server log the task is about (deterministic: seed 11)."""

import random

r = random.Random(11)
levels = ["INFO"] * 6 + ["WARNING"] * 2 + ["ERROR"] * 2
for i in range(200):
    level = r.choice(levels)
    print(f"2024-05-{1 + i // 24:02d}T{i % 24:02d}:00:00 {level} worker-{r.randint(1, 4)} "
          f"request {1000 + i} {'failed: timeout' if level == 'ERROR' else 'ok'}")
