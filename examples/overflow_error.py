# Factorials until one no longer fits in 32 bits: 13! raises OverflowError in jaxcc.
# CPython's ints never overflow, so CPython goes on to print 6227020800: the one place
# where jaxcc's output is only a prefix of CPython's (tests/test_examples.py knows).
def fact(n: int) -> int:
    r = 1
    for k in range(2, n + 1):
        r = r * k
    return r


for n in range(1, 13):
    print(n, fact(n))
print(fact(13))
