# A 5 by 5 multiplication table, and how many of its entries are even.
def row(i: int) -> None:
    print(i, i * 2, i * 3, i * 4, i * 5)


for i in range(1, 6):
    row(i)
even = 0
for i in range(1, 6):
    for j in range(1, 6):
        if i * j % 2 == 0:
            even += 1
print(even)
