# The sum of the first n odd numbers is n squared: checked with assert.
def sum_odd(n: int) -> int:
    s = 0
    for i in range(n):
        s += 2 * i + 1
    return s


for n in range(1, 30):
    assert sum_odd(n) == n * n
print(sum_odd(10), sum_odd(25))
