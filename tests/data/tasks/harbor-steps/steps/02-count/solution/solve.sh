#!/bin/bash
wc -l < /app/items.txt > /app/count.txt
