# Length of the repeating part of 1/n (n coprime to 10): the order of 10 mod n.
def cycle_length(n: int) -> int:
    r = 10 % n
    k = 1
    while r != 1:
        r = r * 10 % n
        k += 1
    return k


print(cycle_length(3), cycle_length(7), cycle_length(11), cycle_length(13))
best = 0
best_n = 0
for n in range(3, 100, 2):
    if n % 5 != 0 and cycle_length(n) > best:
        best = cycle_length(n)
        best_n = n
print(best_n, best)
