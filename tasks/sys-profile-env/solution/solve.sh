#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
# This image has no /etc/profile at all: create one that reads /etc/profile.d.
if [ ! -f /etc/profile ]; then
  cat > /etc/profile <<'PROFILE'
# /etc/profile: system-wide .profile file for the Bourne shell (sh(1))
# and Bourne compatible shells (bash(1), ksh(1), ash(1), ...).
if [ "$(id -u)" -eq 0 ]; then
  PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
else
  PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
fi
export PATH

if [ -d /etc/profile.d ]; then
  for i in /etc/profile.d/*.sh; do
    if [ -r "$i" ]; then
      . "$i"
    fi
  done
  unset i
fi
PROFILE
fi
mkdir -p /etc/profile.d
echo 'export COMPANY_ENV=staging' > /etc/profile.d/company.sh
chmod 0644 /etc/profile.d/company.sh

install -d -o dana -g dana /home/dana/bin
cat >> /home/dana/.profile <<'PROFILE'

# --- dana's login environment ---
export JAVA_HOME=/opt/jdk-21
export EDITOR=vim
# $HOME/bin, then the JDK, then everything else (without duplicates)
PATH="$HOME/bin:/opt/jdk-21/bin:$(printf %s "$PATH" | tr ':' '\n' | grep -vx -e "$HOME/bin" -e /opt/jdk-21/bin | paste -sd:)"
export PATH
umask 027
PROFILE
cat >> /home/dana/.bashrc <<'RC'

# --- dana's interactive settings ---
alias ll='ls -alF'
HISTSIZE=5000
RC
chown dana:dana /home/dana/.profile /home/dana/.bashrc
setpriv --reuid dana --regid dana --init-groups env -i HOME=/home/dana USER=dana bash -l -c 'echo $COMPANY_ENV $JAVA_HOME $PATH; umask; command -v java'
