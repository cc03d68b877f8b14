# Sum of the numbers on the diagonals of a number spiral of odd size.
def spiral_sum(size: int) -> int:
    total = 1
    corner = 1
    for ring in range(1, size // 2 + 1):
        for _ in range(4):
            corner += 2 * ring
            total += corner
    return total


print(spiral_sum(1), spiral_sum(3), spiral_sum(5))
print(spiral_sum(1001))
