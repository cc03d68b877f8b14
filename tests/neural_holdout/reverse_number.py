# Reverse the digits of a non-negative integer.
def reverse(n: int) -> int:
    r = 0
    while n > 0:
        r = r * 10 + n % 10
        n //= 10
    return r


print(reverse(1234), reverse(1200), reverse(5))
print(reverse(reverse(9876)))
print(reverse(1000000) + 1)
