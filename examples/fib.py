# Fibonacci numbers, by recursion and by iteration, up to the largest that fits in int32.
def fib(n: int) -> int:
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def fib_iter(n: int) -> int:
    a = 0
    b = 1
    for _ in range(n):
        t = a + b
        a = b
        b = t
    return a


for i in range(15):
    print(i, fib(i))
print(fib(20) == fib_iter(20))
print(fib_iter(45))  # fib_iter(46) would compute fib(47), which leaves int32
