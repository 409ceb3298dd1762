#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/report.sh <<'SCRIPT'
#!/bin/bash
jq '
  .pipelines as $p
  | [ $p[] as $pl | $pl.stages[] as $s | $s.jobs[]
      | select(.duration_s != null)
      | {pipeline: $pl.id, stage: $s.name, job: .name, duration_s} ] as $jobs
  | {
      pipelines: ($p | length),
      by_status: ($p | group_by(.status) | map({key: .[0].status, value: length}) | from_entries),
      projects: ($p | group_by(.project.name) | map({
          name: .[0].project.name,
          team: (.[0].project.team // "unassigned"),
          runs: length,
          failed_runs: (map(select(.status == "failed")) | length),
          job_seconds: ([.[].stages[].jobs[].duration_s // 0] | add // 0)
      })),
      slowest_jobs: ($jobs | sort_by(-.duration_s, .pipeline, .job) | .[:5]),
      flaky_jobs: ([$p[].stages[].jobs[] | select(.status == "success" and .retries > 0) | .name] | unique)
    }' "$1"
SCRIPT
chmod +x /app/report.sh
