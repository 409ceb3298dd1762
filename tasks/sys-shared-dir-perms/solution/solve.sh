#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
T=/srv/projects/atlas
chgrp -R -h atlas "$T"                      # -R does not follow symlinks; -h: the link itself
find "$T" -type d -exec chmod 2770 {} +
find "$T" -type f -perm -u+x -exec chmod 0770 {} +
find "$T" -type f ! -perm -u+x -exec chmod 0660 {} +
find "$T" -printf '%M %u:%g %p\n'
