#!/bin/bash
# A shared project tree with messy ownership and modes.
set -e
groupadd -g 4100 atlas
useradd -m -U -G atlas -s /bin/bash lee
useradd -m -U -G atlas -s /bin/bash mona
useradd -m -U -s /bin/bash guest
mkdir -p /opt/vendor && echo "Vendor license text" > /opt/vendor/LICENSE && chmod 0644 /opt/vendor/LICENSE
T=/srv/projects/atlas
mk() {  # mk TYPE PATH OWNER:GROUP MODE
  if [ "$1" = d ]; then mkdir -p "$T/$2"; else printf 'content of %s\n' "$2" > "$T/$2"; fi
  chown "$3" "$T/$2"; chmod "$4" "$T/$2"
}
mkdir -p /srv/projects && chmod 0755 /srv/projects
mk d . root:root 0755
mk f README.md lee:lee 0644
mk d bin lee:lee 0755
mk f bin/deploy.sh lee:lee 0755
mk f bin/lint.sh mona:mona 0700
mk d data mona:mona 0700
mk f data/raw.csv mona:mona 0600
mk f data/clean.csv lee:atlas 0664
mk d data/archive root:root 0777
mk f data/archive/2023.tar.gz root:root 0666
mk d docs lee:lee 0775
mk f docs/guide.md mona:mona 0640
mk f docs/notes.txt guest:guest 0644
ln -s /opt/vendor/LICENSE "$T/docs/upstream-license"
mk d reports mona:mona 2755
mk f reports/q1.txt mona:mona 0664
mk f reports/q2.txt lee:lee 0444
mk d tools lee:lee 0755
mk f tools/run.py lee:lee 0750
mk f tools/helper.py lee:lee 0640
mk d tools/.cache lee:lee 0700
mk f tools/.cache/index.bin lee:lee 0600
mk f .env.shared mona:mona 0604
