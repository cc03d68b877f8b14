# expect: ZeroDivisionError
# The mean of an empty range divides by zero.
def mean(lo: int, hi: int) -> int:
    total = 0
    count = 0
    for i in range(lo, hi):
        total += i
        count += 1
    return total // count


print(mean(1, 11))
print(mean(5, 6))
print(mean(7, 7))
print(mean(1, 3))
