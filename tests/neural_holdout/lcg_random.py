# A small linear congruential generator; track the minimum, maximum and mean.
seed = 12345
lo = 100000
hi = -1
total = 0
for _ in range(20):
    seed = (seed * 75 + 74) % 65537
    lo = min(lo, seed)
    hi = max(hi, seed)
    total += seed
print(lo, hi, total // 20)
print(seed)
