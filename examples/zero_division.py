# A ZeroDivisionError raised inside a function, after some output.
def average(total: int, count: int) -> int:
    return total // count


print(average(10, 2))
print(average(7, 0))
print(3)
