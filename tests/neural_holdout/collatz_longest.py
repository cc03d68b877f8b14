# Which starting number below 100 has the longest Collatz sequence?
def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


best = 0
best_n = 1
for n in range(1, 100):
    s = collatz_steps(n)
    if s > best:
        best = s
        best_n = n
print(best_n, best)
print(collatz_steps(27))
