# Twin primes: pairs of primes that differ by 2.
def is_prime(n: int) -> bool:
    if n < 2:
        return False
    for d in range(2, n):
        if d * d > n:
            break
        if n % d == 0:
            return False
    return True


count = 0
for p in range(3, 200, 2):
    if is_prime(p) and is_prime(p + 2):
        count += 1
        if p < 50:
            print(p, p + 2)
print(count)
