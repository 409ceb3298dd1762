#!/bin/bash
# Reference solution.
wc -w < /data/words.txt | tr -d ' ' > /app/count.txt
