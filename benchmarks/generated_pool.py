"""The generated training pool: how big it is, what it costs to build, and whether its oracle and
nop agents do what they should, over a stated sample.

Usage: python benchmarks/generated_pool.py [--n 60] [--per-family 1] [--out JSON] [--doc FILE]

1. ``terminal-env tasks generate all --n N`` into a fresh directory: wall time, instances, files,
   bytes on disk; per family the variants, the difficulty mix and the oracle's turns.
2. For ``--per-family K`` instances of every family (a fixed sample, seed 0): the image built from
   the content-addressed cache's point of view (cold: the instance's own layer; every instance
   shares its image family's base layers), its size beyond the base image, then one oracle
   episode and one nop episode through the protected verifier: rewards and verification time.

The baseline of the same run is the base image itself (size, and a bare container's
create+start+remove). With ``--doc`` the families' table is written as Markdown (the table of
``docs/generated-pool.md``). Prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import emit, log, stats

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.models.simple import NopBackend, OracleBackend
from terminal_env.sandbox.engine import get_client
from terminal_env.tasks import load_task
from terminal_env.tasks.build import build_image
from terminal_env.tasks.check import sample_per_group
from terminal_env.tasks.families import FAMILIES
from terminal_env.tasks.families.base import IMAGES
from terminal_env.tasks.generate import generate


def du(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def family_rows(written) -> list[dict]:
    rows = []
    for name, family in FAMILIES.items():
        mine = [w for w in written if w.family == name]
        turns = [int(load_task(w.path).metadata.get("oracle_turns", 1)) for w in mine[:12]]
        rows.append({
            "family": name, "category": family.category, "split": family.split, "count": len(mine),
            "variants": len({w.variant for w in mine}),
            "difficulty": dict(sorted(Counter(w.difficulty for w in mine).items())),
            "oracle_turns": round(statistics.mean(turns), 1) if turns else None,
            "summary": family.summary,
        })
    return rows


def play(task, backend) -> tuple[float, float]:
    env = TerminalEnv(task, reward="partial_progress", max_steps=40)
    try:
        reward, _ = run_episode(env, backend)
        return reward, float(env.verifier.last_timings.get("total", float("nan")))
    finally:
        env.close()


def bare_container_s(client, image: str, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        c = client.containers.create(image, ["true"], network_disabled=True)
        c.start()
        c.wait()
        c.remove(force=True)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)


def markdown(rows: list[dict]) -> str:
    out = ["| family | category | split | instances | variants | easy / medium / hard | oracle turns | what varies |",
           "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["category"], r["split"], r["family"])):
        d = r["difficulty"]
        out.append(f"| `{r['family']}` | {r['category']} | {r['split']} | {r['count']} | {r['variants']} | "
                   f"{d.get('easy', 0)} / {d.get('medium', 0)} / {d.get('hard', 0)} | {r['oracle_turns']} | "
                   f"{r['summary'].replace('|', '/')} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60, help="instances per family (default 60)")
    ap.add_argument("--per-family", type=int, default=1, help="instances played per family (default 1)")
    ap.add_argument("--pool", type=Path, help="generate here (default: a temporary directory)")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--doc", help="write the families' Markdown table here")
    args = ap.parse_args()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.pool or Path(tmp) / "pool"
        t0 = time.perf_counter()
        written = generate(FAMILIES.values(), root, n=args.n, seed=0)
        gen_s = time.perf_counter() - t0
        n_files, n_bytes = du(root)
        log(f"generated {len(written)} instances of {len(FAMILIES)} families in {gen_s:.1f} s")
        rows = family_rows(written)
        if args.doc:
            Path(args.doc).write_text(markdown(rows))
        client = get_client()
        base_sizes = {k: client.images.get(v).attrs["Size"] for k, v in IMAGES.items()}
        sample = sample_per_group([w.path for w in written], lambda p: load_task(p).metadata["family"],
                                  args.per_family, seed=0)
        played = []
        for path in sample:
            task = load_task(path)
            t0 = time.perf_counter()
            tag = build_image(task, client)
            build_s = time.perf_counter() - t0
            size = client.images.get(tag).attrs["Size"]
            base = IMAGES["dev"] if "dev:" in path.joinpath("environment/Dockerfile").read_text() else IMAGES["base"]
            oracle, oracle_verify = play(task, OracleBackend())
            nop, nop_verify = play(task, NopBackend())
            row = {"task": task.name, "family": task.metadata["family"], "difficulty": task.difficulty,
                   "build_s": round(build_s, 2), "own_bytes": size - client.images.get(base).attrs["Size"],
                   "oracle_reward": round(oracle, 4), "nop_reward": round(nop, 4),
                   "verify_s": round(oracle_verify, 3), "nop_verify_s": round(nop_verify, 3)}
            played.append(row)
            log(f"{task.name}: build {build_s:.1f} s, oracle {oracle:.2f}, nop {nop:.2f}, verify {oracle_verify:.2f} s")
            client.images.remove(tag, force=True, noprune=False)  # a cold build for the next sample
        oracle_ok = [r for r in played if r["oracle_reward"] >= 1.0]
        nop_fail = [r for r in played if r["nop_reward"] < 1.0]
        doc = {
            "benchmark": "generated_pool",
            "families": len(FAMILIES), "instances": len(written), "n_per_family": args.n,
            "generate_s": round(gen_s, 2), "files": n_files, "bytes_on_disk": n_bytes,
            "splits": dict(Counter(w.split for w in written)),
            "difficulty": dict(Counter(w.difficulty for w in written)),
            "categories": dict(Counter(FAMILIES[w.family].category for w in written)),
            "sample": {"per_family": args.per_family, "played": len(played),
                       "oracle_pass_rate": round(len(oracle_ok) / max(1, len(played)), 4),
                       "nop_fail_rate": round(len(nop_fail) / max(1, len(played)), 4),
                       "oracle_failures": [r["task"] for r in played if r not in oracle_ok],
                       "nop_passes": [r["task"] for r in played if r not in nop_fail],
                       "build_s": stats([r["build_s"] for r in played]),
                       "verify_s": stats([r["verify_s"] for r in played]),
                       "own_image_bytes": stats([r["own_bytes"] for r in played]),
                       "rows": played},
            "baseline": {"base_image_bytes": base_sizes,
                         "bare_container_create_start_remove_s": bare_container_s(client, IMAGES["base"])},
            "estimate_all_images_bytes": int(sum(base_sizes.values()) + len(written) *
                                             statistics.mean([r["own_bytes"] for r in played] or [0])),
            "families_table": rows,
            "wall_s": round(time.perf_counter() - t_start, 1),
        }
    emit(doc, args.out)
    return 0 if played and len(oracle_ok) == len(played) and len(nop_fail) == len(played) else 1


if __name__ == "__main__":
    sys.exit(main())
