"""Writing a harness plugin: a conversation format of your own, registered and played end to end.

    python examples/harness_plugin.py

What it shows: a harness owns the conversation format and nothing else. It subclasses
``terminal_env.harness.Harness`` and implements four things: ``name``, ``system_prompt()``,
``parse()`` (the model's reply -> harness actions, or a ``FormatError`` whose text the model reads
next) and ``compile()`` (a harness action -> the generic actions ``Command`` / ``Keys`` /
``Submit`` that step the environment). It never touches the sandbox.

The format here: a reply is ``RUN: <command>`` (the command may continue on the next lines) or
``DONE``.

Harnesses are found by name through the entry-point group ``terminal_env.harnesses``; a package
declares it in its ``pyproject.toml`` (``harnesses/json_command`` is a complete one)::

    [project.entry-points."terminal_env.harnesses"]
    run-done = "my_package.harness:RunDoneHarness"

and after ``pip install`` the name works everywhere a harness is named: ``terminal-env run
--harness run-done``, ``get_harness("run-done")``, ``RolloutPool.rollout(..., "run-done")``. This
example does in-process what ``pip install`` would do: it writes the package's ``.dist-info``
(metadata and ``entry_points.txt``) into a temporary directory on ``sys.path``. (``run_agent``
also takes a harness instance directly; only the places that take a name need the entry point.)

Then a scripted model that speaks the format (``ScriptedBackend``: fixed replies, no server)
plays one episode of the bundled task ``td-csv-region-totals``: a first reply out of format (to
show the feedback), then the commands that solve it, then ``DONE``. Needs the Docker engine and
the base image (``bash scripts/setup.sh``). Exits 1 unless the episode is a verified success.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from terminal_env import TerminalEnv
from terminal_env.actions import Command, Submit
from terminal_env.agent import run_agent
from terminal_env.harness import ENTRY_POINT_GROUP, available_harnesses, get_harness
from terminal_env.harness.base import ActionResult, FormatError, Harness, HarnessAction
from terminal_env.models.base import Completion
from terminal_env.models.simple import ScriptedBackend

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tasks" / "td-csv-region-totals"

USAGE = "Reply with `RUN: <command>` to run a shell command, or `DONE` when the task is finished."


class RunDoneHarness(Harness):
    """``RUN: <command>`` runs a command in the shell; ``DONE`` submits."""

    name = "run-done"  # recorded in every trajectory this harness plays

    def system_prompt(self) -> str:
        return ("You solve a task in a Linux terminal (bash, in a container). " + USAGE +
                " One action per reply; you see the command's output in the next message. "
                "After DONE, hidden tests check your work.")

    def parse(self, completion: Completion) -> list[HarnessAction]:
        text = completion.text.strip()
        if text == "DONE":
            return [HarnessAction(tool="done")]
        if text.startswith("RUN:") and text[len("RUN:"):].strip():
            return [HarnessAction(tool="run", args={"command": text[len("RUN:"):].strip()})]
        raise FormatError(f"Your reply was not understood. {USAGE}")  # the model reads this

    def compile(self, action: HarnessAction) -> list[Command | Submit]:
        if action.tool == "done":
            return [Submit()]
        return [Command(command=action.args["command"])]

    # Optional: how results are shown (the default joins the commands' observations).
    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict]:
        text = "\n".join(r.observation for r in results).strip() or "(no output)"
        return [{"role": "user", "content": f"OUTPUT:\n{text}"}]


def install_entry_point(site: Path) -> None:
    """What ``pip install`` of a package declaring the entry point leaves behind: a dist-info
    directory, on a path Python searches."""
    dist = site / "terminal_env_run_done-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: terminal-env-run-done\nVersion: 0.1.0\n")
    # NAME = module:attribute; here this script's own module (``__main__`` when run as a script)
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nrun-done = {__name__}:RunDoneHarness\n")
    sys.path.insert(0, str(site))


# What the scripted model answers, turn by turn.
REPLIES = [
    "Let me start by looking at the data.",  # no RUN: -> a format error, and the model is told
    "RUN: head -3 /app/data/sales_sample.csv",
    """RUN: cat > /app/region_totals.sh <<'EOF'
#!/bin/bash
echo "region,orders,units,revenue"
awk -F, 'NR > 1 && NF >= 4 { n[$1]++; u[$1] += $3; r[$1] += $3 * $4 }
  END { for (k in n) printf "%s,%d,%d,%.2f\\n", k, n[k], u[k], r[k] }' "$1" |
  LC_ALL=C sort -t, -k1,1
EOF""",
    "RUN: chmod +x /app/region_totals.sh && /app/region_totals.sh /app/data/sales_sample.csv",
    "DONE",
]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="harness-plugin-") as site:
        install_entry_point(Path(site))
        assert "run-done" in available_harnesses(), available_harnesses()
        harness = get_harness("run-done")  # found through the entry point, like any plugin
        print(f"harnesses available: {', '.join(available_harnesses())}")

        env = TerminalEnv(str(TASK), reward="binary")
        try:
            backend = ScriptedBackend(REPLIES, name="scripted-run-done")
            traj = run_agent(env, harness, backend, max_turns=10)
        finally:
            env.close()
        sys.path.remove(site)

    for turn in traj.turns:
        first, *rest = (turn.completion.text if turn.completion else "").splitlines() or [""]
        print(f"\nturn {turn.index}: {first}{' ...' if rest else ''}")
        if turn.format_error:
            print(f"  format error, the model is told: {turn.format_error}")
        for result in turn.actions:
            for command in result.commands:
                print(f"  ran {command.text.splitlines()[0]!r} -> exit {command.exit_code}")
    print(f"\n{traj.task.name} with the {traj.harness!r} harness: {traj.termination}, "
          f"outcome {traj.outcome}, reward {traj.reward}")
    print(f"generic actions run: {len(traj.generic_commands())} (the trajectory keeps them, "
          "whatever the harness)")
    return 0 if traj.harness == "run-done" and traj.strict_success else 1


if __name__ == "__main__":
    sys.exit(main())
