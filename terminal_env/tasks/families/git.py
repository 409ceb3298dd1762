"""Generated task families of the git category (see :mod:`.base` for what a family is).

The repositories are written in pure Python (:mod:`.support.h3_gitrepo`) as files under /app, so
every commit's hash is known when the tests are written."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support.h3_history import _AUTHORS, _WORDS, Project, _History, _ident, _render, _tree_of

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ git-pickaxe
# The repositories are a telemetry relay's, not the train families' orders service: a validation
# family shares no file with them (the cross-split rule).
_RELAY = Project("telemetry-relay", "relay", ("collector", "sinks", "schema"),
                 ("probe", "gauge", "span", "sample", "metric", "trace", "sensor", "beacon", "signal",
                  "frame", "pulse", "channel", "stream", "packet", "drift", "jitter", "burst", "quorum"),
                 "Forwards sensor readings to the metrics store.", "[log]\n\tdate = iso\n")

# A history with strings that were added, removed, re-added, renamed with their file, changed in
# value, and added on a merged side branch; questions ask for the commit of one event each.

def _q_first(h: _History, rng, trap):
    tok = h.ident()
    f1, f2 = rng.sample(h.py_files(), 2)
    yield
    h.state[f1].append(f'{tok} = "{rng.choice(h.project.words)}"')
    ans = h.commit(f"Introduce {tok.lower().replace('_', ' ')}")
    if trap:
        yield
        h.state[f1] = [x for x in h.state[f1] if tok not in x]
        h.commit(f"Drop unused thresholds from {f1}")
        yield
        h.state[f2].append(f"{tok} = {rng.randint(2, 99)}")
        h.commit(f"Bring back {tok.lower().replace('_', ' ')} for the exporter")
    return f"In which revision did the token `{tok}` appear for the very first time?", ans


def _q_removal(h: _History, rng, trap):
    tok = h.ident()
    f1, f2 = rng.sample(h.py_files(), 2)
    yield
    h.state[f1].append(f"{tok} = True")
    if trap:
        h.state[f2].append(f"# see {tok}")
    h.commit(f"Add {tok.lower().replace('_', ' ')} flag")
    if trap:
        yield
        h.state[f1] = [x for x in h.state[f1] if tok not in x]
        h.commit(f"Remove flag from {f1}")
    yield
    for f in (f1, f2):
        h.state[f] = [x for x in h.state[f] if tok not in x]
    ans = h.commit("Clean up stale references" if trap else f"Remove {tok.lower().replace('_', ' ')} flag")
    return f"In which revision did the token `{tok}` vanish from every file (its last occurrence deleted)?", ans


def _q_renamed(h: _History, rng, trap):
    tok = h.ident()
    mod = rng.choice(["humidity", "voltage", "airflow", "pressure", "torque", "noise"])
    old, new = f"contrib/{mod}_probe.py", f"relay/probes/{mod}.py"
    yield
    h.state[old] = [f'"""{mod} probe."""', "", f"def read_{mod}(raw):", "    return raw / 100"]
    h.commit(f"Add {mod} probe")
    yield
    h.state[old] += ["", f"{tok} = {rng.randint(100, 999)}"]
    ans = h.commit(f"Calibrate {mod} probe")
    yield
    h.state[new] = h.state.pop(old)
    h.commit(f"Move the {mod} probe into relay.probes")
    if trap:
        return (f"In which revision did the line with `{tok}` get written into the file now called `{new}`? "
                f"(that file was moved there from another path)"), ans
    return f"In which revision did the token `{tok}` appear for the very first time?", ans


def _q_side(h: _History, rng, trap):
    tok = h.ident()
    feat = rng.choice(["mqtt", "statsd", "syslog", "influx", "otlp"])
    yield
    base = h.tip
    side_state = {k: list(v) for k, v in h.state.items()}
    path = f"relay/sink_{feat}.py"
    side_state[path] = [f'"""{feat} sink."""', "", f"def emit_{feat}(sample):", "    return sample"]
    author = rng.choice(_AUTHORS)
    s1 = h.repo.commit(_render(side_state), f"Sketch a {feat} sink", [base], author)
    side_state[path] += ["", f"{tok} = {rng.randint(3, 30)}"]
    ans = h.repo.commit(_render(side_state), f"Batch {feat} writes", [s1], author)
    if trap:
        h.filler()
    h.state[path] = side_state[path]
    h.commit(f"Merge branch 'sink/{feat}'", parents=[h.tip, ans])
    return (f"In which revision did the token `{tok}` appear for the very first time? (a merge "
            "only carried it over: name the revision that wrote it)"), ans


def _q_value(h: _History, rng, trap):
    tok = h.ident()
    f1 = rng.choice(h.py_files())
    yield
    h.state[f1].append(f"{tok} = {rng.randint(10, 50)}")
    h.commit(f"Add {tok.lower().replace('_', ' ')}")
    ans = None
    for _ in range(2):
        yield
        h.state[f1] = [f"{tok} = {rng.randint(51, 900)}" if x.startswith(tok + " =") else x
                       for x in h.state[f1]]
        ans = h.commit(f"Retune thresholds after field trial {rng.randint(2, 40)}")
    if trap:
        yield
        other = rng.choice([p for p in h.py_files() if p != f1])
        h.state[other].append(f"# {tok} is read by the sampler")
        h.commit("Document sampler thresholds")
    return f"In which revision was the number assigned to `{tok}` most recently altered?", ans


_QUESTIONS = {"first-add": _q_first, "removal": _q_removal, "renamed": _q_renamed,
              "side-branch": _q_side, "value-change": _q_value}

_PICKAXE_TESTS = '''"""Compares the object names in /app/answers.txt with the revisions the generator recorded."""

import re
from pathlib import Path

import pytest

EXPECTED = __EXPECTED__


def answers():
    out = {}
    p = Path("/app/answers.txt")
    if p.is_file():
        for line in p.read_text().splitlines():
            m = re.match(r"\\s*(Q\\d+)\\s+([0-9a-fA-F]{40})\\s*$", line)
            if m:
                out[m[1]] = m[2].lower()
    return out
'''


def _pickaxe(rng: random.Random, index: int) -> Instance:
    kinds = sorted(rng.sample(sorted(_QUESTIONS), 4))
    rng.shuffle(kinds)
    traps = {k: rng.random() < 0.6 for k in kinds}
    h = _History(rng, _RELAY)
    gens = [(k, _QUESTIONS[k](h, rng, traps[k])) for k in kinds]
    results: dict[str, tuple[str, str]] = {}
    live = list(gens)
    for _ in range(rng.randint(2, 3)):
        h.filler()
    while live:  # interleave the events of the questions with fillers
        k, g = live.pop(rng.randrange(len(live)))
        try:
            next(g)
            live.append((k, g))
        except StopIteration as stop:
            results[k] = stop.value
        if rng.random() < 0.5:
            h.filler()
    h.filler()
    questions = [results[k] for k in kinds]
    expected = {f"Q{i + 1}": ans for i, (_, ans) in enumerate(questions)}
    qtext = "\n".join(f"{i + 1}. {q}" for i, (q, _) in enumerate(questions))
    instruction = f"""\
