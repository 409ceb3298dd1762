"""``terminal-env tasks ...``: validate, build and import task directories.

Wired into the main parser with :func:`add_tasks_parser`. Each command returns an exit status
(0 fine, 1 problems found); user mistakes and infrastructure failures raise
:class:`~terminal_env.errors.TerminalEnvError` subclasses, which the main CLI prints as one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import ConfigError, InfraError
from ..sandbox.engine import get_client, require_runtimes
from ..sandbox.images import image_exists
from .build import BuildSettings, build_image, image_tag, parse_base_map
from .check import PROBES, check_task, sample_paths, sample_per_group, task_digest
from .compose import prepare_services
from .families import FAMILIES
from .generate import DEFAULT_N, DEFAULT_SEED, generate, select
from .load import find_tasks, load_task, read_task, validate
from .pool import similarity_background
from .scaffold import new_task
from .schema import Problem
from .similarity import THRESHOLD as SIMILARITY_THRESHOLD
from .similarity import similar_pairs
from .tb1_import import import_tb1, import_tb1_folder

console = Console(highlight=False)


def _problem_table(problems: list[Problem], title: str) -> Table:
    table = Table(title=title, show_lines=False)
    for col in ("file", "field", "severity", "message"):
        table.add_column(col, overflow="fold")
    for p in problems:
        style = "red" if p.severity == "error" else "yellow"
        # Text, not markup: messages contain [tables] that rich would read as tags
        table.add_row(Text(p.file), Text(p.field or "-"), Text(p.severity, style=style),
                      Text(p.message))
    return table


def cmd_validate(args: argparse.Namespace) -> int:
    problems = validate(args.paths, strict=args.strict)
    errors = [p for p in problems if p.severity == "error"]
    if args.json:
        print(json.dumps({"ok": not errors, "problems": [p.to_dict() for p in problems]}, indent=2))
        return 1 if errors else 0
    try:
        n_tasks = len(find_tasks(args.paths))
    except ConfigError:
        n_tasks = 0
    if problems and console.is_terminal:
        console.print(_problem_table(problems, f"{len(errors)} error(s), "
                                     f"{len(problems) - len(errors)} warning(s)"))
    elif problems:
        # Piped or captured: one problem a line (file: field: severity: message), for grep.
        for p in problems:
            print(f"{p.file}: {p.field or '-'}: {p.severity}: {p.message}")
    verdict = "[red]invalid[/red]" if errors else "[green]valid[/green]"
    console.print(f"{n_tasks} task(s) checked: {verdict}")
    return 1 if errors else 0


def cmd_new(args: argparse.Namespace) -> int:
    d = new_task(args.name, args.dir, category=args.category, family=args.family)
    console.print(f"created {d}: write instruction.md, environment/, tests/test_outputs.py and "
                  f"solution/solve.sh, then run `terminal-env tasks check {d}` (docs/task-authoring.md)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    base_map = parse_base_map(args.base_map) if args.base_map else None  # None: $TERMINAL_ENV_BASE_MAP
    tasks = [load_task(p) for p in find_tasks(args.paths)]  # every task valid before any build
    client = get_client()
    table = Table(title=f"{len(tasks)} task image(s)")
    for col in ("task", "image", "status", "seconds"):
        table.add_column(col)
    failed = 0
    for task in tasks:
        t0 = time.monotonic()
        kw: dict[str, Any] = {"base_map": base_map, "ca_bundle": args.ca_bundle}
        cached = not args.force and image_exists(client, image_tag(task, **kw))
        try:
            tag = build_image(task, client, timeout=args.timeout, force=args.force,
                              log=lambda line: _progress(line, args.verbose), **kw)
            if task.compose_file is not None:  # and the images of its other services
                stack, _ = prepare_services(
                    task, tag, settings=BuildSettings.resolve(base_map, args.ca_bundle), client=client,
                    log=lambda line: _progress(line, args.verbose), force=args.force)
                tag += f" (+ {', '.join(stack.services)})"
        except (InfraError, ConfigError) as exc:  # one task's failure does not stop the others
            failed += 1
            console.print(Text(f"error: {exc}", style="red"))
            table.add_row(Text(task.name), "-", Text("failed", style="red"),
                          f"{time.monotonic() - t0:.1f}")
            continue
        table.add_row(Text(task.name), Text(tag), "cached" if cached else "built",
                      f"{time.monotonic() - t0:.1f}")
    console.print(table)
    return 1 if failed else 0


def _progress(line: str, verbose: bool) -> None:
    """The whole build log with --verbose, else only its steps."""
    if verbose or line.startswith(("Step ", "building ")):
        console.print(Text(line, style="dim"))


def cmd_import_tb1(args: argparse.Namespace) -> int:
    """One task (SRC has a task.yaml) or every task of a folder, each reported."""
    if not (Path(args.src) / "task.yaml").is_file() and Path(args.src).is_dir():
        results = import_tb1_folder(args.src, args.dest)
        table = Table(title=f"import-tb1: {sum(r.ok for r in results)} of {len(results)} task(s) "
                            f"imported into {args.dest}")
        for col in ("task", "status", "detail"):
            table.add_column(col, overflow="fold")
        for r in results:
            table.add_row(r.name, Text("imported", style="green") if r.ok else Text("not imported", style="red"),
                          r.detail or "-")
        console.print(table)
        return 0 if all(r.ok for r in results) else 1
    dest = import_tb1(args.src, args.dest)
    _, problems = read_task(dest)
    if problems:
        console.print(_problem_table(problems, "warnings of the imported task"))
    console.print(f"imported {args.src} -> [bold]{dest}[/bold] (Harbor format)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Build each task and run the gate's probes (oracle, nop, snoop, then those of
    ``--probes``); a table and an exit status."""
    paths = find_tasks(args.paths)
    if args.split:  # before sampling, so that --sample N gives N tasks of those splits
        paths = [p for p in paths if _split_of(p) in args.split]
    if args.per_family is not None:
        if args.per_family < 1:
            raise ConfigError(f"--per-family {args.per_family}: check at least one task per family")
        paths = sample_per_group(paths, _family_of, args.per_family, args.seed)
    paths = sample_paths(paths, args.sample, args.seed)
    if not paths:
        raise ConfigError(f"no task directories under {' '.join(args.paths)}")
    done, other = _rows_so_far(args, paths) if args.resume else ([], [])
    if done:
        seen = {row.get("path") for row in done}
        paths = [p for p in paths if str(p) not in seen]
        console.print(f"resuming: {len(done)} task(s) already checked in {args.json}")
    env_kw: dict[str, Any] = {"runtime": args.runtime} if args.runtime else {}
    env_kw["probes"] = _probes(args.probes)
    if args.runtime:
        require_runtimes(get_client(), [args.runtime])  # a missing runtime: one clear error, first
    console.print(f"checking {len(paths)} task(s) with {args.jobs} job(s)"
                  + (f" under {args.runtime}" if args.runtime else ""))
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = []
        for row in pool.map(lambda p: check_task(p, **env_kw), paths):
            mark = "[green]ok[/green]" if row.ok else f"[red]FAIL[/red] {row.reason[:200]}"
            console.print(f"  {row.task}: {mark} ({row.check_s} s)")
            rows.append(row)
            if args.json:  # after every task, so that a cut-off run loses nothing (--resume)
                _write_rows(args.json, other + done + [r.to_dict() for r in rows])
    header = ("task", "split", "category", "difficulty", "build s", "oracle", "nop", "snoop",
              "rewrite", "constant", "instance", "checks", "check s", "status")
    cells = [(r.task, r.split or "-", r.category or "-", r.difficulty or "-", f"{r.build_s}",
              r.oracle, r.nop, r.snoop, r.rewrite, r.constant, r.instance, f"{r.checks}",
              f"{r.check_s}", "ok" if r.ok else "FAIL: " + r.reason) for r in rows]
    verdict = f"{sum(r.ok for r in rows)}/{len(rows)} ok"
    if done:
        verdict += (f" ({sum(r.ok for r in rows) + sum(bool(d.get('ok')) for d in done)}/"
                    f"{len(rows) + len(done)} ok with the {len(done)} checked before)")
    if console.is_terminal:
        table = Table(title=f"tasks check: {verdict} in {time.monotonic() - t0:.0f} s")
        for col in header:
            table.add_column(col, overflow="fold")
        for row_cells in cells:
            status = row_cells[-1]
            table.add_row(*row_cells[:-1], Text(status, style="green" if status == "ok" else "red"))
        console.print(table)
    else:  # piped or captured: one row a line, tab-separated
        print("\t".join(header))
        for row_cells in cells:
            print("\t".join(row_cells))
        print(verdict)
    if args.json:
        _write_rows(args.json, other + done + [r.to_dict() for r in rows])
    return 0 if all(r.ok for r in rows) and all(d.get("ok") for d in done) else 1


