# Ways to make a dollar from quarters, dimes, nickels and pennies; and greedy change.
ways = 0
for q in range(5):
    for d in range(11):
        for n in range(21):
            if 25 * q + 10 * d + 5 * n <= 100:
                ways += 1
print(ways)
amount = 87
coins = 0
for c in range(4):
    size = 25 if c == 0 else 10 if c == 1 else 5 if c == 2 else 1
    coins += amount // size
    amount %= size
print(coins)
