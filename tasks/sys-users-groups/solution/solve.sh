#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
groupadd -g 3100 webdev
groupadd -g 3200 dbadmin
groupadd auditors
useradd -u 3101 -g webdev -G dbadmin -s /bin/bash -m -d /home/maria maria
chmod 0750 /home/maria
echo 'maria:Harbor-Lantern-2024' | chpasswd
install -d -m 0700 -o maria -g webdev /home/maria/.ssh
install -m 0600 -o maria -g webdev /app/keys/maria.pub /home/maria/.ssh/authorized_keys
useradd -u 3102 -g webdev -G auditors -s /bin/bash -m -d /home/kenji kenji
chmod 0700 /home/kenji
passwd -l kenji
useradd -r -U -G auditors -s /usr/sbin/nologin -d /var/lib/backupd backupd
install -d -m 0750 -o backupd -g backupd /var/lib/backupd
id maria; id kenji; id backupd
