# Powers of two: test, floor of log2, and the next power up.
def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def log2_floor(n: int) -> int:
    k = -1
    while n > 0:
        n >>= 1
        k += 1
    return k


def next_power(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


print(is_power_of_two(64), is_power_of_two(96), is_power_of_two(0))
print(log2_floor(1), log2_floor(1000), log2_floor(1024))
print(next_power(1), next_power(17), next_power(1000))
