"""Small statistics helpers."""


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def variance(values):
    values = list(values)
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / len(values)
