#!/bin/bash
source /tests/check.sh
verdict test "$(cat "$EXPECTED_FILE" 2>/dev/null)" = "$(wc -l < /app/items.txt)" -a -f /app/notes.txt
