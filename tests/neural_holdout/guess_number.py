# Guess a secret number by halving the range; count the guesses.
def guesses(secret: int, lo: int, hi: int) -> int:
    count = 0
    while True:
        mid = (lo + hi) // 2
        count += 1
        if mid == secret:
            return count
        if mid < secret:
            lo = mid + 1
        else:
            hi = mid - 1


print(guesses(1, 1, 100), guesses(50, 1, 100), guesses(77, 1, 100))
worst = 0
for s in range(1, 101):
    worst = max(worst, guesses(s, 1, 100))
print(worst)
