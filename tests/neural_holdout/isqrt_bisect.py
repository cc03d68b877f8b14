# Integer square root by bisection.
def isqrt(n: int) -> int:
    lo = 0
    hi = n + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid <= n // mid:
            lo = mid
        else:
            hi = mid
    return lo


print(isqrt(0), isqrt(1), isqrt(15), isqrt(16), isqrt(17))
print(isqrt(1000000), isqrt(999999))
print(isqrt(2147483646))
