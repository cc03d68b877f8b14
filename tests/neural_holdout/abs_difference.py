# Absolute differences, by hand and with abs().
def abs_diff(a: int, b: int) -> int:
    if a > b:
        return a - b
    return b - a


print(abs_diff(3, 10), abs_diff(10, 3), abs_diff(-4, 4))
print(abs(-7), abs(7), abs(3 - 12))
total = 0
for i in range(10):
    total += abs_diff(i * i, 20)
print(total)
