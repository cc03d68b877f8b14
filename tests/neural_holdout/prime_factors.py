# Print the prime factors of a number, smallest first.
def print_factors(n: int) -> None:
    p = 2
    while n > 1:
        while n % p == 0:
            print(p)
            n //= p
        p += 1


def largest_factor(n: int) -> int:
    p = 2
    while p * p <= n:
        if n % p == 0:
            n //= p
        else:
            p += 1
    return n


print_factors(360)
print(largest_factor(13195), largest_factor(97), largest_factor(1024))
