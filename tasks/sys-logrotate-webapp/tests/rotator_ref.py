# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# verifier copy
#!/usr/bin/env python3
"""minirotate: a small log rotator that understands a subset of logrotate's configuration.

Usage: minirotate [--force] [--state FILE] [--now YYYY-MM-DDTHH:MM] [--verbose] CONFIG...
       (a directory as CONFIG means every file in it)

Config: one or more blocks  PATTERN... { DIRECTIVES }  (glob patterns, absolute paths).
Directives (one per line; `#` starts a comment):
  daily | weekly | monthly   rotate when the last rotation (state file) was on an earlier
                             day / ISO week / month; a log never rotated before is rotated
  size N[k|M|G]              rotate when the file is larger than N bytes, whatever the time
                             (overrides daily/weekly/monthly)
  rotate N                   keep N old versions: LOG.1 (newest) ... LOG.N; older are deleted
  compress | nocompress      gzip old versions (LOG.2.gz ...)
  delaycompress              leave LOG.1 uncompressed; it is compressed at the next rotation
  missingok | nomissingok    a missing log is skipped / is an error
  notifempty | ifempty       do not rotate / do rotate an empty log
  create MODE OWNER GROUP    after moving LOG away, create a new empty LOG like this
  nocreate                   do not create a new LOG
  copytruncate               copy LOG to LOG.1 and truncate LOG in place (no move, no create)
  sharedscripts              run postrotate once per block (if any log rotated), not per log
  postrotate / endscript     shell commands run after rotation (per log: $1 is the log path)
Defaults: no time condition (rotate at every run), rotate 0, nocompress, nomissingok, ifempty,
nocreate. --force rotates regardless of daily/weekly/monthly/size.
"""
import datetime as dt
import glob
import gzip
import grp
import json
import os
import pwd
import re
import shutil
import subprocess
import sys

FREQ = ("daily", "weekly", "monthly")
FLAGS = {"compress", "nocompress", "delaycompress", "missingok", "nomissingok", "notifempty",
         "ifempty", "nocreate", "copytruncate", "sharedscripts", "nosharedscripts"} | set(FREQ)


class ConfigError(Exception):
    pass


def parse_size(text):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", text)
    if not m:
        raise ConfigError(f"bad size {text!r}")
    return int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2).lower()]


def parse(text, name):
    blocks, i = [], 0
    lines = [l.split("#", 1)[0].strip() if not l.strip().startswith("#") else "" for l in text.splitlines()]
    header = []
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "{" not in line:
            header += line.split()
            continue
        before, after = line.split("{", 1)
        patterns = header + before.split()
        header = []
        if not patterns:
            raise ConfigError(f"{name}:{i}: block without log files")
        for p in patterns:
            if not p.startswith("/"):
                raise ConfigError(f"{name}:{i}: log path must be absolute: {p!r}")
        opts = {"patterns": patterns, "rotate": 0, "post": None}
        if after.strip():
            raise ConfigError(f"{name}:{i}: put directives on their own lines")
        while True:
            if i >= len(lines):
                raise ConfigError(f"{name}: missing '}}'")
            line = lines[i]
            i += 1
            if not line:
                continue
            if line == "}":
                break
            words = line.split()
            d = words[0].lower()
            if d in FLAGS and len(words) == 1:
                opts[d] = True
            elif d == "rotate" and len(words) == 2 and words[1].isdigit():
                opts["rotate"] = int(words[1])
            elif d == "size" and len(words) == 2:
                opts["size"] = parse_size(words[1])
            elif d == "create" and len(words) == 4 and re.fullmatch(r"0?[0-7]{3}", words[1]):
                opts["create"] = (int(words[1], 8), words[2], words[3])
            elif d == "postrotate" and len(words) == 1:
                script = []
                while i < len(lines) and lines[i] != "endscript":
                    script.append(text.splitlines()[i])
                    i += 1
                if i >= len(lines):
                    raise ConfigError(f"{name}: postrotate without endscript")
                i += 1
                opts["post"] = "\n".join(script)
            else:
                raise ConfigError(f"{name}:{i}: unknown or malformed directive {line!r}")
        blocks.append(opts)
    if header:
        raise ConfigError(f"{name}: trailing text outside a block: {' '.join(header)!r}")
    return blocks


