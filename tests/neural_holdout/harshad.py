# Harshad numbers are divisible by the sum of their digits.
def digit_sum(n: int) -> int:
    s = 0
    while n > 0:
        s += n % 10
        n //= 10
    return s


count = 0
largest = 0
for n in range(1, 200):
    if n % digit_sum(n) == 0:
        count += 1
        largest = n
print(count, largest)
