# Ugly numbers have no prime factors other than 2, 3 and 5.
def is_ugly(n: int) -> bool:
    for p in range(2, 6):
        while n % p == 0:
            n //= p
    return n == 1


count = 0
last = 0
for n in range(1, 101):
    if is_ugly(n):
        count += 1
        last = n
print(count, last)
print(is_ugly(14), is_ugly(30), is_ugly(1))
