#!/usr/bin/env python3
"""view.py FILE [--page N] [--per-page K]: shows one page of the lines of FILE (a newline at the
end of the file ends the last line; it does not start another one).

Output: a header line "page N of T (lines A-B of TOTAL)", the lines of the page, and, when there
is a next page, a last line "more: --page N+1". A and B are the 1-based numbers of the first and
last line shown (both 0 when the file has no lines). Exit status 2 on a bad page or page size.
"""

import argparse
import sys

from pager import PageError, paginate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--page", type=int, default=1)
    ap.add_argument("--per-page", type=int, default=20)
    args = ap.parse_args(argv)
    with open(args.file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        p = paginate(lines, args.page, args.per_page)
    except PageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    first = (p["page"] - 1) * args.per_page + 1 if p["items"] else 0
    last = first + len(p["items"]) - 1 if p["items"] else 0
    print(f"page {p['page']} of {p['total_pages']} (lines {first}-{last} of {len(lines)})")
    for line in p["items"]:
        print(line)
    if p["has_next"]:
        print(f"more: --page {p['page'] + 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
