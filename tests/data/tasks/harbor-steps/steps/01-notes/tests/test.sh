#!/bin/bash
source /tests/check.sh
verdict test "$(cat /app/notes.txt 2>/dev/null)" = "$(printf 'alpha\nbeta')"
