import json
import sys

VAT = 0.19


def total(items):
    net = sum(item["price"] for item in items)
    return net * (1 + VAT)


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        print(f"TOTAL: {total(json.load(fh)):.2f}")
