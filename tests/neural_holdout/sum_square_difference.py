# The square of the sum minus the sum of the squares of 1..n.
def square_of_sum(n: int) -> int:
    s = 0
    for i in range(1, n + 1):
        s += i
    return s * s


def sum_of_squares(n: int) -> int:
    s = 0
    for i in range(1, n + 1):
        s += i * i
    return s


print(square_of_sum(10) - sum_of_squares(10))
print(square_of_sum(100) - sum_of_squares(100))
