"""Writes requests.h, the requests compiled into the review tool, from requests.json."""
import json
import sys

data = json.load(open(sys.argv[1]))
c = json.dumps  # a JSON string of printable ASCII is a valid C string literal
print("/* made by gen_requests.py from requests.json at build time */")
print(f"static const char REVIEW_DATE[] = {c(data['review_date'])};")
print("struct request {")
print("    const char *id, *requester, *team, *role, *resource;")
print("    int manager_approved;")
print("    const char *training; /* NULL: never */")
print("};")
print("static const struct request REQUESTS[] = {")
for r in data["requests"]:
    fields = [c(r[k]) for k in ("id", "requester", "team", "role", "resource")]
    training = c(r["training_completed"]) if r["training_completed"] else "NULL"
    print(f"    {{{', '.join(fields)}, {int(bool(r['manager_approved']))}, {training}}},")
print("};")
print(f"#define N_REQUESTS {len(data['requests'])}")
