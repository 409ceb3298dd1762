"""Terminal tasks served over OpenEnv's protocol, played by OpenEnv's own client.

    python examples/openenv_client.py                 # serves a generated toy task on 127.0.0.1, plays it (~10 s)

Needs the extra ``[openenv]`` (``pip install 'terminal-env[openenv]'``) and a Docker engine.

What it shows: ``make_app`` is OpenEnv's FastAPI app over ``TerminalEnv`` (one sandbox per
WebSocket session); here it runs under uvicorn in a thread on a loopback port, and
``TerminalEnvClient`` (an OpenEnv ``EnvClient``) resets a task, steps it with plain-text actions
and gets the protected verifier's reward when it submits. To serve for real:
``python -m terminal_env.integrations.openenv --tasks pool:generated:train --port 8000``.
"""

from __future__ import annotations

import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

try:
    import uvicorn

    from terminal_env.integrations.openenv import TerminalAction, TerminalEnvClient, make_app
except ImportError as exc:
    sys.exit(f"this example needs the [openenv] extra: pip install 'terminal-env[openenv]' ({exc})")

from terminal_env.tasks.toy import write_toy_family


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        task = write_toy_family(Path(tmp) / "toy", n_train=1, n_validation=0, seed=11)[0]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(make_app([str(task)], reward="partial_progress"),
                                               host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        try:
            answer = (task / "solution" / "solve.sh").read_text().splitlines()[-1]
            with TerminalEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as env:
                result = env.reset(task=task.name)
                print(result.observation.output)
                for action in ("cat /app/answer.txt", answer, "#!submit"):
                    result = env.step(TerminalAction(action=action))
                    print(f"> {action}\n{result.observation.output}")
                print(f"done: {result.done}, reward {result.reward}, outcome {result.observation.outcome}")
        finally:
            server.should_exit = True
            thread.join(timeout=30)
    return 0 if result.reward == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
