# Classify triangles: 0 invalid, 1 scalene, 2 isosceles, 3 equilateral.
def kind(a: int, b: int, c: int) -> int:
    if a + b <= c or a + c <= b or b + c <= a:
        return 0
    if a == b == c:
        return 3
    if a == b or b == c or a == c:
        return 2
    return 1


def is_right(a: int, b: int, c: int) -> bool:
    return a * a + b * b == c * c


print(kind(1, 2, 3), kind(3, 4, 5), kind(2, 2, 3), kind(6, 6, 6))
print(is_right(3, 4, 5), is_right(2, 2, 3))
