#!/bin/sh
. /app/svc/.env
exec python3 -m http.server 8000
