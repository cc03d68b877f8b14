# Perfect numbers: equal to the sum of their proper divisors.
def sum_divisors(n: int) -> int:
    s = 1
    d = 2
    while d * d <= n:
        if n % d == 0:
            s += d
            if d * d != n:
                s += n // d
        d += 1
    return s


for n in range(2, 1000):
    if sum_divisors(n) == n:
        print(n)
