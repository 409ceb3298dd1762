"""Generated task families of the git category, part 2 (see :mod:`.git` for the repository helpers)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support.h3_history import _AUTHORS, _History, _render, _tree_of

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ git-cherry-fix
# A fix made on main (one commit, a series with a decoy, a conflicting one, one whose origin must
# be recorded) must reach the release branch without the features around it.

_CHERRY_TESTS = '''"""Inspects the release branch of /app/repo against the known history."""

import subprocess

import pytest

E = __EXPECTED__
REL = "refs/heads/" + E["release"]


def git(*args):
    r = subprocess.run(["git", "-C", "/app/repo", *args], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def new_commits():
    out = git("log", "--format=%H", f"{E['old_release']}..{REL}")
    return out.splitlines()[::-1] if out else []


@pytest.mark.weight(1)
def test_release_extended_not_rewritten():
    tip = git("rev-parse", REL)
    assert tip and tip != E["old_release"], "the release branch did not move"
    assert subprocess.run(["git", "-C", "/app/repo", "merge-base", "--is-ancestor", E["old_release"],
                           tip]).returncode == 0, "the release branch's history was rewritten"
    assert git("rev-parse", "refs/heads/main") == E["main"], "main must not change"


@pytest.mark.weight(2)
def test_only_the_fix_commits():
    got = [(git("log", "-1", "--format=%s", c), git("log", "-1", "--format=%an <%ae>", c)) for c in new_commits()]
    assert got == E["commits"], "the release branch must get exactly the fix commits, in order, authors kept"


@pytest.mark.weight(2)
def test_release_files():
    assert git("rev-parse", REL + "^{tree}") == E["tree"], "the release branch's files are not the expected ones"
'''

_CHERRY_ORIGIN = '''

@pytest.mark.weight(1)
def test_origin_recorded():
    cs = new_commits()
    assert len(cs) == len(E["origins"])
    for c, orig in zip(cs, E["origins"]):
        assert f"(cherry picked from commit {orig})" in git("log", "-1", "--format=%B", c)
'''


def _cherry(rng: random.Random, index: int) -> Instance:
    variant = rng.choice(["single", "series", "conflict", "record-origin"])
    mod = rng.choice(["pricing", "shipping", "invoices", "refunds", "payouts"])
    fn = f"{rng.choice(['net', 'gross', 'capped', 'weighted'])}_{mod}_amount"
    F = f"app/{mod}.py"
    ticket = f"FIX-{rng.randint(100, 999)}"
    cap = rng.randint(2, 9) * 1000
    h = _History(rng)
    h.state["app/version.py"] = ['VERSION = "1.4.0"']
    h.state[F] = [f'"""{mod} rules."""', "", "", f"def {fn}(amount, rate):",
                  f'    """{mod.capitalize()} amount of `amount` cents at `rate` percent."""',
                  f"    cap = {cap}", "    value = amount * rate // 100", "    return min(value, cap)"]
    h.commit(f"Add {mod} rules")
    h.filler()
    minor = rng.randint(2, 9)
    release = f"release/1.{minor}"
    h.checkout(release)
    h.state["app/version.py"] = [f'VERSION = "1.{minor}.0"']
    h.commit(f"Release 1.{minor}.0")
    rel_state = {k: list(v) for k, v in h.state.items()}
    if variant == "conflict":
        rel_cap = cap + rng.randint(1, 9) * 100
        h.state[F][5] = f"    cap = {rel_cap}"
        h.commit(f"Raise the {mod} cap for 1.{minor}")
        rel_state = {k: list(v) for k, v in h.state.items()}
    old_release = h.tip
    h.checkout("main")
    if variant == "conflict":
        h.state[F][5] = f"    cap = {cap - 500}"
        h.commit(f"Lower the {mod} cap")
    h.filler()
    fixes = []
    fixed_value = "    value = (amount * rate + 50) // 100"
    h.state[F][6] = fixed_value
    author = rng.choice(_AUTHORS)
    fixes.append(h.commit(f"{ticket}: round {mod} amounts to the nearest cent", author))
    rel_state[F][6] = fixed_value
    if variant == "series":
        h.state["app/handlers.py"].append(f"# {mod} handlers follow {ticket}")
        h.commit(f"Prepare handlers for the {mod} change\n\nSee {ticket} for the discussion.")
        h.state[F].insert(6, "    if amount < 0:\n        raise ValueError(\"negative amount\")")
        fixes.append(h.commit(f"{ticket}: reject negative {mod} amounts", author))
        rel_state[F].insert(6, "    if amount < 0:\n        raise ValueError(\"negative amount\")")
    for _ in range(rng.randint(1, 2)):
        h.filler()
    e = {"release": release, "old_release": old_release, "main": h.tip,
         "commits": [(h.repo.objects[c].decode().split("\n\n", 1)[1].split("\n")[0], f"{author[0]} <{author[1]}>")
                     for c in fixes],
         "tree": _tree_of(rel_state), "origins": fixes}
    extra = {
        "single": "",
        "series": (f" The fix may consist of more than one commit: apply every commit on `main` "
                   f"whose subject starts with `{ticket}:`, in their original order, and nothing else."),
        "conflict": (f" The release branch has its own value for the {mod} cap, which it must keep; "
                     "only the fix itself is to be applied."),
        "record-origin": (" Each commit you add to the release branch must record which commit it was "
                          "copied from, with git's standard `(cherry picked from commit <hash>)` line in "
                          "its message."),
    }[variant]
    instruction = f"""\
