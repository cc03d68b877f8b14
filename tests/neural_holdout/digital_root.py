# Digital root: sum the digits until one digit is left.
def digit_sum(n: int) -> int:
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s


def digital_root(n: int) -> int:
    while n >= 10:
        n = digit_sum(n)
    return n


print(digital_root(16), digital_root(942), digital_root(132189))
ok = True
for n in range(1, 500):
    if digital_root(n) != 1 + (n - 1) % 9:
        ok = False
print(ok)
