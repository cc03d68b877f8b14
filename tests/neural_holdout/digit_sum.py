# Sum of the decimal digits of a number.
def digit_sum(n: int) -> int:
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s


print(digit_sum(12345))
print(digit_sum(9999), digit_sum(0), digit_sum(7))
total = 0
for i in range(1, 101):
    total += digit_sum(i)
print(total)
