"""Harbor's ``network_mode = "allowlist"``: a sandbox that may reach only the hosts listed.

The container gets a network, and its network namespace a firewall, set from the host
(``nsenter -t PID -n iptables``) before the agent's first command: outgoing packets are dropped
unless they go to the loopback interface, to an allowed address, or (when a host is given by
name) to the container's DNS servers on port 53. Names are resolved here, when the sandbox
starts; a name that does not resolve then allows nothing. IPv6 is dropped the same way, but for
the addresses allowed. The agent cannot change the rules: sandboxes have no ``NET_ADMIN``
capability (not even as root), and the image's programs never see the host's ``iptables``.

It needs what the host sweep needs (this process root, the engine local, a runtime whose
processes are host processes: runc, not gVisor), and the host's ``iptables``; where one is
missing the sandbox does not start, and the error says what to change.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
from typing import Any

from ..errors import ConfigError, SandboxError
from .sweep import host_sweep_possible


def why_not(sandbox: Any) -> str | None:
    """Why an allowlist cannot be enforced for ``sandbox`` here (None: it can)."""
    if not host_sweep_possible():
        return "it is set from the host: run as root with the engine on this machine (DOCKER_HOST unset or unix://)"
    if not sandbox.runtime.host_processes:
        return (f"the runtime {sandbox.runtime.name!r} keeps its own network stack, which the host's "
                "firewall does not reach; run the task under runc (no --runtime)")
    if shutil.which("iptables") is None or shutil.which("nsenter") is None:
        return "the host has no iptables or nsenter (Debian: apt-get install iptables util-linux)"
    return None


def addresses(hosts: list[str]) -> tuple[list[str], bool]:
    """The networks ``hosts`` allow (IP addresses and CIDR ranges as given, names resolved here),
    and whether any was a name (then DNS must be reachable)."""
    out: list[str] = []
    named = False
    for raw in hosts:
        host = raw.strip().lower().rstrip(".")
        try:
            out.append(str(ipaddress.ip_network(host, strict=False)))
            continue
        except ValueError:
            pass
        named = True
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError:
            continue  # does not resolve now: nothing of it is allowed
        out.extend(str(ipaddress.ip_network(info[4][0])) for info in infos)
    return list(dict.fromkeys(out)), named


def restrict(sandbox: Any, hosts: list[str]) -> list[str]:
    """Let ``sandbox`` reach only ``hosts`` (replacing any earlier allowlist); returns the
    networks allowed."""
    reason = why_not(sandbox)
    if reason is not None:
        raise ConfigError(f"network_mode = \"allowlist\" cannot be enforced here: {reason}")
    nets, named = addresses(hosts)
    sandbox.container.reload()
    pid = int(sandbox.container.attrs.get("State", {}).get("Pid") or 0)
    if pid <= 0:
        raise SandboxError(f"sandbox {sandbox.name}: no process to set its firewall through (is it running?)")
    dns: list[str] = []
    if named:
        resolv = sandbox.exec(["cat", "/etc/resolv.conf"], user="root", timeout=30).stdout.decode(errors="replace")
        dns = [line.split()[1] for line in resolv.splitlines() if line.startswith("nameserver") and len(line.split()) > 1]
    for tool, version in (("iptables", 4), ("ip6tables", 6)):
        if shutil.which(tool) is None:
            if version == 4:
                raise ConfigError("network_mode = \"allowlist\" needs the host's iptables")
            continue
        rules = [["-P", "OUTPUT", "ACCEPT"], ["-F", "OUTPUT"], ["-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"]]
        for net in nets:
            if ipaddress.ip_network(net).version == version:
                rules.append(["-A", "OUTPUT", "-d", net, "-j", "ACCEPT"])
        for server in dns:
            if ipaddress.ip_address(server).version == version:
                rules += [["-A", "OUTPUT", "-d", server, "-p", proto, "--dport", "53", "-j", "ACCEPT"]
                          for proto in ("udp", "tcp")]
        rules.append(["-P", "OUTPUT", "DROP"])
        for rule in rules:
            run = subprocess.run(["nsenter", "-t", str(pid), "-n", tool, "-w", *rule], capture_output=True,
                                 text=True, timeout=30)
            if run.returncode != 0:
                if version == 6 and rule[0] == "-P" and rule[2] == "ACCEPT":
                    break  # no IPv6 in this namespace: nothing to filter
                raise SandboxError(f"sandbox {sandbox.name}: could not set its firewall ({tool} "
                                   f"{' '.join(rule)}): {run.stderr.strip()[-300:]}")
    return nets
