# Fast modular exponentiation by repeated squaring.
def power_mod(base: int, exp: int, m: int) -> int:
    result = 1
    base = base % m
    while exp > 0:
        if exp % 2 == 1:
            result = result * base % m
        base = base * base % m
        exp //= 2
    return result


print(power_mod(2, 10, 1000))
print(power_mod(3, 200, 13))
print(power_mod(7, 12345, 10007))
print(power_mod(5, 0, 7))
