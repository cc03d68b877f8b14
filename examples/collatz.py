# Collatz: the number of steps for each start value, and the longest chain below 300.
def steps(n: int) -> int:
    count = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        count += 1
    return count


for n in range(1, 11):
    print(n, steps(n))

best = 1
best_steps = 0
for n in range(1, 300):
    s = steps(n)
    if s > best_steps:
        best = n
        best_steps = s
print(best, best_steps)
