# Bit tricks on 32-bit ints: popcount, lowest set bit, powers of two, bit reversal.
def popcount(x: int) -> int:
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


def is_power_of_two(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def reverse16(x: int) -> int:
    r = 0
    for _ in range(16):
        r = (r << 1) | (x & 1)
        x >>= 1
    return r


def show(x: int):
    print(x, popcount(x), x & -x, is_power_of_two(x), reverse16(x))


show(0)
show(1)
show(7)
show(256)
show(0xFFFF)
show(0b1011_0000)
print(~0, ~5, -1 >> 4, 1 << 30, 0x7FFF_FFFF ^ 0x5555_5555)
print(0x7FFF_FFFF, -0x8000_0000, 2**30 + (2**30 - 1))
print(True & True, True | False, True ^ True, 6 & 3, 6 | 3, 6 ^ 3)

powers = 0
for i in range(1, 100_000):
    if is_power_of_two(i):
        powers += 1
print(powers, popcount(0x7FFF_FFFF), popcount(0x5555_5555))
