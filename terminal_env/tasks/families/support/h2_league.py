"""A football league table library with injectable bugs (the league-table-bugs family), and the
driver that exercises a version of it (``DRIVER``, a script: ``python3 driver.py MODULE.py
OPS.json`` prints, as JSON, what MODULE's ``League`` answers to the operations). Standard
library only."""

TEMPLATE = '''"""A football league table.

    lg = League(["ajax", "benfica"])  # teams known from the start; others join with a result
    lg.record("ajax 2-1 benfica")      # a result: `HOME G-G AWAY`; anything else: ValueError
    lg.table()                         # the table: a list of rows, best first
    lg.form("ajax")                    # the team's last five results, oldest first: "WDLWW"
    lg.snapshot()                      # a copy of the table that later results do not change

A win is 3 points, a draw 1, a loss 0. A row is a dict with the keys team, played, won, drawn,
lost, gf, ga, gd and points (gf/ga: goals for/against, gd = gf - ga). The table is ordered by
points, then goal difference, then goals for (all descending), then by team name (ascending).
Every team given to the constructor is in the table, even before it has played. A League never
shares state with another League or with the list it was given. Team names have no spaces.
"""
import copy
import re

RESULT = re.compile(r"(\\S+) (\\d+)-(\\d+) (\\S+)")


class League:
    def __init__(self, teams{{DEFAULT}}):
        self.teams = {{TEAMS}}
        self.stats = {}
        self.history = {}
        for team in self.teams:
            self._row(team)

    def _row(self, team):
        if team not in self.stats:
            self.stats[team] = {"team": team, "played": 0, "won": 0, "drawn": 0, "lost": 0,
                                "gf": 0, "ga": 0, "points": 0}
            self.history[team] = []
            if team not in self.teams:
                self.teams.append(team)
        return self.stats[team]

    def record(self, line):
        m = RESULT.{{MATCH}}(line.strip())
        if not m:
            raise ValueError(f"not a result: {line!r}")
        home, hg, ag, away = m[1], int(m[2]), int(m[3]), m[4]
        for team, scored, conceded in ((home, hg, ag), (away, ag, hg)):
            row = self._row(team)
            row["played"] += 1
            row["gf"] += scored
            row[{{AGAINST}}] += conceded
            if scored > conceded:
                row["won"] += 1
                row["points"] += 3
                self.history[team].append("W")
            elif scored == conceded:
                row["drawn"] += 1
                row["points"] += {{DRAW}}
                self.history[team].append("D")
            else:
                row["lost"] += 1
                self.history[team].append("L")

    def table(self):
        rows = []
        for team in self.teams:
            {{ROW}}
        {{SORT}}
        return rows

    def form(self, team):
        return "".join(self.history.get(team, [])[{{WINDOW}}])

    def snapshot(self):
        return self.table()
'''

BUGS = {
    "mutable-default": ({"DEFAULT": "=None", "TEAMS": "list(teams) if teams is not None else []"},
                        {"DEFAULT": "=[]", "TEAMS": "teams"},
                        "a new League sometimes lists teams that never played in it"),
    "anchoring": ({"MATCH": "fullmatch"}, {"MATCH": "match"},
                  "`ajax 2-1 benfica (abandoned)` is counted as a normal result"),
    "goals-key": ({"AGAINST": '"ga"'}, {"AGAINST": '"gf"'}, "goals against are always 0"),
    "draw-points": ({"DRAW": "1"}, {"DRAW": "0"}, "a draw gives no point"),
    "sort-order": ({"SORT": 'rows.sort(key=lambda r: (-r["points"], -r["gd"], -r["gf"], r["team"]))'},
                   {"SORT": 'rows.sort(key=lambda r: (r["points"], r["gd"], r["gf"], r["team"]), reverse=True)'},
                   "teams that are level come out in the wrong order"),
    "form-window": ({"WINDOW": "-5:"}, {"WINDOW": ":5"}, "the form of a team stops changing after a while"),
    "table-alias": ({"ROW": 'row = dict(self._row(team))\n            row["gd"] = row["gf"] - row["ga"]\n            rows.append(row)'},
                    {"ROW": 'row = self._row(team)\n            row["gd"] = row["gf"] - row["ga"]\n            rows.append(row)'},
                    "an old snapshot changes when new results come in"),
}


