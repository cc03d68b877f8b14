# Triangular numbers and a test for them.
def triangle(n: int) -> int:
    return n * (n + 1) // 2


def is_triangular(x: int) -> bool:
    n = 0
    while triangle(n) < x:
        n += 1
    return triangle(n) == x


print(triangle(1), triangle(4), triangle(10), triangle(100))
count = 0
for x in range(1, 200):
    if is_triangular(x):
        count += 1
print(count, is_triangular(55), is_triangular(56))
