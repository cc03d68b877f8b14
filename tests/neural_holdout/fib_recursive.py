# Fibonacci numbers, the naive recursive way.
def fib(n: int) -> int:
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


print(fib(0), fib(1), fib(2), fib(10))
print(fib(15), fib(18))
