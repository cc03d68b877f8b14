# FizzBuzz with numbers: -1 for Fizz, -2 for Buzz, -3 for FizzBuzz.
for i in range(1, 16):
    if i % 15 == 0:
        print(-3)
    elif i % 3 == 0:
        print(-1)
    elif i % 5 == 0:
        print(-2)
    else:
        print(i)
