# Nested loops with break and continue: a multiplication-table checksum and Pythagorean triples.
total = 0
for i in range(1, 101):
    for j in range(1, 101):
        if (i + j) % 7 == 0:
            continue
        total += i * j % 13
print(total)

triples = 0
for a in range(1, 60):
    for b in range(a, 60):
        c = b
        while c * c < a * a + b * b:
            c += 1
        if c * c == a * a + b * b and c < 60:
            triples += 1
            if triples <= 5:
                print(a, b, c)
print(triples)

found = 0
for i in range(10, 0, -1):
    j = 0
    while True:
        j += 1
        if j * i > 40:
            break
        if j % 2:
            continue
        found += 1
print(found)