def _rows_so_far(args: argparse.Namespace,
                 paths: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``--resume``: the rows an earlier run wrote to ``--json FILE`` for the tasks asked for now,
    less those of tasks whose files changed since (checked again); and the rows of tasks not
    asked for this time (kept in the file, not counted)."""
    if not args.json:
        raise ConfigError("--resume needs --json FILE: the rows checked so far are read from it")
    path = Path(args.json)
    if not path.is_file():
        return [], []
    try:
        rows = json.loads(path.read_text())
    except ValueError as e:
        raise ConfigError(f"--resume: {path} is not the JSON a 'tasks check --json' writes ({e}); "
                          "move it away to start over") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "path" in r for r in rows):
        raise ConfigError(f"--resume: {path} is not a list of 'tasks check' rows; move it away to "
                          "start over")
    wanted = {str(p): p for p in paths}
    kept, other, stale = [], [], 0
    for row in rows:
        p = wanted.get(row["path"])
        if p is None:
            other.append(row)
            continue
        if row.get("digest") != task_digest(p):
            stale += 1
            continue
        kept.append(row)
    if stale:
        console.print(f"resuming: {stale} task(s) changed since {path} was written; checking them again")
    return kept, other


def _write_rows(file: str, rows: list[dict[str, Any]]) -> None:
    tmp = Path(f"{file}.tmp")
    tmp.write_text(json.dumps(rows, indent=2, default=str))
    tmp.replace(file)


def _probes(text: str) -> tuple[str, ...]:
    """``--probes``: a comma-separated subset of the probes for foolable tests, or ``none``."""
    names = tuple(n.strip() for n in text.split(",") if n.strip() and n.strip() != "none")
    unknown = sorted(set(names) - set(PROBES))
    if unknown:
        raise ConfigError(f"--probes: unknown probe(s) {unknown}; choose from {', '.join(PROBES)} "
                          "(comma-separated), or none")
    return names


def cmd_similar(args: argparse.Namespace) -> int:
    """The cross-split similarity report: the most alike pairs, and an exit status of 1 when a
    pair of different splits is at or above the threshold."""
    tasks = [load_task(p) for p in find_tasks(args.paths)]
    if len(tasks) < 2:
        raise ConfigError(f"need at least two tasks under {' '.join(args.paths)} to compare")
    pairs = similar_pairs(tasks, cross_split_only=not args.all, background=similarity_background(tasks))
    over = [p for p in pairs if p.cross_split and p.score >= args.threshold]
    shown = pairs[: max(args.top, len(over))]
    table = Table(title=f"{'all' if args.all else 'cross-split'} pairs of {len(tasks)} tasks, most "
                        f"alike first; {len(over)} cross-split pair(s) at or above {args.threshold}")
    for col in ("similarity", "task", "split", "task", "split", "shared"):
        table.add_column(col, overflow="fold")
    for p in shown:
        style = "red" if p.cross_split and p.score >= args.threshold else None
        table.add_row(Text(f"{p.score:.3f}", style=style or ""), p.a, p.split_a or "-", p.b,
                      p.split_b or "-", ", ".join(p.shared_files or p.words))
    console.print(table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dataclasses.asdict(p) for p in pairs], fh, indent=2)
    return 1 if over else 0


def _family_of(path: Any) -> str:
    try:
        task = load_task(path)
    except ConfigError:
        return Path(path).name
    return str(task.metadata.get("family") or task.name)


def cmd_generate(args: argparse.Namespace) -> int:
    """Write generated task families (:mod:`.generate`) and say what was written."""
    families = select(args.families)
    t0 = time.monotonic()
    written = generate(families, args.out, n=args.n, seed=args.seed)
    by_split: dict[str, int] = {}
    by_difficulty: dict[str, int] = {}
    for w in written:
        by_split[w.split] = by_split.get(w.split, 0) + 1
        by_difficulty[w.difficulty] = by_difficulty.get(w.difficulty, 0) + 1
    console.print(f"wrote {len(written)} task(s) of {len(families)} family(ies) to {args.out} in "
                  f"{time.monotonic() - t0:.1f} s; splits: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(by_split.items()))
                  + "; difficulty: " + ", ".join(f"{k} {v}" for k, v in sorted(by_difficulty.items())))
    console.print(f"next: terminal-env tasks check {args.out} --per-family 1   (the quality gate on "
                  "one instance of each family)")
    return 0


def cmd_families(args: argparse.Namespace) -> int:
    """The registered families: name, category, split, summary."""
    rows = [(f.name, f.category, f.split, f.summary) for f in FAMILIES.values()]
    if args.json:
        print(json.dumps([dict(zip(("name", "category", "split", "summary"), r)) for r in rows],
                         indent=2))
        return 0
    table = Table(title=f"{len(rows)} task families (terminal-env tasks generate NAME|all)")
    for col in ("family", "category", "split", "summary"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(Text(c) for c in r))
    console.print(table)
    return 0


def _split_of(path: Any) -> str | None:
    try:
        return load_task(path).split
    except ConfigError:
        return None


def add_tasks_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``tasks validate|build|check|similar|import-tb1`` to the main CLI's subparsers."""
    t = subparsers.add_parser("tasks", help="validate, build and import task directories")
    sub = t.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")

    v = sub.add_parser("validate", help="report every problem of the tasks (file, field, reason)")
    v.add_argument("paths", nargs="+", metavar="PATH", help="a task dir, or a dir of task dirs")
    v.add_argument("--strict", action="store_true", help="treat warnings as errors")
    v.add_argument("--json", action="store_true", help="print JSON")
    v.set_defaults(func=cmd_validate)

    n = sub.add_parser("new", help="scaffold a task (the kit's tests, two example checks, a solution)")
    n.add_argument("name", help="the task's name: lowercase letters, digits and dashes")
    n.add_argument("--dir", default=".", help="where to create it (default: here)")
    n.add_argument("--category", default="software-engineering")
    n.add_argument("--family", default="base", choices=["base", "dev"],
                   help="the image family to build on (dev: compilers and build tools)")
    n.set_defaults(func=cmd_new)

    b = sub.add_parser("build", help="build the tasks' images (cached by content)")
    b.add_argument("paths", nargs="+", metavar="PATH")
    b.add_argument("--base-map", action="append", metavar="IMAGE=LOCAL",
                   help="build FROM LOCAL where a Dockerfile says FROM IMAGE (repeatable; added "
                        "to the built-in Terminal-Bench mappings)")
    b.add_argument("--ca-bundle", metavar="FILE",
                   help="the host's CA bundle, for builds behind a TLS-intercepting proxy")
    b.add_argument("--timeout", type=float, default=None,
                   help="build timeout in seconds (default: the task's build_timeout_sec)")
    b.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    b.add_argument("-v", "--verbose", action="store_true", help="print the build log")
    b.set_defaults(func=cmd_build)

    c = sub.add_parser("check", help="quality gate: build, then oracle/nop/snoop and the "
                       "rewrite/constant/instance probes")
    c.add_argument("paths", nargs="*", default=["tasks"], metavar="PATH",
                   help="task dirs or dirs of task dirs (default: the bundled pool, ./tasks)")
    c.add_argument("--sample", type=int, default=None, metavar="N",
                   help="check a fixed sample of N tasks (same N and seed, same tasks)")
    c.add_argument("--per-family", type=int, default=None, metavar="N",
                   help="check a fixed sample of N tasks of every family (metadata.family)")
    c.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    c.add_argument("--split", action="append", choices=["train", "validation", "test"],
                   help="only tasks of this split (repeatable)")
    c.add_argument("--jobs", type=int, default=1, help="tasks checked in parallel (default 1)")
    c.add_argument("--json", metavar="FILE", help="also write the rows (with times) as JSON, "
                   "after every task")
    c.add_argument("--resume", action="store_true", help="skip the tasks already in --json FILE "
                   "(a run over thousands of tasks, cut off, goes on where it stopped)")
    c.add_argument("--runtime", help="OCI runtime of the probes' sandboxes, e.g. runsc (gVisor; "
                   "SECURITY.md); default: each task's, else the engine's")
    c.add_argument("--probes", default=",".join(PROBES), metavar="LIST",
                   help="probes for foolable tests run after oracle, nop and snoop: "
                        f"{', '.join(PROBES)} (default: all; 'none' for none). rewrite: the oracle "
                        "on shrunken inputs; constant: knowledge-free answers; instance: a second "
                        "build without cache")
    c.set_defaults(func=cmd_check)

    g = sub.add_parser("generate", help="write generated task families as task directories "
                       "(deterministic: the same arguments, the same bytes)")
    g.add_argument("families", nargs="+", metavar="FAMILY",
                   help="family names, or 'all' (`terminal-env tasks families` lists them)")
    g.add_argument("--n", type=int, default=DEFAULT_N,
                   help=f"instances per family (default {DEFAULT_N})")
    g.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed (default {DEFAULT_SEED})")
    g.add_argument("--out", required=True, metavar="DIR",
                   help="where to write: DIR/<family>/<family>-s<seed>-<index>/")
    g.set_defaults(func=cmd_generate)

    f = sub.add_parser("families", help="list the generated task families")
    f.add_argument("--json", action="store_true", help="print JSON")
    f.set_defaults(func=cmd_families)

    m = sub.add_parser("similar", help="cross-split similarity report (one theme must live in one split)")
    m.add_argument("paths", nargs="*", default=["tasks"], metavar="PATH",
                   help="task dirs or dirs of task dirs (default: the bundled pool, ./tasks)")
    m.add_argument("--threshold", type=float, default=SIMILARITY_THRESHOLD,
                   help=f"cross-split pairs at or above this are errors (default {SIMILARITY_THRESHOLD})")
    m.add_argument("--top", type=int, default=15, help="pairs shown at least (default 15)")
    m.add_argument("--all", action="store_true", help="include pairs within one split")
    m.add_argument("--json", metavar="FILE", help="also write every pair as JSON")
    m.set_defaults(func=cmd_similar)

    i = sub.add_parser("import-tb1", help="write Terminal-Bench 1.x tasks in Harbor's format")
    i.add_argument("src", metavar="SRC", help="a task directory (with task.yaml), or a folder of "
                   "them (a Terminal-Bench checkout's tasks/): each is imported into DEST/<name>")
    i.add_argument("dest", metavar="DEST", help="the new task directory (or, for a folder, the "
                   "directory that receives one directory per task)")
    i.set_defaults(func=cmd_import_tb1)
    return t
