# Modular inverse by brute force; -1 when there is none.
def mod_inverse(a: int, m: int) -> int:
    for x in range(1, m):
        if a * x % m == 1:
            return x
    return -1


print(mod_inverse(3, 11), mod_inverse(10, 17), mod_inverse(6, 9))
print(mod_inverse(7, 26), mod_inverse(2, 2))
