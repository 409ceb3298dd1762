#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/textkit
# 1. libtkstats depends on libtkcore: it must come first on the link line
sed -i 's/-Lbuild -ltkcore -ltkstats/-Lbuild -ltkstats -ltkcore/' Makefile
# 2. normalize.c was never archived into libtkcore.a
sed -i 's|^CORE_OBJS = .*|CORE_OBJS = build/core/table.o build/core/tokenize.o build/core/normalize.o|' Makefile
# 3. a plain C99 "inline" definition in a header emits no external symbol: at -O0 the calls
#    stay calls and the symbol is missing. Make it static inline.
sed -i 's/^inline int tk_is_word_char/static inline int tk_is_word_char/' include/tk/core.h
make clean
make
echo "The cat and THE dog and the bird" | ./wordfreq -n 3
