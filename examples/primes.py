# Primes by trial division: the first primes, a count below 5000, and twin primes.
def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


for n in range(30):
    if is_prime(n):
        print(n)

count = 0
for n in range(5000):
    if is_prime(n):
        count += 1
print(count)

twins = 0
for n in range(3, 1000, 2):
    if is_prime(n) and is_prime(n + 2):
        twins += 1
print(twins, is_prime(997), is_prime(999))
