#!/bin/bash
grep ' ERROR ' /app/logs/server.log > /app/errors.txt
wc -l < /app/errors.txt > /app/error_count.txt
