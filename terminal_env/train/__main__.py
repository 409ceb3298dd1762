"""``python -m terminal_env.train sft|critic|ppo ...``: the ``terminal-env train`` commands, as a
module torchrun can launch, one process per device::

    torchrun --nproc-per-node 8 -m terminal_env.train ppo --pair ckpt/c --trajectories runs/r2 --out ckpt/p

Each rank joins the process group from torchrun's environment, loads the pair in float32, shards
it with FSDP2 (bf16 compute with ``--precision bf16``, the default on CUDA) and trains on its share
of every minibatch; rank 0 writes the checkpoint and the report. Without torchrun it is the
single-process command.
"""

from __future__ import annotations

import os
import sys

from ..cli import main
from . import distributed


def run(argv: list[str]) -> int:
    code = main(["train", *argv])
    if distributed.is_distributed():
        distributed.finish()
        # leave without Python's shutdown, where a gloo worker thread rarely aborts the process (finish())
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
