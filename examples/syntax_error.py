# A syntax error: nothing runs, not even the first print.
print(1)
x = (2 +
print(x)
