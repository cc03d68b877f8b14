# Goldbach: each even number from 4 to 16 as a sum of two primes.
def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


for n in range(4, 17, 2):
    p = 2
    while not (is_prime(p) and is_prime(n - p)):
        p += 1
    print(n, p, n - p)
