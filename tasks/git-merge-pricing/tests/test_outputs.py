# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Verifies the merge: the git graph, and the merged pricing on hidden orders."""
import json
import random
import subprocess
import tempfile

REPO = "/app/shop"
# Deterministic build: tips of main and feature/discounts before the merge.
MAIN_BEFORE = "df2bd7e6e5459e1b325b16c48280e3ca4a6e4f5e"
FEATURE_TIP = "e2e2c1cff81c2ee57398dcecc5e4c14c5b9df2a3"

TAX = {"north": 800, "south": 650, "east": 0, "west": 925}
PCT = {"SAVE10": 10, "SAVE25": 25}
FLAT = {"FLAT5": 500, "FLAT20": 2000}


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)


def expected(order):
    sub = sum(i["qty"] * i["unit_cents"] for i in order["items"])
    code = order.get("code")
    disc = sub * PCT[code] // 100 if code in PCT else min(sub, FLAT[code]) if code in FLAT else 0
    net = sub - disc
    ship = 0 if net >= 7500 else 599
    return net + (net * TAX.get(order.get("region"), 0) + 5000) // 10000 + ship


def require_merged():
    r = git("merge-base", "--is-ancestor", FEATURE_TIP, "main")
    assert r.returncode == 0, "feature/discounts is not merged into main"


def run_totals(orders):
    require_merged()
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", "main"],
                              capture_output=True, timeout=30)
        assert arch.returncode == 0, arch.stderr.decode()
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True, timeout=30)
        prog = ("import json,sys\nimport pricing\n"
                "print(json.dumps([pricing.total(o) for o in json.load(sys.stdin)]))\n")
        r = subprocess.run(["python3", "-c", prog], cwd=tmp, input=json.dumps(orders),
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"merged pricing.py failed: {r.stderr[-800:]}"
        # the CLI must still work on a single order
        cli = subprocess.run(["python3", "pricing.py"], cwd=tmp, input=json.dumps(orders[0]),
                             capture_output=True, text=True, timeout=30)
        assert cli.stdout.strip() == str(expected(orders[0])), f"CLI output {cli.stdout!r} {cli.stderr[-300:]}"
        return json.loads(r.stdout)


def make_orders(seed, regions, codes, n=60):
    rng = random.Random(seed)
    orders = []
    for _ in range(n):
        items = [{"sku": f"S{rng.randint(100, 999)}", "qty": rng.randint(1, 4),
                  "unit_cents": rng.randint(150, 4200)} for _ in range(rng.randint(1, 4))]
        o = {"items": items}
        region, code = rng.choice(regions), rng.choice(codes)
        if region is not None:
            o["region"] = region
        if code is not None:
            o["code"] = code
        orders.append(o)
    return orders


def check(orders):
    got = run_totals(orders)
    want = [expected(o) for o in orders]
    bad = [(o, g, w) for o, g, w in zip(orders, got, want) if g != w]
    assert not bad, f"{len(bad)} of {len(orders)} totals wrong, e.g. {bad[0]}"


def test_merge_commit_parents():
    parents = git("rev-list", "--parents", "-n", "1", "main").stdout.split()[1:]
    assert parents == [MAIN_BEFORE, FEATURE_TIP], f"main's tip has parents {parents}"


def test_clean_resolution():
    require_merged()
    markers = git("grep", "-n", "-E", "^(<<<<<<<|=======$|>>>>>>>)", "main")
    assert markers.stdout.strip() == "", markers.stdout
    log = git("show", "main:CHANGELOG.md").stdout.splitlines()
    for side in (MAIN_BEFORE, FEATURE_TIP):
        for line in git("show", f"{side}:CHANGELOG.md").stdout.splitlines():
            assert line in log, f"CHANGELOG.md lost the line {line!r}"
    assert git("symbolic-ref", "-q", "HEAD").stdout.strip() == "refs/heads/main"


def test_tax_only_orders():
    check(make_orders(311, ["north", "south", "east", "west", None, "nowhere"], [None]))


def test_discount_only_orders():
    check(make_orders(523, ["east", None], ["SAVE10", "SAVE25", "FLAT5", "FLAT20", "BOGUS", None]))


def test_discount_and_tax_orders():
    check(make_orders(887, ["north", "south", "west"], ["SAVE10", "SAVE25", "FLAT5", "FLAT20"], n=120))