def render(bugs):
    text = TEMPLATE
    for bug, (good, bad, _) in BUGS.items():
        for site, value in (bad if bug in bugs else good).items():
            text = text.replace("{{" + site + "}}", value)
    return text


def symptom(bug):
    return BUGS[bug][2]


TEAMS = ["ajax", "benfica", "celtic", "dynamo", "everton", "fenerbahce", "galatasaray", "hajduk",
         "inter", "juventus", "lazio", "malmo", "napoli", "olympiakos", "porto", "rapid"]


def scenario(rng, size=1):
    """Operations that exercise every bug site: two leagues built without teams, one from a list
    the caller changes later, ties, long histories, snapshots and invalid lines."""
    teams = rng.sample(TEAMS, 6 + size)
    ops = [["new", "a", None], ["new", "b", teams[:3]], ["mutate", "b", teams[-1]], ["new", "c", None]]
    snapped = False
    for i in range(14 + 6 * size):
        lg = rng.choice("aabc")
        h, a = rng.sample(teams, 2)
        hg, ag = rng.choice([(0, 0), (1, 1), (2, 2)]) if rng.random() < 0.3 else (rng.randint(0, 4), rng.randint(0, 3))
        ops.append(["rec", lg, f"{h} {hg}-{ag} {a}"])
        if i == 6 + size:
            ops.append(["snap", "a"])
            snapped = True
        if rng.random() < 0.12:
            ops.append(["rec", lg, rng.choice([f"{h} {hg}-{ag} {a} (abandoned)", f"{h} {hg}-{ag}", f"{h} {hg}:{ag} {a}"])])
    if not snapped:
        ops.append(["snap", "a"])
    star = teams[0]
    for _ in range(7):
        ops.append(["rec", "a", f"{star} {rng.randint(0, 3)}-{rng.randint(0, 3)} {rng.choice(teams[1:])}"])
    ops += [["rec", "c", f"{teams[1]} 1-1 {teams[2]}"], ["rec", "c", f"{teams[2]} 2-0 {teams[3]} x"],
            ["rec", "b", f"{teams[4]} 0-3 {teams[5]}"]]
    ops += [["new", "d", None], ["new", "e", sorted(teams[1:5], reverse=True)],
            ["rec", "e", f"{teams[2]} 1-0 {teams[1]}"]]
    ops += [["form", "a", t] for t in teams] + [["table", k] for k in "abcde"]
    return ops


# the driver runs in its own process (python3 driver.py MODULE.py OPS.json), never in the tests'
DRIVER = '''import importlib.util
import json
import sys


def drive(module_path, ops):
    spec = importlib.util.spec_from_file_location("league_under_test", module_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    leagues, lists, out, snaps = {}, {}, [], []
    for op in ops:
        if op[0] == "new":
            lists[op[1]] = list(op[2]) if op[2] is not None else None
            leagues[op[1]] = mod.League(lists[op[1]]) if op[2] is not None else mod.League()
        elif op[0] == "mutate":
            lists[op[1]].append(op[2])
        elif op[0] == "rec":
            try:
                leagues[op[1]].record(op[2])
                out.append("ok")
            except ValueError:
                out.append("invalid")
        elif op[0] == "snap":
            snaps.append(leagues[op[1]].snapshot())
        elif op[0] == "form":
            out.append(leagues[op[1]].form(op[2]))
        else:
            out.append(leagues[op[1]].table())
    return {"results": out, "snapshots": snaps}


if __name__ == "__main__":
    print(json.dumps(drive(sys.argv[1], json.loads(open(sys.argv[2]).read())), sort_keys=True))
'''
