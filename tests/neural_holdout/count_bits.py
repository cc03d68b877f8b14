# Count the 1 bits of a number, two ways.
def popcount(n: int) -> int:
    c = 0
    while n:
        c += n & 1
        n >>= 1
    return c


def popcount_kernighan(n: int) -> int:
    c = 0
    while n != 0:
        n &= n - 1
        c += 1
    return c


print(popcount(0), popcount(7), popcount(255), popcount(1024))
print(popcount_kernighan(0), popcount_kernighan(7), popcount_kernighan(2147483647))
