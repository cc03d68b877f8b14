# Numbers whose binary representation reads the same both ways.
def reverse_bits(n: int) -> int:
    r = 0
    while n > 0:
        r = (r << 1) | (n & 1)
        n >>= 1
    return r


count = 0
for n in range(1, 100):
    if reverse_bits(n) == n:
        count += 1
print(count)
print(reverse_bits(6), reverse_bits(13), reverse_bits(1))
