# expect: AssertionError
# A function that insists on sorted arguments.
def show_sorted(a: int, b: int, c: int) -> None:
    assert a <= b <= c
    print(a, b, c)


show_sorted(1, 2, 3)
show_sorted(4, 4, 9)
show_sorted(5, 3, 8)
print(0)
