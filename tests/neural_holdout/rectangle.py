# Area, perimeter and shape of rectangles.
def area(w: int, h: int) -> int:
    return w * h


def perimeter(w: int, h: int) -> int:
    return 2 * (w + h)


def is_square(w: int, h: int) -> bool:
    return w == h


print(area(3, 4), perimeter(3, 4), is_square(3, 4))
print(area(5, 5), perimeter(5, 5), is_square(5, 5))
