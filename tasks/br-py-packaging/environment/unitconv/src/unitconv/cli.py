"""Command line: VALUE FROM TO."""

import sys

from . import UnitError, convert


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: unitconv VALUE FROM TO", file=sys.stderr)
        return 2
    try:
        value = float(args[0])
    except ValueError:
        print(f"error: not a number: {args[0]!r}", file=sys.stderr)
        return 2
    try:
        result = convert(value, args[1], args[2])
    except UnitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{result:.6g} {args[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
