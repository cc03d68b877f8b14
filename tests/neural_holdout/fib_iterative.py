# Fibonacci numbers with a loop.
def fib(n: int) -> int:
    a = 0
    b = 1
    for _ in range(n):
        t = a + b
        a = b
        b = t
    return a


for i in range(12):
    print(fib(i))
print(fib(30), fib(40))
