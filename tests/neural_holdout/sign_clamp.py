# Sign and clamp written with conditional expressions.
def sign(x: int) -> int:
    return 1 if x > 0 else -1 if x < 0 else 0


def clamp(x: int, lo: int, hi: int) -> int:
    return lo if x < lo else hi if x > hi else x


print(sign(42), sign(-7), sign(0))
print(clamp(5, 0, 10), clamp(-3, 0, 10), clamp(99, 0, 10))
s = 0
for x in range(-5, 6):
    s += sign(x) * clamp(x * x, 2, 9)
print(s)
