# Zeller's congruence: 0 is Saturday, 1 Sunday, ..., 6 Friday.
def day_of_week(y: int, m: int, d: int) -> int:
    if m < 3:
        m += 12
        y -= 1
    k = y % 100
    j = y // 100
    return (d + 13 * (m + 1) // 5 + k + k // 4 + j // 4 + 5 * j) % 7


print(day_of_week(2000, 1, 1))
print(day_of_week(1969, 7, 20))
print(day_of_week(2024, 2, 29))
sundays = 0
for m in range(1, 13):
    if day_of_week(2023, m, 1) == 1:
        sundays += 1
print(sundays)
