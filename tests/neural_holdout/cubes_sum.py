# Nicomachus: the sum of the first n cubes is the square of the n-th triangular number.
def sum_cubes(n: int) -> int:
    s = 0
    for k in range(1, n + 1):
        s += k**3
    return s


for n in range(1, 6):
    t = n * (n + 1) // 2
    print(n, sum_cubes(n), sum_cubes(n) == t * t)
print(sum_cubes(100))
