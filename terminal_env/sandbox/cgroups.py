"""Where a container's cgroup files are on this host (the OOM counter, the pid count, the process
list), for the four layouts: cgroup v1 or v2, under the cgroupfs or the systemd driver."""

from __future__ import annotations


def cgroup_files(container_id: str, controller: str, v1_name: str, v2_name: str | None = None) -> tuple[str, ...]:
    """Where one of a container's cgroup files can be on this host: cgroup v1 (the controller's
    own hierarchy) or v2 (unified), each under the cgroupfs or the systemd driver."""
    v2 = v2_name or v1_name
    return (
        f"/sys/fs/cgroup/{controller}/docker/{container_id}/{v1_name}",  # v1, cgroupfs
        f"/sys/fs/cgroup/{controller}/system.slice/docker-{container_id}.scope/{v1_name}",  # v1, systemd
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/{v2}",  # v2, systemd
        f"/sys/fs/cgroup/docker/{container_id}/{v2}",  # v2, cgroupfs
    )
