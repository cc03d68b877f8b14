# Largest and smallest digit of a number, with max() and min().
def max_digit(n: int) -> int:
    m = 0
    while n > 0:
        m = max(m, n % 10)
        n //= 10
    return m


def min_digit(n: int) -> int:
    m = 9
    while n > 0:
        m = min(m, n % 10)
        n //= 10
    return m


print(max_digit(3871), min_digit(3871))
print(max_digit(505), min_digit(505), max_digit(7), min_digit(7))