def due(opts, path, state, now, force):
    if force:
        return True
    if "size" in opts:
        return os.path.getsize(path) > opts["size"]
    last = state.get(path)
    if last is None:
        return True
    last = dt.datetime.fromisoformat(last)
    if opts.get("daily"):
        return last.date() < now.date()
    if opts.get("weekly"):
        return last.isocalendar()[:2] < now.isocalendar()[:2]
    if opts.get("monthly"):
        return (last.year, last.month) < (now.year, now.month)
    return True


def gz(src, dst):
    with open(src, "rb") as f, gzip.open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    os.unlink(src)


def rotate_one(opts, path, log):
    keep, compress, delay = opts["rotate"], opts.get("compress"), opts.get("delaycompress")

    def name(n, zipped):
        return f"{path}.{n}" + (".gz" if zipped else "")

    for n in range(keep + 1, 0, -1):  # shift LOG.n -> LOG.n+1, dropping beyond `keep`
        for zipped in (False, True):
            src = name(n, zipped)
            if not os.path.exists(src):
                continue
            if n >= keep:
                os.unlink(src)
                continue
            dst_zipped = zipped or (compress and n + 1 >= 2)
            if dst_zipped and not zipped:
                gz(src, name(n + 1, True))
            else:
                os.replace(src, name(n + 1, zipped))
    if keep == 0:
        if opts.get("copytruncate"):
            open(path, "r+").truncate(0)
        else:
            os.unlink(path)
    elif opts.get("copytruncate"):
        shutil.copy2(path, name(1, False))
        with open(path, "r+") as f:
            f.truncate(0)
    else:
        os.replace(path, name(1, False))
    if keep >= 1 and compress and not delay:
        gz(name(1, False), name(1, True))
    if "create" in opts and not opts.get("copytruncate") and not opts.get("nocreate"):
        mode, owner, group = opts["create"]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        os.close(fd)
        os.chown(path, pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid)
        os.chmod(path, mode)
    log(f"rotated {path}")


def run(configs, state_file, now, force, verbose):
    log = print if verbose else (lambda *_: None)
    state = json.load(open(state_file)) if os.path.exists(state_file) else {}
    blocks = []
    for c in configs:
        files = sorted(os.path.join(c, f) for f in os.listdir(c)) if os.path.isdir(c) else [c]
        for f in files:
            if os.path.isfile(f) and re.fullmatch(r"[A-Za-z0-9_.-]+", os.path.basename(f)):
                blocks += parse(open(f).read(), f)
    status = 0
    for opts in blocks:
        rotated = []
        for pattern in opts["patterns"]:
            paths = sorted(glob.glob(pattern))
            if not paths:
                if not opts.get("missingok"):
                    print(f"minirotate: error: {pattern}: no such log", file=sys.stderr)
                    status = 1
                continue
            for path in paths:
                if not os.path.isfile(path):
                    continue
                if os.path.getsize(path) == 0 and opts.get("notifempty"):
                    log(f"{path}: empty, skipped")
                    continue
                if not due(opts, path, state, now, force):
                    log(f"{path}: not due")
                    continue
                rotate_one(opts, path, log)
                state[path] = now.isoformat()
                rotated.append(path)
        if opts["post"] and rotated:
            targets = [" ".join(opts["patterns"])] if opts.get("sharedscripts") else rotated
            for t in targets:
                subprocess.run(["sh", "-c", opts["post"], "postrotate", t], check=False)
    with open(state_file, "w") as f:
        json.dump(state, f, indent=1)
    return status


def main(argv):
    force, verbose, state, now, configs = False, False, "/var/lib/minirotate/state.json", dt.datetime.now(), []
    it = iter(argv)
    for a in it:
        if a == "--force":
            force = True
        elif a == "--verbose":
            verbose = True
        elif a == "--state":
            state = next(it)
        elif a == "--now":
            now = dt.datetime.fromisoformat(next(it))
        else:
            configs.append(a)
    if not configs:
        sys.exit(__doc__)
    os.makedirs(os.path.dirname(os.path.abspath(state)), exist_ok=True)
    try:
        return run(configs, state, now, force, verbose)
    except ConfigError as exc:
        print(f"minirotate: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
