# Euler's totient function from the prime factors.
def phi(n: int) -> int:
    result = n
    p = 2
    while p * p <= n:
        if n % p == 0:
            while n % p == 0:
                n //= p
            result -= result // p
        p += 1
    if n > 1:
        result -= result // n
    return result


print(phi(1), phi(9), phi(10), phi(36), phi(97))
total = 0
for n in range(1, 101):
    total += phi(n)
print(total)
