#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
chown root:root /etc/cron.d/app-jobs && chmod 0644 /etc/cron.d/app-jobs
# /tmp is world-writable: it must not be searched for root's commands.
sed -i 's#^PATH=.*#PATH=/opt/app/bin:/usr/local/bin:/usr/bin:/bin#' /etc/cron.d/app-jobs
chown root:root /opt/jobs /opt/jobs/lib /opt/app /opt/app/bin /opt/app/bin/cleanup-tmp
chmod 0755 /opt/jobs /opt/jobs/lib /opt/app/bin
chown root:root /opt/jobs/backup.sh /opt/jobs/rotate-logs.sh /opt/jobs/lib/common.sh
chmod 0755 /opt/jobs/backup.sh /opt/jobs/rotate-logs.sh
chmod 0644 /opt/jobs/lib/common.sh
chown -R root:root /srv/report && chmod 0755 /srv/report /srv/report/build-report.sh
cat /etc/cron.d/app-jobs
