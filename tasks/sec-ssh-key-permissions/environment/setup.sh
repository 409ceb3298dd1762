#!/bin/bash
set -e
useradd -m -s /bin/bash deploy
groupadd -f staff
d=/home/deploy/.ssh
mkdir -p $d
cd $d
# Throwaway keys made once for this task and shipped with it (keys/): every build is the same
# instance, where keys generated here would differ from build to build.
cp /tmp/keys/id_ed25519 /tmp/keys/deploy_rsa .
openssl pkey -in id_ed25519 -pubout -out id_ed25519.pub
openssl pkey -in deploy_rsa -pubout -out deploy_rsa.pub
{ echo "# old CI key, keep until migration"; cat /tmp/keys/ci_key; } > ci.bak
printf 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleOnlyNotARealKeyxxxxxxxxxxxxxxxxxx ops@bastion\n' > authorized_keys
printf 'github.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyPlaceholderxxxxxxxxxxxxxxxxxx\n' > known_hosts
printf 'Host git\n  HostName github.example.com\n  IdentityFile ~/.ssh/id_ed25519\n' > config
printf 'rotate deploy_rsa before 2025-01-01\n' > NOTES
chown -R root:root $d
chmod 0777 $d
chmod 0644 id_ed25519
chmod 0640 deploy_rsa; chgrp staff deploy_rsa
chmod 0666 ci.bak id_ed25519.pub authorized_keys
chmod 4755 known_hosts
chmod 0777 config
chmod 0600 deploy_rsa.pub NOTES
chown deploy:staff NOTES
