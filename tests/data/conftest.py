# The tasks' own test files run inside sandboxes, never in this test session.
collect_ignore_glob = ["*"]
