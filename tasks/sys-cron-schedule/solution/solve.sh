#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
mkdir -p /etc/cron.d
cat > /etc/cron.d/maintenance <<'CRON'
# Maintenance jobs
MAILTO=ops@example.com
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

30 2 * * *        backup    /opt/jobs/db-backup.sh
*/15 8-17 * * 1-5 www-data  /opt/jobs/rotate-uploads.sh
0 6 1,15 * *      root      /opt/jobs/report.sh monthly
10 4 * * sun      root      /opt/jobs/cleanup-tmp.sh
45 23 10-20 3-11 * root     /opt/jobs/cert-check.sh
# day of month and day of week both restricted: cron runs when EITHER matches
0 12 13 * 5       root      /opt/jobs/luck.sh
CRON
chown root:root /etc/cron.d/maintenance
chmod 0644 /etc/cron.d/maintenance
cat /etc/cron.d/maintenance
