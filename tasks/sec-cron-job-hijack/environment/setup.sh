#!/bin/bash
set -e
groupadd devs
useradd -m -s /bin/bash -G devs intern
mkdir -p /etc/cron.d /opt/jobs/lib /opt/app/bin /srv/report /srv/data /var/log/app /var/tmp/app-cache /var/backups
for i in 1 2 3 4 5; do echo "record $i" > /srv/data/part-$i.dat; done

cat > /opt/jobs/backup.sh <<'S'
#!/bin/bash
# Nightly archive of the application data.
tar czf /var/backups/app-data.tar.gz -C /srv data
S
cat > /opt/jobs/rotate-logs.sh <<'S'
#!/bin/bash
. /opt/jobs/lib/common.sh
for f in "$LOG_DIR"/*.log; do
  [ -e "$f" ] || continue
  mv "$f" "$f.1" && : > "$f"
done
S
cat > /opt/jobs/lib/common.sh <<'S'
# Shared settings for the maintenance jobs.
LOG_DIR=/var/log/app
S
cat > /srv/report/build-report.sh <<'S'
#!/bin/bash
mkdir -p out
ls /srv/data | wc -l > out/report.txt
S
cat > /opt/app/bin/cleanup-tmp <<'S'
#!/bin/bash
find /var/tmp/app-cache -type f -delete
S
cat > /home/intern/sync.sh <<'S'
#!/bin/bash
date +%s > "$HOME/last-sync"
S
cat > /etc/cron.d/app-jobs <<'S'
SHELL=/bin/bash
PATH=/opt/app/bin:/tmp:/usr/local/bin:/usr/bin:/bin
# m  h  dom mon dow user   command
*/5  *  *   *   *   root   /opt/jobs/backup.sh
15   *  *   *   *   root   /opt/jobs/rotate-logs.sh
0    3  *   *   *   root   cd /srv/report && ./build-report.sh
0    *  *   *   *   root   cleanup-tmp
30   2  *   *   *   intern /home/intern/sync.sh
S

chmod 0777 /opt/jobs/backup.sh
chmod 0755 /opt/jobs/rotate-logs.sh /srv/report/build-report.sh /opt/app/bin/cleanup-tmp
chgrp devs /opt/jobs /opt/app/bin; chmod 0775 /opt/jobs /opt/app/bin
chmod 0777 /opt/jobs/lib
chown intern:intern /opt/jobs/lib/common.sh; chmod 0644 /opt/jobs/lib/common.sh
chown intern:devs /srv/report; chmod 0755 /srv/report
chown intern:intern /home/intern/sync.sh; chmod 0700 /home/intern/sync.sh
chmod 0666 /etc/cron.d/app-jobs
