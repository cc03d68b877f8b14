# Three-digit Armstrong numbers: the sum of the cubes of the digits.
def cube_digits(n: int) -> int:
    s = 0
    while n > 0:
        d = n % 10
        s += d**3
        n //= 10
    return s


for n in range(100, 1000):
    if cube_digits(n) == n:
        print(n)
