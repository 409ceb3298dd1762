# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs organize.sh on hidden directory trees and compares the result with the specification."""

import os
import random
import subprocess
import tempfile
from pathlib import Path

SCRIPT = "/app/tools/organize.sh"


def split_ext(name):
    i = name.rfind(".")
    if 0 < i < len(name) - 1:
        return name[:i], name[i:], name[i + 1:].lower()
    return name, "", "noext"


def reference(files, existing):
    """files: {relpath: content} under SRC; existing: {relpath: content} already in DEST."""
    dest = dict(existing)
    for rel in sorted(files, key=lambda p: p.encode()):
        name = rel.rsplit("/", 1)[-1]
        stem, dotext, folder = split_ext(name)
        target, n = f"{folder}/{name}", 1
        while target in dest:
            target = f"{folder}/{stem}_{n}{dotext}"
            n += 1
        dest[target] = files[rel]
    return dest


def snapshot(root: Path):
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p.read_bytes().decode()
    return out


def run_case(files, existing=None, src_name="src", dest_name="dest"):
    existing = existing or {}
    base = Path(tempfile.mkdtemp())
    src, dest = base / src_name, base / dest_name
    src.mkdir()
    for rel, content in {**{f"SRC/{k}": v for k, v in files.items()},
                         **{f"DEST/{k}": v for k, v in existing.items()}}.items():
        root, _, rest = rel.partition("/")
        p = (src if root == "SRC" else dest) / rest
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode())
    dirs_before = sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_dir())
    r = subprocess.run(["bash", SCRIPT, str(src), str(dest)], capture_output=True, text=True,
                       timeout=60, cwd=str(base))
    got = snapshot(dest) if dest.exists() else {}
    want = reference(files, existing)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"missing in DEST: {missing[:8]}; unexpected: {extra[:8]}"
    wrong = [k for k in want if got[k] != want[k]]
    assert not wrong, f"wrong content (a file was overwritten or swapped): {wrong[:8]}"
    left = [str(p.relative_to(src)) for p in src.rglob("*") if p.is_file() or p.is_symlink()]
    assert not left, f"files left in SRC: {left[:8]}"
    assert sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_dir()) == dirs_before
    assert r.stdout == f"moved {len(files)}\n", f"stdout was {r.stdout!r}"


def unique_tree(rng, names, dirs):
    files = {}
    for i, name in enumerate(names):
        d = rng.choice(dirs)
        files[f"{d}/{name}" if d else name] = f"content {i} {name}\n"
    return files


def test_plain_names():
    rng = random.Random(7001)
    exts = ["txt", "JPG", "png", "tar", "Md", "c", "json"]
    names = [f"file_{i:03d}-{rng.randint(0, 999)}.{rng.choice(exts)}" for i in range(60)]
    run_case(unique_tree(rng, names, ["", "a", "a/b", "c", "c/d/e"]))


def test_spaces_and_glob_characters():
    rng = random.Random(7002)
    names = ["my report.txt", "two  spaces.pdf", "star*.txt", "question?.log", "[ab].csv",
             "quote's.md", 'double"q.md', "dollar $HOME.sh", "semi;colon.txt", "amp & co.txt",
             "-leading dash.txt", "paren (1).jpg", "brace {x}.c", "hash #1.txt", "tilde ~.txt"]
    names += [f"photo {i}.JPG" for i in range(10)]
    run_case(unique_tree(rng, names, ["", "holiday pics", "holiday pics/day 1", "x*y"]),
             src_name="my files", dest_name="sorted output")


def test_backslashes_and_edge_whitespace():
    rng = random.Random(7003)
    names = ["back\\slash.txt", "C:\\temp\\x.log", " leading.txt", "trailing .txt", "tab\there.md",
             "  both  .c", "data.v\\", "\\n.txt"]
    run_case(unique_tree(rng, names, ["", "sub dir", " odd "]))


def test_extension_rules():
    rng = random.Random(7004)
    names = ["README", ".bashrc", "archive.", "a.b.c", ".config.JSON", "x.TAR.GZ", "Makefile",
             "..double", "notes.TxT", "v1.2.3", ".hidden.", "trail..", "e.E"]
    run_case(unique_tree(rng, names, ["", "deep/er", ".git"]))


def test_duplicates_not_overwritten():
    files = {}
    for d in ("a", "b", "b/c", "d d", "e"):
        for name in ("same.txt", "Same.TXT", "LICENSE", "img.jpg"):
            files[f"{d}/{name}"] = f"{d}/{name}\n"
    files["f/same_1.txt"] = "pre-suffixed\n"
    existing = {"txt/same.txt": "old\n", "txt/same_2.txt": "old2\n", "noext/LICENSE": "old lic\n",
                "jpg/img_1.jpg": "old img\n"}
    run_case(files, existing)
