#!/bin/sh
# Starts kvserve in the background; its pid goes to /run/kvserve.pid, its stderr to
# /run/kvserve.err. Usage: start.sh [CONFIG]
CONF=${1:-/etc/kvserve/kvserve.conf}
nohup python3 /opt/kvserve/kvserve.py "$CONF" > /run/kvserve.err 2>&1 &
echo $! > /run/kvserve.pid
