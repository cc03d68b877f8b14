# Pythagorean triples with all sides at most 20.
count = 0
for a in range(1, 21):
    for b in range(a, 21):
        for c in range(b, 21):
            if a * a + b * b == c * c:
                print(a, b, c)
                count += 1
print(count)
