# Integer square root by Newton's method.
def isqrt(n: int) -> int:
    if n < 2:
        return n
    x = n
    y = (x + 1) // 2
    while y < x:
        x = y
        y = (x + n // x) // 2
    return x


print(isqrt(2), isqrt(26), isqrt(99), isqrt(100))
print(isqrt(123456789))
bad = 0
for n in range(300):
    r = isqrt(n)
    if not (r * r <= n < (r + 1) * (r + 1)):
        bad += 1
print(bad)
