# Reduce fractions to lowest terms with Euclid's algorithm.
def gcd(a: int, b: int) -> int:
    if b == 0:
        return a
    return gcd(b, a % b)


def show(num: int, den: int) -> None:
    g = gcd(num, den)
    print(num // g, den // g)


show(6, 8)
show(100, 75)
show(17, 51)
show(13, 7)
