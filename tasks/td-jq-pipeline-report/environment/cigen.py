# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
import random

JOBS = {"build": ["compile", "lint", "docker-image"], "test": ["unit", "integration", "e2e", "fuzz"],
        "deploy": ["staging", "canary", "prod"], "docs": ["render"]}


def make(seed, projects, n):
    rng = random.Random(seed)
    pipes = []
    for i in range(n):
        name, team = rng.choice(projects)
        proj = {"name": name}
        if team is not None or rng.random() < 0.5:
            proj["team"] = team
        stages = []
        for sname in rng.sample(sorted(JOBS), rng.randint(1, 4)):
            jobs = []
            for j in JOBS[sname]:
                if rng.random() < 0.3:
                    continue
                ran = rng.random() > 0.1
                jobs.append({"name": j, "status": rng.choice(["success", "success", "failed", "canceled"]) if ran else "skipped",
                             "duration_s": round(rng.uniform(1, 3000), 1) if ran else None,
                             "retries": rng.choice([0, 0, 0, 1, 2])})
            stages.append({"name": sname, "jobs": jobs})
        pipes.append({"id": rng.randint(1000, 99999) if rng.random() < 0.5 else 100000 + i,
                      "project": proj, "status": rng.choice(["success", "failed", "canceled", "running", "success"]),
                      "started_at": f"2024-07-{rng.randint(1, 30):02d}T10:00:00Z", "stages": stages})
    return {"pipelines": pipes}


def expected(data):
    pipes = data["pipelines"]
    by_status = {}
    projects = {}
    jobs = []
    flaky = set()
    for p in pipes:
        by_status[p["status"]] = by_status.get(p["status"], 0) + 1
        name = p["project"]["name"]
        team = p["project"].get("team") or "unassigned"
        e = projects.setdefault(name, {"name": name, "team": team, "runs": 0, "failed_runs": 0, "job_seconds": 0.0})
        e["runs"] += 1
        e["failed_runs"] += p["status"] == "failed"
        for s in p["stages"]:
            for j in s["jobs"]:
                e["job_seconds"] += j["duration_s"] or 0
                if j["duration_s"] is not None:
                    jobs.append({"pipeline": p["id"], "stage": s["name"], "job": j["name"], "duration_s": j["duration_s"]})
                if j["status"] == "success" and j["retries"] > 0:
                    flaky.add(j["name"])
    jobs.sort(key=lambda j: (-j["duration_s"], j["pipeline"], j["job"]))
    return {"pipelines": len(pipes), "by_status": by_status,
            "projects": [projects[k] for k in sorted(projects)],
            "slowest_jobs": jobs[:5], "flaky_jobs": sorted(flaky)}
