# Parity of the number of 1 bits.
def parity(n: int) -> bool:
    p = False
    while n > 0:
        if n & 1 == 1:
            p = not p
        n >>= 1
    return p


print(parity(1), parity(3), parity(7), parity(8))
odd = 0
for i in range(64):
    if parity(i):
        odd += 1
print(odd)
