#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/src/tally
# 1. build (tally.c uses sqrt: link with libm)
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall
LDLIBS = -lm
PREFIX = /usr/local
DESTDIR =
VERSION = 1.4.2
DISTNAME = tally-$(VERSION)

tally: tally.o
	$(CC) $(CFLAGS) -o tally tally.o $(LDLIBS)

tally.o: tally.c
	$(CC) $(CFLAGS) -c tally.c

install: tally
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 tally $(DESTDIR)$(PREFIX)/bin/tally
	install -m 0644 tally.1 $(DESTDIR)$(PREFIX)/share/man/man1/tally.1

dist:
	rm -rf $(DISTNAME) && mkdir $(DISTNAME)
	cp tally.c tally.1 Makefile $(DISTNAME)/
	tar -czf $(DISTNAME).tar.gz $(DISTNAME)
	rm -rf $(DISTNAME)

clean:
	rm -f tally tally.o $(DISTNAME).tar.gz

.PHONY: install dist clean
MK
make clean && make
# 2. install
make install
# 3. wrapper
cat > /usr/local/bin/tally-report <<'SH'
#!/bin/bash
# tally-report DIR: per-file and total statistics of DIR/*.dat via tally
set -euo pipefail
dir=${1:?usage: tally-report DIR}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
shopt -s nullglob
files=()
while IFS= read -r f; do files+=("$f"); done < <(printf '%s\n' "$dir"/*.dat | LC_ALL=C sort)
for f in "${files[@]}"; do
  out=$(tally "$f")
  n=$(field count "$out")
  if [ "$n" = 0 ]; then
    printf '%s\t0\t-\t-\n' "$(basename "$f")"
  else
    printf '%s\t%s\t%s\t%s\n' "$(basename "$f")" "$n" "$(field mean "$out")" "$(field stddev "$out")"
  fi
done
if [ ${#files[@]} -gt 0 ]; then out=$(tally "${files[@]}"); else out=$(tally </dev/null); fi
n=$(field count "$out")
if [ "$n" = 0 ]; then
  printf 'TOTAL\t0\t-\t-\n'
else
  printf 'TOTAL\t%s\t%s\t%s\n' "$n" "$(field mean "$out")" "$(field stddev "$out")"
fi
SH
chmod 755 /usr/local/bin/tally-report
# 4. report
mkdir -p /app/out
tally-report /app/data > /app/out/report.tsv
# 5. release
make dist
cp tally-1.4.2.tar.gz /app/out/
cd /app/out && sha256sum report.tsv tally-1.4.2.tar.gz > SHA256SUMS
