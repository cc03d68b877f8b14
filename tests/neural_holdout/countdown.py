# Count down over the odd numbers, skipping multiples of 3, stopping below 5.
n = 21
while True:
    n -= 2
    if n < 5:
        break
    if n % 3 == 0:
        continue
    print(n)
print(n)
