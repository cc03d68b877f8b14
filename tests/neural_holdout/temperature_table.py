# Celsius to Fahrenheit, rounded down to whole degrees.
def fahrenheit(c: int) -> int:
    return c * 9 // 5 + 32


for c in range(-40, 101, 20):
    print(c, fahrenheit(c))
