# Multi-pile Nim: the first player wins exactly when the xor of the piles is not 0.
def first_player_wins(a: int, b: int, c: int) -> bool:
    return a ^ b ^ c != 0


print(first_player_wins(1, 2, 3), first_player_wins(3, 4, 5))
wins = 0
for a in range(1, 8):
    for b in range(1, 8):
        for c in range(1, 8):
            if first_player_wins(a, b, c):
                wins += 1
print(wins)
