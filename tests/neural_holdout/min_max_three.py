# The largest and smallest of three numbers.
def max3(a: int, b: int, c: int) -> int:
    if a >= b and a >= c:
        return a
    elif b >= c:
        return b
    else:
        return c


def min3(a, b, c):
    return min(a, min(b, c))


print(max3(3, 9, 4), max3(-1, -5, -2), max3(7, 7, 7))
print(min3(3, 9, 4), min3(-1, -5, -2))
print(max(1, 2, 3, 4), min(8, -8, 0))
