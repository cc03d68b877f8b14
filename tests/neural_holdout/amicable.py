# Amicable numbers: each is the sum of the proper divisors of the other.
def divisor_sum(n: int) -> int:
    s = 0
    for d in range(1, n // 2 + 1):
        if n % d == 0:
            s += d
    return s


def amicable(a: int) -> bool:
    b = divisor_sum(a)
    return b != a and divisor_sum(b) == a


print(divisor_sum(220), divisor_sum(284))
print(amicable(220), amicable(284), amicable(6), amicable(100))
