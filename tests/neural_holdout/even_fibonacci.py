# Sum of the even Fibonacci numbers not above four million.
a = 1
b = 2
total = 0
while a <= 4000000:
    if a % 2 == 0:
        total += a
    c = a + b
    a = b
    b = c
print(total)
