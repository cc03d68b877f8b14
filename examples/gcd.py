# Euclid's algorithm, iterative and recursive, and the least common multiple.
def gcd(a: int, b: int) -> int:
    while b != 0:
        t = a % b
        a = b
        b = t
    return a


def gcd_rec(a: int, b: int) -> int:
    if b == 0:
        return a
    return gcd_rec(b, a % b)


def lcm(a: int, b: int) -> int:
    return a // gcd(a, b) * b


print(gcd(1071, 462), gcd_rec(1071, 462))
print(gcd(17, 5), gcd(0, 9), gcd(9, 0))
print(lcm(4, 6), lcm(21, 6))

# the lcm of 1..20 fits in 32 bits
m = 1
for k in range(1, 21):
    m = lcm(m, k)
print(m)

coprime = 0
for a in range(1, 31):
    for b in range(1, 31):
        if gcd(a, b) == 1:
            coprime += 1
print(coprime)
