# Mutual recursion: is_even and is_odd call each other.
def is_even(n: int) -> bool:
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n: int) -> bool:
    if n == 0:
        return False
    return is_even(n - 1)


print(is_even(10), is_odd(10), is_even(7), is_odd(7))
print(is_even(0), is_odd(51))