`/app/repo` is a git repository. Bug `{ticket}` was fixed on `main` (see the commit messages); the
fix must also ship in the next patch release. Apply it to the branch `{release}` as new commit(s) on
top of that branch, keeping the original commit messages and authors.{extra} None of the other
changes that were made on `main` may reach `{release}`, and `main` must not change.

Use the name `Release Bot` and the e-mail `release-bot@example.com` as the committer.
"""
    sol = f"cd /app/repo\ngit checkout -q {release}\n"
    if variant == "conflict":
        sol += (f"git cherry-pick {fixes[0]} || {{ git checkout --ours {F}; "
                f"sed -i 's|^    value = amount \\* rate // 100$|{fixed_value}|' {F}; "
                f"git add {F}; GIT_EDITOR=true git cherry-pick --continue; }}\n")
    else:
        sol += f"git cherry-pick {'-x ' if variant == 'record-origin' else ''}{' '.join(fixes)}\n"
    sol += "git checkout -q main\n"
    solution = ("export GIT_COMMITTER_NAME='Release Bot' GIT_COMMITTER_EMAIL=release-bot@example.com\n" + sol)
    difficulty = {"single": "easy", "record-origin": "easy", "series": "medium", "conflict": "medium"}[variant]
    return Instance(
        instruction=instruction,
        tests=_CHERRY_TESTS.replace("__EXPECTED__", repr(e)) + (_CHERRY_ORIGIN if variant == "record-origin" else ""),
        solution=solution, difficulty=difficulty, variant=variant,
        files=h.repo.write("repo", _render(h.state)), tags=("git", "cherry-pick", "release"), oracle_turns=3,
    )


FAMILIES.append(Family("git-cherry-fix", "git", "train",
                       "bring a fix from main to a release branch: one commit, a series next to a "
                       "decoy, a conflicting fix, or with its origin recorded", _cherry))


# ------------------------------------------------------------------ git-author-fix
# Commits made under wrong identities: rewrite the authors (and committers) of main, or map the
# identities with a .mailmap without rewriting. The tests compare every commit with the original.

_AUTHOR_TESTS = '''"""Compares main's history in /app/repo with the original commits."""

import subprocess

import pytest

E = __EXPECTED__


