#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The oracle drives vim in Ex mode with the same commands a user would type after ':'.
set -e
vim -es -u NONE -i NONE /app/config/gateway.toml <<'VIM'
1
/^\[server\]/;/^\[/s/^port = .*/port = 8443/
1
/^\[server\]/;/^\[/s/^tls = .*/tls = true/
1
/^\[database\]/;/^\[/s/^pool_size = .*/pool_size = 20/
1
/^\[logging\]/;/^\[/s/^log_level = .*/level = "warn"/
1
/^\[legacy\]/;/^\[limits\]/-1d
1
/^name = "search"/;/^weight/s/^weight = .*/weight = 5/
$a

[[upstream]]
name = "billing"
url = "http://10.0.4.12:9000"
weight = 3
.
wq
VIM
cat /app/config/gateway.toml
