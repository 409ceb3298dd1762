"""A quick demonstration of memo.memoize."""

from memo import memoize

calls = 0


@memoize(maxsize=3)
def square(x):
    global calls
    calls += 1
    return x * x


for x in (1, 2, 3, 1, 2, 3):
    print(x, square(x))
print("calls", calls, square.cache_info())