def git(*args):
    r = subprocess.run(["git", "-C", "/app/repo", *args], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def log(fmt, rev="refs/heads/main"):
    out = git("log", "--reverse", f"--format={fmt}", rev)
    return [x for x in out.split("\\x1e") if x.strip()] if out else []


def changed():
    return "root@localhost" not in " ".join(log("%ae%x1e")) and bool(log("%H%x1e"))
'''

_AUTHOR_REWRITE = '''

@pytest.mark.weight(3)
def test_authors():
    got = [x.strip() for x in log("%an <%ae> %at%x1e")]
    assert got == E["authors"], "the authors (names, e-mails, dates) are not the expected ones"


@pytest.mark.weight(1)
def test_files_kept():
    assert changed(), "the wrong identities are still there"
    assert [x.strip() for x in log("%T%x1e")] == E["trees"], "the commits' files changed"


@pytest.mark.weight(1)
def test_messages_kept():
    assert changed(), "the wrong identities are still there"
    assert [x.strip() for x in log("%B%x1e")] == E["messages"], "the commit messages changed"
'''

_AUTHOR_COMMITTER = '''

@pytest.mark.weight(1)
def test_committers():
    got = [x.strip() for x in log("%cn <%ce>%x1e")]
    assert got == E["committers"], "the committers are not the expected ones"
'''

_AUTHOR_MAILMAP = '''

@pytest.mark.weight(1)
def test_history_kept():
    tip = git("rev-parse", "refs/heads/main")
    assert tip != E["tip"] and git("rev-parse", "refs/heads/main~1") == E["tip"], \\
        "add one commit on top of main; do not rewrite it"


@pytest.mark.weight(3)
def test_mailmap_maps():
    assert git("rev-parse", "refs/heads/main~1") == E["tip"]
    for wrong, right in E["map"]:
        assert git("check-mailmap", wrong) == right, f"{wrong} is not mapped to {right}"
    for keep in E["keep"]:
        assert git("check-mailmap", keep) == keep, f"{keep} must stay as it is"


@pytest.mark.weight(1)
def test_mailmap_committed():
    assert git("show", "refs/heads/main:.mailmap") is not None, ".mailmap is not committed on main"
    got = git("shortlog", "-se", "refs/heads/main~1").splitlines()
    assert len(got) == E["people"], "git shortlog still shows split identities"
'''


def _author_fix(rng: random.Random, index: int) -> Instance:
    variant = rng.choice(["author-only", "author-and-committer", "spellings", "mailmap"])
    who = rng.choice(_AUTHORS)
    first = who[0].split()[0].lower()
    wrongs = [("root", "root@localhost")]
    if variant in ("spellings", "mailmap"):
        wrongs += [(first, f"{first}@laptop.local"), (who[0].split()[0] + " " + who[0].split()[1][0] + ".", who[1])]
    h = _History(rng)
    others = [a for a in _AUTHORS if a != who]
    commits = []
    for i in range(rng.randint(8, 12)):
        author = rng.choice(wrongs) if i % 2 else rng.choice(others + [who])
        commits.append((h.filler(author), author))
    init = list(h.snap)[0]
    full = [(init, None)] + commits

    def info(sha):
        text = h.repo.objects[sha].split(b"\0", 1)[1].decode()
        head, msg = text.split("\n\n", 1)
        fields = dict(line.split(" ", 1) for line in head.split("\n") if not line.startswith("parent"))
        return fields, msg.strip()

    authors, committers, trees, messages = [], [], [], []
    wrong_set = set(wrongs)
    for sha, *_ in full:
        fields, msg = info(sha)
        name_mail, when = fields["author"].rsplit(" ", 2)[0], fields["author"].rsplit(" ", 2)[1]
        cname = fields["committer"].rsplit(" ", 2)[0]
        n, m = name_mail.split(" <")
        right = f"{who[0]} <{who[1]}>" if (n, m[:-1]) in wrong_set else name_mail
        authors.append(f"{right} {when}")
        cn, cm = cname.split(" <")
        committers.append(f"{who[0]} <{who[1]}>" if (cn, cm[:-1]) in wrong_set else cname)
        trees.append(fields["tree"])
        messages.append(msg)
    wrong_txt = ", ".join(f"`{n} <{m}>`" for n, m in wrongs)
    if variant == "mailmap":
        e = {"tip": h.tip, "map": [[f"{n} <{m}>", f"{who[0]} <{who[1]}>"] for n, m in wrongs],
             "keep": [f"{a[0]} <{a[1]}>" for a in others],
             "people": len({a for _, a in commits if a not in wrong_set} | {who, tuple(info(init)[0]["author"].rsplit(" ", 2)[0][:-1].split(" <"))})}
        task = (f"Do not rewrite the history. Instead, add a `.mailmap` file at the top of the repository, "
                f"committed as one new commit on `main`, so that git shows the commits made as {wrong_txt} "
                f"under `{who[0]} <{who[1]}>`; nobody else's identity may change.")
        tests = _AUTHOR_TESTS + _AUTHOR_MAILMAP
        sol = ("cd /app/repo\n{ " + "; ".join(f"echo '{who[0]} <{who[1]}> {n} <{m}>'" for n, m in wrongs)
               + "; } > .mailmap\ngit add .mailmap\n"
               "git -c user.name='Repo Keeper' -c user.email=keeper@example.com commit -q -m 'Add mailmap'\n")
    else:
        e = {"authors": authors, "committers": committers, "trees": trees, "messages": messages}
        cc = (" Set the committer of those commits to the same identity as well (the other commits keep "
              "their committers)." if variant == "author-and-committer" else "")
        task = (f"Rewrite the history of `main` so that every commit whose author is {wrong_txt} has the "
                f"author `{who[0]} <{who[1]}>` instead.{cc} Everything else about the commits stays as it "
                "was: their messages, files and author dates, and the authors of all other commits.")
        tests = _AUTHOR_TESTS + _AUTHOR_REWRITE + (_AUTHOR_COMMITTER if variant == "author-and-committer" else "")
        pats = "|".join(f'"{n} <{m}>"' for n, m in wrongs)
        env = (f'case "$GIT_AUTHOR_NAME <$GIT_AUTHOR_EMAIL>" in {pats}) export GIT_AUTHOR_NAME="{who[0]}" '
               f'GIT_AUTHOR_EMAIL="{who[1]}";; esac')
        if variant == "author-and-committer":
            env += (f'; case "$GIT_COMMITTER_NAME <$GIT_COMMITTER_EMAIL>" in {pats}) export '
                    f'GIT_COMMITTER_NAME="{who[0]}" GIT_COMMITTER_EMAIL="{who[1]}";; esac')
        sol = (f"cd /app/repo\nexport FILTER_BRANCH_SQUELCH_WARNING=1\n"
               f"git filter-branch -f --env-filter '{env}' main\n")
    instruction = f"""\
`/app/repo` is a git repository. Some commits on `main` were made by {who[0]} on machines where git
was not configured, so they carry the identities {wrong_txt}.

{task}

When you are done, `main` must be checked out and the work tree clean.
"""
    difficulty = {"author-only": "easy", "author-and-committer": "medium", "spellings": "medium",
                  "mailmap": "medium"}[variant]
    return Instance(
        instruction=instruction, tests=tests.replace("__EXPECTED__", repr(e)), solution=sol,
        difficulty=difficulty, variant=variant, files=h.repo.write("repo", _render(h.state)),
        tags=("git", "authors", "history-rewrite"), oracle_turns=2,
    )


FAMILIES.append(Family("git-author-fix", "git", "train",
                       "fix commits made under wrong identities: rewrite authors (and committers), "
                       "several spellings of one person, or a .mailmap without rewriting", _author_fix))
