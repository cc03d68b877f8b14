# Towers of Hanoi: print each move as (from, to) and count them.
def hanoi(n: int, src: int, dst: int, via: int) -> int:
    if n == 0:
        return 0
    moves = hanoi(n - 1, src, via, dst)
    print(src, dst)
    moves += 1
    moves += hanoi(n - 1, via, dst, src)
    return moves


total = hanoi(3, 1, 3, 2)
print(total)
