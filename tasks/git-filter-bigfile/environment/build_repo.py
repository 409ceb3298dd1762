"""Builds /app/sitegen deterministically; a big binary was committed by mistake and later deleted."""
import os
import random
import subprocess
from pathlib import Path

REPO = Path("/app/sitegen")
T0 = 1722502800  # 2024-08-01 09:00:00 UTC
STEP = [0]
YUKI = ("Yuki Tanabe", "yuki@sitegen.test")
PAUL = ("Paul Achterberg", "paul@sitegen.test")


def git(*args, who=YUKI):
    STEP[0] += 1
    when = f"{T0 + STEP[0] * 3300} +0000"
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1], GIT_AUTHOR_DATE=when,
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1], GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


def write(rel, data):
    p = REPO / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)


def commit(msg, who=YUKI):
    git("add", "-A", who=who)
    git("commit", "-q", "-m", msg, who=who)


rng = random.Random(31337)
REPO.mkdir(parents=True)
git("init", "-q", "-b", "main")
git("config", "user.name", YUKI[0])
git("config", "user.email", YUKI[1])

write("README.md", "# sitegen\n\nStatic site generator for the team pages.\n")
write("sitegen.py", "import sys\n\n\ndef render(title, body):\n    return f'<h1>{title}</h1>\\n<p>{body}</p>\\n'\n")
commit("Initial generator")
write("templates/page.html", "<html><body>{content}</body></html>\n")
commit("Page template")
git("tag", "v0.1")
write("tests/fixtures/footage.bin", bytes(rng.randrange(256) for _ in range(512)))
write("tests/test_render.py", "from sitegen import render\n\n\ndef test_render():\n    assert render('a', 'b').startswith('<h1>a')\n")
commit("Render test with a small binary fixture", who=PAUL)
write("assets/raw/footage.bin", rng.randbytes(3 * 1024 * 1024))
write("assets/intro.txt", "Intro video: see assets/raw.\n")
commit("Add intro assets", who=PAUL)
write("sitegen.py", "import sys\n\n\ndef render(title, body):\n    return f'<h1>{title}</h1>\\n<p>{body}</p>\\n'\n\n\ndef page(title, body):\n    return open('templates/page.html').read().replace('{content}', render(title, body))\n")
commit("Wrap rendered content in the page template")
git("tag", "-a", "v0.2", "-m", "sitegen 0.2")
git("branch", "release/0.x")
write("assets/raw/footage.bin", rng.randbytes(3 * 1024 * 1024))
write("assets/intro.txt", "Intro video: see assets/raw (re-encoded).\n")
commit("Re-encode intro footage", who=PAUL)
git("checkout", "-q", "release/0.x")
write("CHANGELOG.md", "# 0.2.1\n\n- Fix page title escaping.\n")
write("sitegen.py", "import html\nimport sys\n\n\ndef render(title, body):\n    return f'<h1>{html.escape(title)}</h1>\\n<p>{body}</p>\\n'\n\n\ndef page(title, body):\n    return open('templates/page.html').read().replace('{content}', render(title, body))\n")
commit("Escape page titles (0.2.1)")
git("checkout", "-q", "main")
write("assets/intro.txt", "Intro video: hosted externally, see docs.\n")
(REPO / "assets/raw/footage.bin").unlink()
write(".gitignore", "assets/raw/\n__pycache__/\n")
commit("Host intro footage externally; ignore raw assets", who=PAUL)
write("docs/media.md", "Raw media lives on the media server, never in Git.\n")
commit("Document where raw media lives")
print(git("count-objects", "-vH"))
