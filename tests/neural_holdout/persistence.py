# Multiplicative persistence: multiply the digits until one digit is left.
def digit_product(n: int) -> int:
    p = 1
    while n > 0:
        p *= n % 10
        n //= 10
    return p


def persistence(n: int) -> int:
    steps = 0
    while n >= 10:
        n = digit_product(n)
        steps += 1
    return steps


print(persistence(39), persistence(999), persistence(4), persistence(679))
print(persistence(6788), persistence(277777788))
