# Ways to climb n stairs taking 1 or 2 steps at a time.
def ways_rec(n: int) -> int:
    if n <= 1:
        return 1
    return ways_rec(n - 1) + ways_rec(n - 2)


def ways_loop(n: int) -> int:
    a = 1
    b = 1
    for _ in range(n - 1):
        t = a + b
        a = b
        b = t
    return b


print(ways_rec(1), ways_rec(5), ways_rec(10))
print(ways_loop(10), ways_loop(30))
