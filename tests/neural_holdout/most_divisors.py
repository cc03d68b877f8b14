# The number below 100 with the most divisors.
def count_divisors(n: int) -> int:
    c = 0
    for d in range(1, n + 1):
        if n % d == 0:
            c += 1
    return c


best = 1
best_count = 1
for n in range(1, 100):
    c = count_divisors(n)
    if c > best_count:
        best = n
        best_count = c
print(best, best_count)
print(count_divisors(1), count_divisors(36), count_divisors(97))
