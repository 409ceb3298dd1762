#!/bin/bash
set -e
useradd -m -s /bin/bash deploy
groupadd -f staff
d=/home/deploy/.ssh
mkdir -p $d
cd $d
openssl genpkey -algorithm ed25519 -out id_ed25519 2>/dev/null
openssl pkey -in id_ed25519 -pubout -out id_ed25519.pub
openssl genrsa -traditional -out deploy_rsa 2048 2>/dev/null
openssl pkey -in deploy_rsa -pubout -out deploy_rsa.pub
openssl genpkey -algorithm ed25519 -out ci_key.tmp 2>/dev/null
{ echo "# old CI key, keep until migration"; cat ci_key.tmp; } > ci.bak; rm ci_key.tmp
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
