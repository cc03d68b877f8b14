# Factorials, exactly while they fit and modulo a prime afterwards.
def factorial(n: int) -> int:
    if n <= 1:
        return 1
    return n * factorial(n - 1)


def fact_mod(n: int, m: int) -> int:
    r = 1
    for i in range(2, n + 1):
        r = r * i % m
    return r


print(factorial(5), factorial(10), factorial(12))
print(fact_mod(5, 1000), fact_mod(20, 1000007), fact_mod(100, 1000007))
