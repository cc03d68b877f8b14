# Chained comparisons and short-circuit and/or: each side effect prints.
def say(x: int) -> int:
    print(x)
    return x


def yes(b: bool) -> bool:
    print(b)
    return b


print(1 < 2 < 3, 3 > 2 > 2, 1 <= 1 == 1 != 2)
print(say(1) < say(2) < say(0) < say(5))
print(say(5) < say(3) < say(9))
print(yes(False) and yes(True))
print(yes(True) or yes(False))
print(yes(True) and yes(False) or yes(True))
print(say(0) or say(7), say(3) and say(4), say(0) and say(9))
print(not 0, not 5, -3 < -2 <= -2 >= -9)
x = 7
print(0 < x < 10, 0 < x < 5, x if x > 5 else -x, (x > 5) == True)
for i in range(-2, 3):
    print(i, -1 <= i <= 1, i != 0 and 10 // i > 3)
