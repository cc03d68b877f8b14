# Truth tables of and, or, xor and implication.
for a in range(2):
    for b in range(2):
        p = a == 1
        q = b == 1
        print(p, q, p and q, p or q, p != q, not p or q)
