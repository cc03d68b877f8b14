# Greatest common divisor by repeated subtraction, and the least common multiple.
def gcd(a: int, b: int) -> int:
    while a != b:
        if a > b:
            a -= b
        else:
            b -= a
    return a


def lcm(a: int, b: int) -> int:
    return a * b // gcd(a, b)


print(gcd(48, 18), gcd(100, 75), gcd(17, 13))
print(lcm(4, 6), lcm(12, 18), lcm(7, 5))
