# Sum of the multiples of 3 or 5 below a limit.
def sum_multiples(limit: int) -> int:
    s = 0
    for i in range(limit):
        if i % 3 == 0 or i % 5 == 0:
            s += i
    return s


print(sum_multiples(10), sum_multiples(1000))
