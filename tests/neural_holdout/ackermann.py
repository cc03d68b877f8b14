# The Ackermann function, for tiny inputs only.
def ack(m: int, n: int) -> int:
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))


print(ack(0, 0), ack(1, 2), ack(2, 3))
print(ack(3, 2), ack(3, 3))
