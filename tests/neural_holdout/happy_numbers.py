# Happy numbers: repeatedly summing the squares of the digits reaches 1.
def next_happy(n: int) -> int:
    s = 0
    while n > 0:
        d = n % 10
        s += d * d
        n //= 10
    return s


def is_happy(n: int) -> bool:
    while n != 1 and n != 4:
        n = next_happy(n)
    return n == 1


count = 0
for n in range(1, 100):
    if is_happy(n):
        count += 1
print(count)
print(is_happy(7), is_happy(4), is_happy(100))
