# Divisor sums for the first 2,000 numbers: perfect, abundant and deficient numbers.
def divisor_sum(n: int) -> int:
    total = 1
    d = 2
    while d * d <= n:
        if n % d == 0:
            total += d
            if d * d != n:
                total += n // d
        d += 1
    return total


perfect = 0
abundant = 0
deficient = 0
amicable = 0
for n in range(2, 2001):
    s = divisor_sum(n)
    if s == n:
        perfect += 1
        print(n)
    elif s > n:
        abundant += 1
    else:
        deficient += 1
    if s != n and s <= 2000 and s > 1 and divisor_sum(s) == n:
        amicable += 1
print(perfect, abundant, deficient, amicable)
