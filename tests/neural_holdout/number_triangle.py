# The pattern 1, 12, 123, ... built with nested loops, and Floyd's triangle row ends.
for r in range(1, 8):
    x = 0
    for c in range(1, r + 1):
        x = x * 10 + c
    print(x)
k = 0
for r in range(1, 6):
    for _ in range(r):
        k += 1
    print(r, k)
