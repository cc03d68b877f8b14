# Angle between the clock hands, in half degrees (to stay in integers).
def half_degrees(h: int, m: int) -> int:
    a = abs(60 * (h % 12) - 11 * m)
    return min(a, 720 - a)


print(half_degrees(3, 0), half_degrees(6, 0), half_degrees(12, 0))
print(half_degrees(9, 45), half_degrees(2, 20), half_degrees(11, 59))
