# Binomial coefficients by Pascal's rule.
def binom(n: int, k: int) -> int:
    if k == 0 or k == n:
        return 1
    return binom(n - 1, k - 1) + binom(n - 1, k)


for n in range(1, 7):
    row_sum = 0
    for k in range(n + 1):
        row_sum += binom(n, k)
    print(n, row_sum, binom(n, n // 2))
print(binom(12, 6))
