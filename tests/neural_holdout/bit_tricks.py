# Bit tricks: xor swap, lowest set bit, bit toggling and complement.
x = 12
y = 5
x ^= y
y ^= x
x ^= y
print(x, y)
print(12 & -12, 40 & -40, 7 & -7)
flags = 0
for bit in range(0, 8, 2):
    flags |= 1 << bit
print(flags, flags ^ 255, ~flags, flags >> 2)
