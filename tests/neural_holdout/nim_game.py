# One-pile Nim: take 1 to 3, whoever takes the last stone wins.
def best_move(pile: int) -> int:
    m = pile % 4
    if m == 0:
        return 1
    return m


pile = 10
player = 1
while pile > 0:
    take = best_move(pile)
    pile -= take
    print(player, take, pile)
    player = 3 - player
print(3 - player)