`/app/repo` holds the telemetry relay's source under git (branch `main`). Look up, in its log,
the revision each question asks for:

{qtext}

Put the answers in `/app/answers.txt`, one line per question, `Q<number> <sha>`, with `<sha>` the
revision's object name in all its 40 hex digits, e.g. `Q1 0123456789abcdef0123456789abcdef01234567`.
Leave `/app/repo` as it is.
"""
    tests = _PICKAXE_TESTS.replace("__EXPECTED__", repr(expected))
    for i in range(len(questions)):
        tests += f'''

@pytest.mark.weight(1)
def test_question_{i + 1}():
    assert answers().get("Q{i + 1}") == EXPECTED["Q{i + 1}"], "question {i + 1}: not the revision asked for"
'''
    solution = "cat > /app/answers.txt <<'EOF'\n" + "".join(f"{q} {a}\n" for q, a in expected.items()) + "EOF\n"
    n_traps = sum(1 for k in kinds if traps[k] or k in ("side-branch", "value-change"))
    knowledge = 2 if any(k in ("value-change", "renamed") and traps[k] for k in kinds) else 1
    score = 1 + knowledge + (2 if n_traps >= 3 else 1)
    difficulty = "easy" if score <= 2 else "medium" if score <= 4 else "hard"
    omitted = sorted(set(_QUESTIONS) - set(kinds))[0]
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"without-{omitted}", files=h.write("repo"),
        tags=("git", "history", "pickaxe"), oracle_turns=5,
    )


FAMILIES.append(Family("git-pickaxe", "git", "validation",
                       "find the commits where strings were first added, removed, changed in value, "
                       "added before a rename or on a merged side branch", _pickaxe))


# ------------------------------------------------------------------ git-reflog-rescue
# Work lost by a hard reset, a deleted branch, an amend or a dropped stash; the HEAD reflog (or
# the object database) still has it. The tests compare refs and trees with the known hashes.

_RESCUE_TESTS = '''"""Inspects /app/repo with git: refs and trees against the known history."""

import subprocess

import pytest

E = __EXPECTED__


def git(*args):
    r = subprocess.run(["git", "-C", "/app/repo", *args], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def is_ancestor(a, b):
    return subprocess.run(["git", "-C", "/app/repo", "merge-base", "--is-ancestor", a, b],
                          capture_output=True).returncode == 0
'''

_RESCUE_CHECKS = {
    "reset-hard": '''

@pytest.mark.weight(3)
def test_main_restored():
    assert git("rev-parse", "refs/heads/main") == E["lost_tip"], "main does not end at the lost commit"


@pytest.mark.weight(1)
def test_dropped_commits_on_main():
    got = git("log", "--format=%s", f"-{len(E['subjects'])}", "refs/heads/main")
    assert got and got.splitlines()[::-1] == E["subjects"], "main does not end with the dropped commits"


@pytest.mark.weight(1)
def test_work_tree_matches():
    assert git("rev-parse", "HEAD") == E["lost_tip"], "HEAD is not the restored main"
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git("status", "--porcelain") == "", "the work tree or index differs from main"
''',
    "reset-diverged": '''

@pytest.mark.weight(1)
def test_new_commit_kept():
    tip = git("rev-parse", "refs/heads/main")
    assert tip and is_ancestor(E["kept"], tip), "the commit made after the reset is no longer on main"
    assert git("log", "--format=%s", "-1", tip) == E["subjects"][-1], "main does not end with the last lost commit"


@pytest.mark.weight(2)
def test_lost_commits_back_in_order():
    tip = git("rev-parse", "refs/heads/main")
    assert tip and tip != E["kept"]
    subjects = git("log", "--format=%s", f"{E['kept']}..{tip}").splitlines()[::-1]
    assert subjects == E["subjects"], "main must get exactly the lost commits back, in order"


@pytest.mark.weight(2)
def test_tree():
    assert git("rev-parse", "refs/heads/main^{tree}") == E["tree"], "main's files are not the expected ones"
    assert git("status", "--porcelain") == ""
''',
    "deleted-branch": '''

@pytest.mark.weight(3)
def test_branch_restored():
    assert git("rev-parse", "--verify", "-q", f"refs/heads/{E['branch']}") == E["lost_tip"]


@pytest.mark.weight(1)
def test_branch_commits():
    got = git("log", "--format=%s", f"refs/heads/main..refs/heads/{E['branch']}")
    assert got and got.splitlines()[::-1] == E["subjects"], "the branch does not hold its own commits"


@pytest.mark.weight(1)
def test_main_untouched():
    assert git("rev-parse", "--verify", "-q", f"refs/heads/{E['branch']}"), "the branch is not back"
    assert git("rev-parse", "refs/heads/main") == E["main"], "main must not change"
    assert git("rev-parse", "--verify", "-q", f"refs/heads/{E['decoy']}") is None, \\
        "only the asked branch comes back"
''',
    "amend": '''

@pytest.mark.weight(1)
def test_history_not_rewritten():
    assert git("rev-parse", "refs/heads/main~1") == E["main"], "add one commit on top of main"


@pytest.mark.weight(2)
def test_file_restored():
    assert git("show", f"refs/heads/main:{E['path']}") == E["content"].strip(), "wrong file content"


@pytest.mark.weight(2)
def test_tree():
    assert git("rev-parse", "refs/heads/main^{tree}") == E["tree"], "main's files are not the expected ones"
''',
    "dropped-stash": '''

@pytest.mark.weight(1)
def test_on_top_of_main():
    assert git("rev-parse", "refs/heads/main~1") == E["main"], "add one commit on top of main"
    assert git("log", "-1", "--format=%s", "refs/heads/main") == E["message"]


@pytest.mark.weight(3)
def test_tree():
    assert git("rev-parse", "refs/heads/main^{tree}") == E["tree"], "main's files are not the stash's"


@pytest.mark.weight(1)
def test_clean():
    assert git("rev-parse", "refs/heads/main") != E["main"], "nothing was committed"
    assert git("status", "--porcelain") == "", "the work tree must be clean"
''',
}



def _rescue(rng: random.Random, index: int) -> Instance:
    variant = rng.choice(sorted(_RESCUE_CHECKS))
    h = _History(rng)
    for _ in range(rng.randint(3, 5)):
        h.filler()
    e: dict = {}
    if variant.startswith("reset"):
        h.checkout("release")
        h.checkout("main")
        base = h.tip
        lost = [h.filler() for _ in range(rng.randint(2, 3))]
        subjects = [h.repo.objects[c].decode().split("\n\n", 1)[1].strip() for c in lost]
        lost_state = {k: list(v) for k, v in h.state.items()}
        h.move("main", base, f"reset: moving to HEAD~{len(lost)}")
        e.update(lost_tip=lost[-1], subjects=subjects)
        story = (f"Someone ran `git reset --hard HEAD~{len(lost)}` on `main` by mistake, which "
                 f"dropped {len(lost)} commits.")
        if variant == "reset-diverged":
            h.state["README.md"].append(f"Owner: team {rng.choice(_WORDS)}")
            e["kept"] = h.commit("Name the owning team in the README")
            lost_state["README.md"] = list(h.state["README.md"])
            e["tree"] = _tree_of(lost_state)
            task = ("Since then, one new commit was made on `main`; keep it. Bring the dropped "
                    "commits back on top of it, in their original order and with their original "
                    "messages and changes, so that `main` ends with them.")
            sol = f"cd /app/repo\ngit cherry-pick {' '.join(lost)}\n"
        else:
            task = "Restore `main` so that it ends at the last of the dropped commits again."
            sol = f"cd /app/repo\ngit reset --hard {lost[-1]}\n"
    elif variant == "deleted-branch":
        names = rng.sample(["search-filters", "bulk-export", "rate-limits", "audit-trail", "csv-import"], 2)
        tips, subjects = [], []
        for name in names:
            h.checkout(f"feature/{name}")
            subjects.append([])
            for _ in range(rng.randint(1, 3)):
                c = h.filler()
                subjects[-1].append(h.repo.objects[c].decode().split("\n\n", 1)[1].strip())
            tips.append(h.tip)
            h.checkout("main")
            h.filler()
        for name in names:
            h.repo.delete_ref(f"feature/{name}")
        e.update(branch=f"feature/{names[0]}", decoy=f"feature/{names[1]}", lost_tip=tips[0], main=h.tip,
                 subjects=subjects[0])
        story = (f"The branches `feature/{names[0]}` and `feature/{names[1]}` were deleted with "
                 "`git branch -D` before they were merged.")
        task = (f"Recreate the branch `feature/{names[0]}` (only that one), pointing at the last commit "
                "that was made on it. Leave `main` as it is.")
        sol = f"cd /app/repo\ngit branch feature/{names[0]} {tips[0]}\n"
    else:
        path = f"migrations/{rng.randint(10, 60):03d}_{rng.choice(_WORDS)}_{rng.choice(_WORDS)}.sql"
        content = (f"ALTER TABLE orders ADD COLUMN {rng.choice(_WORDS)}_id INTEGER;\n"
                   f"CREATE INDEX idx_orders_{rng.choice(_WORDS)} ON orders ({rng.choice(_WORDS)}_id);\n")
        if variant == "amend":
            before = h.tip
            h.state[path] = content.rstrip("\n").split("\n")
            h.state["app/settings.py"].append(f"SCHEMA_VERSION = {rng.randint(10, 60)}")
            first = h.commit("Add schema migration")
            del h.state[path]
            h.commit("Bump schema version", parents=[before], kind="commit (amend)")
            h.commit("Bump schema version (reviewed)", parents=[before], kind="commit (amend)")
            e.update(main=h.tip, path=path, content=content)
            e["tree"] = _tree_of({**h.state, path: content.rstrip("\n").split("\n")})
            story = ("The last commit on `main` was amended twice. Its first version also added the "
                     f"file `{path}`, which the amends dropped by mistake.")
            task = (f"Add `{path}` back, exactly as it was in that first version, in one new commit on "
                    "top of `main` (do not rewrite the existing commits).")
            sol = (f"cd /app/repo\nmkdir -p migrations\ngit show {first}:{path} > {path}\n"
                   f"git add {path}\ngit commit -q -m 'Restore migration'\n")
        else:
            tip_state = {k: list(v) for k, v in h.state.items()}
            stashes = []
            for n in range(2):
                work = {k: list(v) for k, v in tip_state.items()}
                f = rng.choice(h.py_files())
                work[f].append(f"{_ident(rng, h.used)} = {rng.randint(1, 99)}")
                if n == 0:
                    work[path] = content.rstrip("\n").split("\n")
                staged = {**tip_state, path: work[path]} if n == 0 else tip_state
                idx = h.repo.commit(_render(staged), f"index on main: {h.tip[:7]} x", [h.tip])
                w = h.repo.commit(_render(work), f"WIP on main: {h.tip[:7]} x", [h.tip, idx])
                stashes.append((w, work))
            msg = "Finish the migration work"
            e.update(main=h.tip, message=msg, tree=_tree_of(stashes[0][1]))
            story = ("Two stashes were made on `main` and then both were dropped (`git stash clear`). "
                     f"The one that matters is the one whose changes include the new file `{path}`.")
            task = (f"Get that stash's changes back into the work tree and commit all of them (the new "
                    f"file and the change to a tracked file) as one new commit on top of `main` with "
                    f"the message `{msg}`.")
            sol = (f"cd /app/repo\ngit stash apply {stashes[0][0]}\ngit add -A\n"
                   f"git commit -q -m '{msg}'\n")
    instruction = f"""\
`/app/repo` is a git repository. {story}

{task}

Use the name `Repo Keeper` and the e-mail `keeper@example.com` for any commit you make. When you
are done the work tree must be clean.
"""
    solution = ("export GIT_AUTHOR_NAME='Repo Keeper' GIT_AUTHOR_EMAIL=keeper@example.com "
                "GIT_COMMITTER_NAME='Repo Keeper' GIT_COMMITTER_EMAIL=keeper@example.com\n" + sol)
    difficulty = {"reset-hard": "easy", "reset-diverged": "medium", "deleted-branch": "medium",
                  "amend": "medium", "dropped-stash": "hard"}[variant]
    return Instance(
        instruction=instruction, tests=_RESCUE_TESTS.replace("__EXPECTED__", repr(e)) + _RESCUE_CHECKS[variant],
        solution=solution, difficulty=difficulty, variant=variant,
        files=h.repo.write("repo", _render(h.state)), tags=("git", "reflog", "recovery"), oracle_turns=3,
    )


FAMILIES.append(Family("git-reflog-rescue", "git", "train",
                       "recover work lost by a hard reset (with or without a later commit), a "
                       "deleted branch, an amend or a dropped stash", _rescue))
