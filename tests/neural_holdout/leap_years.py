# Leap years in the Gregorian calendar.
def is_leap(y: int) -> bool:
    return y % 4 == 0 and y % 100 != 0 or y % 400 == 0


def days_in_year(y: int) -> int:
    if is_leap(y):
        return 366
    return 365


print(is_leap(1900), is_leap(2000), is_leap(2023), is_leap(2024))
days = 0
for y in range(1901, 2001):
    days += days_in_year(y)
print(days)
